"""Every failure to start is one line and an exit: the real command in a subprocess, with a deadline, for a database
that cannot be opened or reached, a key path that is a directory and a key that is not one."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.fakes.keys import test_key_pair
from tests.helpers import SECRET
from tests.pg import CONNECT_ERRORS, postgres_dsn, unreachable
from tests.serve_process import free_port

DEADLINE = 30.0  # seconds; the process needs ~2 s idle, a loaded machine more. A hang fails with TimeoutExpired.


def start(tmp_path: Path, *command: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The reviewer-app command as an operator starts it, in its own directory, with nothing but ``env``."""
    return subprocess.run(
        [sys.executable, "-m", "reviewer_app.cli.main", *command],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HOST": "127.0.0.1", **env},
        cwd=tmp_path,
        timeout=DEADLINE,
    )


def one_line_exit(result: subprocess.CompletedProcess[str], status: int = 2) -> str:
    """The single line the process wrote before exiting with ``status``."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == status, result.stderr
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


SERVICE = {"GITHUB_WEBHOOK_SECRET": SECRET, "REVIEWER_RUNNER": "noop"}
COMMANDS = (("serve", "--port", "0"), ("worker",))


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_sqlite_file_in_a_missing_directory(tmp_path: Path, command: tuple[str, ...]) -> None:
    result = start(tmp_path, *command, **SERVICE, DATABASE_URL="sqlite:///no/such/dir/reviewer.db")
    line = one_line_exit(result)
    assert line.startswith("reviewer-app: cannot open SQLite database 'no/such/dir/reviewer.db'")
    assert "the directory 'no/such/dir' does not exist" in line
    assert not (tmp_path / "no").exists()


def _reachable_dsn() -> str:
    dsn = postgres_dsn()

    async def probe() -> None:
        conn = await asyncpg.connect(dsn, timeout=5)
        await conn.close()

    try:
        asyncio.run(probe())
    except CONNECT_ERRORS as exc:
        unreachable(dsn, exc)
    return dsn


def _with(dsn: str, *, database: str | None = None, port: int | None = None) -> str:
    parts = urlsplit(dsn)
    netloc = parts.netloc if port is None else f"{parts.netloc.rsplit(':', 1)[0]}:{port}"
    return urlunsplit(parts._replace(netloc=netloc, path=f"/{database}" if database else parts.path))


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_postgresql_with_a_wrong_database(tmp_path: Path, command: tuple[str, ...]) -> None:
    url = _with(_reachable_dsn(), database="no_such_database_here")
    line = one_line_exit(start(tmp_path, *command, **SERVICE, DATABASE_URL=url))
    assert "cannot open PostgreSQL database" in line and 'database "no_such_database_here" does not exist' in line


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_postgresql_on_a_port_nobody_listens_on(tmp_path: Path, command: tuple[str, ...]) -> None:
    url = _with(_reachable_dsn(), port=free_port())
    line = one_line_exit(start(tmp_path, *command, **SERVICE, DATABASE_URL=url))
    assert "cannot open PostgreSQL database" in line and line.endswith("; check DATABASE_URL")


def test_a_key_path_that_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "keys").mkdir()
    result = start(tmp_path, "serve", GITHUB_WEBHOOK_SECRET=SECRET, GITHUB_APP_ID="42", GITHUB_PRIVATE_KEY_PATH="keys")
    line = one_line_exit(result)
    assert line == (
        "reviewer-app: configuration error: GITHUB_PRIVATE_KEY_PATH='keys' is a directory: name the key file (.pem) in it"
    )


def test_a_malformed_key_names_its_file(tmp_path: Path) -> None:
    pem = test_key_pair().private_pem
    (tmp_path / "app.pem").write_text(pem.replace(pem.splitlines()[3], "not base64 at all"))
    result = start(
        tmp_path, "serve", GITHUB_WEBHOOK_SECRET=SECRET, GITHUB_APP_ID="42", GITHUB_PRIVATE_KEY_PATH="app.pem"
    )
    line = one_line_exit(result)
    assert "GITHUB_PRIVATE_KEY_PATH='app.pem': not a valid GitHub App private key" in line
    assert "not base64" not in line and "PRIVATE KEY" not in line  # nothing of the key itself


def test_an_encrypted_key_says_so(tmp_path: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.BestAvailableEncryption(b"passphrase"),
    )
    (tmp_path / "app.pem").write_bytes(pem)
    result = start(
        tmp_path, "worker", GITHUB_WEBHOOK_SECRET=SECRET, GITHUB_APP_ID="42", GITHUB_PRIVATE_KEY_PATH="app.pem"
    )
    assert "GITHUB_PRIVATE_KEY_PATH='app.pem': the GitHub App private key is encrypted" in one_line_exit(result)


def test_bedrock_without_a_region_says_what_to_set(tmp_path: Path) -> None:
    # No AWS_REGION, no AWS_DEFAULT_REGION, no profile (HOME is empty): the AWS chain finds no region.
    app = {"GITHUB_APP_ID": "42", "GITHUB_PRIVATE_KEY": test_key_pair().private_pem, "REVIEWER_RUNNER": "review"}
    result = start(tmp_path, "serve", "--port", "0", **{**SERVICE, **app}, REVIEWER_MODEL_PROVIDER="bedrock")
    line = one_line_exit(result)
    assert line.startswith("reviewer-app: Amazon Bedrock: No AWS region was provided"), line
    assert "AWS_REGION" in line


# Setup mode (no App configured yet): the database is opened before the setup page starts, so no App is registered on
# GitHub by a server that would then exit on its database (issue 42).
SETUP = {"REVIEWER_RUNNER": "noop", "REVIEWER_ENV_FILE": "app.env"}


def test_setup_mode_with_a_sqlite_file_in_a_missing_directory_starts_no_setup_page(tmp_path: Path) -> None:
    result = start(tmp_path, "serve", "--port", "0", **SETUP, DATABASE_URL="sqlite:///no/such/dir/reviewer.db")
    line = one_line_exit(result)
    assert line.startswith("reviewer-app: cannot open SQLite database 'no/such/dir/reviewer.db'")
    assert "Setup token" not in result.stdout + result.stderr


def test_setup_mode_with_postgresql_unreachable_starts_no_setup_page(tmp_path: Path) -> None:
    url = _with(_reachable_dsn(), port=free_port())
    result = start(tmp_path, "serve", "--port", "0", **SETUP, DATABASE_URL=url)
    line = one_line_exit(result)
    assert "cannot open PostgreSQL database" in line and line.endswith("; check DATABASE_URL")
    assert "Setup token" not in result.stdout + result.stderr
