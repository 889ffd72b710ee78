"""Configuration: every startup error is one line that says what to fix, and a non-zero exit."""

from __future__ import annotations

import subprocess
import sys

import pytest

from reviewer_app.config import ConfigError, load_config
from tests.fakes.keys import test_key_pair

BASE = {"GITHUB_WEBHOOK_SECRET": "s"}


def test_defaults() -> None:
    cfg = load_config(BASE)
    assert (cfg.host, cfg.port, cfg.database_url, cfg.concurrency, cfg.max_attempts) == (
        "0.0.0.0",
        8080,
        "sqlite:///reviewer.db",
        4,
        5,
    )
    assert cfg.renew_interval == cfg.lease_seconds / 3


def test_key_from_a_file(tmp_path) -> None:
    key = tmp_path / "app.pem"
    key.write_text(test_key_pair().private_pem)
    cfg = load_config({**BASE, "GITHUB_APP_ID": "42", "GITHUB_PRIVATE_KEY_PATH": str(key)})
    assert cfg.private_key.startswith("-----BEGIN") and cfg.github_configured


@pytest.mark.parametrize(
    "env,fragment",
    [
        ({"GITHUB_APP_ID": "42"}, "no private key"),
        ({"GITHUB_PRIVATE_KEY": test_key_pair().private_pem}, "GITHUB_APP_ID is not"),
        ({"GITHUB_APP_ID": "42", "GITHUB_PRIVATE_KEY_PATH": "/nonexistent/key.pem"}, "no such file"),
        ({"GITHUB_APP_ID": "42", "GITHUB_PRIVATE_KEY": "-----BEGIN RSA PRIVATE KEY-----\ngarbage\n"}, "not a valid"),
        ({"GITHUB_APP_ID": "abc", "GITHUB_PRIVATE_KEY": test_key_pair().private_pem}, "not a number"),
        ({"DATABASE_URL": "mysql://x/y"}, "DATABASE_URL"),
        ({"DATABASE_URL": "sqlite:///"}, "names no file"),
        ({"REVIEWER_CONCURENCY": "4"}, "did you mean REVIEWER_CONCURRENCY"),
        ({"REVIEWER_CONCURRENCY": "0"}, "below its minimum"),
        ({"REVIEWER_CONCURRENCY": "many"}, "is not a int"),
        ({"PORT": "70000"}, "above its maximum"),
        ({"REVIEWER_RETRY_BASE_SECONDS": "100", "REVIEWER_RETRY_MAX_SECONDS": "10"}, "RETRY_MAX"),
        ({"LOG_FORMAT": "xml"}, "LOG_FORMAT"),
    ],
)
def test_each_error_is_one_clear_line(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config({**BASE, **env})
    message = str(err.value)
    assert fragment in message and "\n" not in message
    assert "garbage" not in message and "PRIVATE KEY" not in message  # the key never reaches a message


def test_webhook_secret_is_required_once_the_app_is_configured() -> None:
    with pytest.raises(ConfigError, match="GITHUB_WEBHOOK_SECRET"):
        load_config({"GITHUB_APP_ID": "42", "GITHUB_PRIVATE_KEY": test_key_pair().private_pem})


@pytest.mark.parametrize(
    "env,fragment",
    [
        ({"GITHUB_APP_ID": "42", "GITHUB_WEBHOOK_SECRET": "s"}, "no private key"),
        ({"GITHUB_WEBHOOK_SECRET": "s", "REVIEWER_LEASE_SECONDZ": "3"}, "unknown setting REVIEWER_LEASE_SECONDZ"),
        ({"GITHUB_WEBHOOK_SECRET": "s", "DATABASE_URL": "oracle://db"}, "DATABASE_URL"),
    ],
)
def test_serve_stops_with_one_line_and_a_non_zero_exit(tmp_path, env: dict[str, str], fragment: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "reviewer_app.cli", "serve"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env},
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in result.stderr


def test_config_command_masks_secrets(tmp_path) -> None:
    env = {"PATH": "/usr/bin:/bin", "GITHUB_WEBHOOK_SECRET": "hunter2", "ANTHROPIC_API_KEY": "sk-ant-secret"}
    result = subprocess.run(
        [sys.executable, "-m", "reviewer_app.cli", "config"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 0
    assert "hunter2" not in result.stdout and "sk-ant-secret" not in result.stdout
    assert "GITHUB_WEBHOOK_SECRET=***" in result.stdout and "REVIEWER_CONCURRENCY=4" in result.stdout


def test_every_setting_is_documented() -> None:
    from pathlib import Path

    from reviewer_app.settings import SETTINGS

    doc = (Path(__file__).parent.parent / "docs" / "configuration.md").read_text()
    missing = [s.env for s in SETTINGS if f"`{s.env}`" not in doc]
    assert missing == [], f"add these to docs/configuration.md: {missing}"
