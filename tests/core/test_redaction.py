"""Credentials in URLs never reach a terminal, a log or a page: one masking function, used wherever a URL is shown."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reviewer_app.logs import setup_logging
from reviewer_app.redaction import Redactor, redact_url
from reviewer_app.settings.config import ConfigError, load_config
from reviewer_app.store.base import StoreUnavailable
from reviewer_app.store.postgres import PostgresStore

SECRET = "hunter2"
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("postgresql://bob:hunter2@db.example:5432/reviews", "postgresql://bob:***@db.example:5432/reviews"),
        ("postgres://bob:hunter2@h1,h2:5433/db?sslmode=require", "postgres://bob:***@h1,h2:5433/db?sslmode=require"),
        ("postgresql://:hunter2@db/x", "postgresql://:***@db/x"),
        (
            "postgresql://bob:hun/ter@2@db/x",
            "postgresql://bob:***@db/x",
        ),  # unescaped "/" and "@": masked too much, not too little
        ("postgresql://bob:hunter2@[::1/db", "postgresql://bob:***@[::1/db"),  # not even a valid URL
        ("postgresql:///reviews?host=/run/pg&password=hunter2", "postgresql:///reviews?host=/run/pg&password=***"),
        ("postgresql://db/x?sslpassword=hunter2&user=bob", "postgresql://db/x?sslpassword=***&user=bob"),
        ("host=db user=bob password='hunter 2' dbname=x", "host=db user=bob password=*** dbname=x"),
        ("https://x-access-token:hunter2@ghe.example/api/v3", "https://x-access-token:***@ghe.example/api/v3"),
        ("cannot open 'postgresql://bob:hunter2@db/x': refused", "cannot open 'postgresql://bob:***@db/x': refused"),
        # Nothing to hide: left as it is.
        ("postgresql://bob@db.example/reviews", "postgresql://bob@db.example/reviews"),
        ("https://ghe.example:8443/api/v3", "https://ghe.example:8443/api/v3"),
        ("sqlite:////data/reviewer.db", "sqlite:////data/reviewer.db"),
        ("http://[::1]:8080/", "http://[::1]:8080/"),
    ],
)
def test_redact_url_masks_passwords_and_keeps_the_rest(text: str, shown: str) -> None:
    assert redact_url(text) == shown


def _cli(tmp_path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reviewer_app.cli.main", *argv],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT), **env},
        cwd=tmp_path,
        timeout=60,
    )


def test_the_config_command_masks_credentials_in_every_url(tmp_path) -> None:
    result = _cli(
        tmp_path,
        "config",
        GITHUB_WEBHOOK_SECRET="s",
        DATABASE_URL="postgresql://bob:hunter2@db.example:5432/reviews?sslpassword=hunter2",
        GITHUB_API_URL="https://x-access-token:hunter2@ghe.example/api/v3",
        ANTHROPIC_BASE_URL="https://proxy-user:hunter2@llm-proxy.example",
    )
    assert result.returncode == 0, result.stderr
    assert SECRET not in result.stdout + result.stderr
    assert "DATABASE_URL=postgresql://bob:***@db.example:5432/reviews?sslpassword=***" in result.stdout
    assert "GITHUB_API_URL=https://x-access-token:***@ghe.example/api/v3" in result.stdout


@pytest.mark.parametrize(
    "url",
    [
        "mysql://bob:hunter2@db.example/reviews",  # not supported
        "postgresql://bob:hunter2@/reviews",  # no host
        "postgresql://bob:hunter2@[::1/reviews",  # not a URL at all: an error, not a traceback
    ],
)
def test_configuration_errors_about_the_database_url_mask_its_password(tmp_path, url: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config({"GITHUB_WEBHOOK_SECRET": "s", "DATABASE_URL": url})
    assert SECRET not in str(err.value) and "bob:***@" in str(err.value)
    result = _cli(tmp_path, "serve", GITHUB_WEBHOOK_SECRET="s", DATABASE_URL=url)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert SECRET not in result.stderr and "DATABASE_URL" in result.stderr


async def test_a_database_that_cannot_be_opened_is_named_without_its_password() -> None:
    store = PostgresStore("postgresql://bob:hunter2@127.0.0.1:1/reviews", timeout_ms=2000)
    with pytest.raises(StoreUnavailable) as err:
        await store.open()
    assert SECRET not in str(err.value) and "bob:***@127.0.0.1:1" in str(err.value)


def test_migrate_store_names_the_target_without_its_password(tmp_path) -> None:
    (tmp_path / "reviewer.db").touch()
    result = _cli(
        tmp_path,
        "migrate-store",
        "--from",
        f"sqlite:///{tmp_path / 'reviewer.db'}",
        "--to",
        "postgresql://bob:hunter2@127.0.0.1:1/reviews",
    )
    assert result.returncode != 0
    assert SECRET not in result.stdout + result.stderr and "bob:***@" in result.stderr


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("x-amz-security-token:IQoJb3JpZ2lu\nhost:h", "x-amz-security-token:***\nhost:h"),
        ("Authorization: token ghs_16C7e42F292c6912E7710c838347Ae178B4a", "Authorization: ***"),
        (
            "{'Authorization': b'AWS4-HMAC-SHA256 Credential=AKIA/x, Signature=ab', 'Host': 'h'}",
            "{'Authorization': ***, 'Host': 'h'}",
        ),
        ('{"x-api-key": "key-123", "accept": "application/json"}', '{"x-api-key": ***, "accept": "application/json"}'),
        ("Cookie: session=abc; other=def", "Cookie: ***"),
        ("the gateway said gw-secret-7d1e9a40 twice: gw-secret-7d1e9a40", "the gateway said *** twice: ***"),
        ("a line of the key: MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "a line of the key: ***"),
        ("minted ghs_16C7e42F292c6912E7710c838347Ae178B4a", "minted ***"),
        ("postgresql://bob:hunter2@db/x", "postgresql://bob:***@db/x"),
        ("x-authorization-scheme: none; on", "x-authorization-scheme: none; on"),  # not a credential header
    ],
)
def test_the_log_redactor_masks_secrets_and_credential_headers(text: str, shown: str) -> None:
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"
    assert Redactor(["gw-secret-7d1e9a40", pem, "on", ""])(text) == shown


def test_a_logged_traceback_is_masked_in_json_lines_too() -> None:
    import io
    import json
    import logging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    stream = io.StringIO()
    try:
        setup_logging("DEBUG", "json", stream, secrets=["sk-ant-live-key-0001"])
        try:
            raise RuntimeError("the key sk-ant-live-key-0001 was refused")
        except RuntimeError:
            logging.getLogger("reviewer_app.test").exception("failed with %s", "sk-ant-live-key-0001")
        logging.getLogger("botocore.auth").debug("CanonicalRequest: x-amz-security-token:abc")
        logging.getLogger("urllib3.connectionpool").debug("Starting new HTTPS connection")
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    [line] = [json.loads(x) for x in stream.getvalue().splitlines()]  # the third parties' DEBUG lines dropped
    assert line["msg"] == "failed with ***" and "was refused" in line["exc"]
    assert "sk-ant-live-key-0001" not in stream.getvalue()
