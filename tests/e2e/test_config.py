"""Configuration: every startup error is one line that says what to fix, and a non-zero exit."""

from __future__ import annotations

import subprocess
import sys

import pytest

from reviewer_app.settings.config import ConfigError, load_config
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
        ({"REVIEWER_CONCURRENCY": "many"}, "is not a whole number"),
        ({"REVIEWER_LEASE_SECONDS": "long"}, "is not a number"),
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
        [sys.executable, "-m", "reviewer_app.cli.main", "serve"],
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
        [sys.executable, "-m", "reviewer_app.cli.main", "config"],
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

    from reviewer_app.settings.table import SETTINGS

    doc = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    missing = [s.env for s in SETTINGS if f"`{s.env}`" not in doc]
    assert missing == [], f"add these to docs/configuration.md: {missing}"


def _config_lines(report) -> dict[str, str]:
    return dict(line.split("=", 1) for line in report.lines())


def test_config_marks_what_is_wrong_or_missing_and_prints_the_rest() -> None:
    from reviewer_app.cli.config_report import inspect_config

    report = inspect_config({"GITHUB_APP_ID": "42", "REVIEWER_CONCURRENCY": "many", "PORT": "9000"})
    lines = _config_lines(report)
    assert lines["PORT"] == "9000" and lines["REVIEWER_MAX_ATTEMPTS"] == "5"  # what it can read, it prints
    assert lines["REVIEWER_CONCURRENCY"] == "many  # invalid: REVIEWER_CONCURRENCY='many' is not a whole number"
    assert lines["GITHUB_WEBHOOK_SECRET"].startswith("  # missing: `serve` does not start without it")
    assert lines["ANTHROPIC_API_KEY"] == "  # missing: no review runs until it is set"
    assert any("GITHUB_APP_ID is set but no private key" in p for p in report.problems)
    assert report.broken


def test_config_with_nothing_set_points_at_the_setup_page() -> None:
    from reviewer_app.cli.config_report import inspect_config

    report = inspect_config({})
    lines = _config_lines(report)
    assert lines["GITHUB_APP_ID"] == "  # not set: `reviewer-app serve` starts the setup page to register an App"
    assert lines["GITHUB_WEBHOOK_SECRET"] == ""  # not required before there is an App
    assert not report.broken and report.problems == []


def test_config_shows_the_private_key_where_it_was_set(tmp_path) -> None:
    from reviewer_app.cli.config_report import inspect_config

    key = tmp_path / "app.pem"
    key.write_text(test_key_pair().private_pem)
    base = {**BASE, "GITHUB_APP_ID": "42", "ANTHROPIC_API_KEY": "sk-ant-x"}
    by_path = _config_lines(inspect_config({**base, "GITHUB_PRIVATE_KEY_PATH": str(key)}))
    assert by_path["GITHUB_PRIVATE_KEY"] == "" and by_path["GITHUB_PRIVATE_KEY_PATH"] == str(key)
    assert load_config({**base, "GITHUB_PRIVATE_KEY_PATH": str(key)}).masked()["GITHUB_PRIVATE_KEY"] == ""
    by_text = _config_lines(inspect_config({**base, "GITHUB_PRIVATE_KEY": test_key_pair().private_pem}))
    assert by_text["GITHUB_PRIVATE_KEY"] == "***" and by_text["GITHUB_PRIVATE_KEY_PATH"] == ""


def test_config_command_prints_an_incomplete_configuration_and_exits_2(tmp_path) -> None:
    """`reviewer-app config` printed nothing when the configuration was incomplete, which is when it is needed."""
    env = {"PATH": "/usr/bin:/bin", "GITHUB_APP_ID": "42", "REVIEWER_RETRY_BASE_SECONDS": "soon"}
    result = subprocess.run(
        [sys.executable, "-m", "reviewer_app.cli.main", "config"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "REVIEWER_CONCURRENCY=4\n" in result.stdout and "GITHUB_APP_ID=42\n" in result.stdout
    assert "REVIEWER_RETRY_BASE_SECONDS=soon  # invalid: " in result.stdout
    assert "GITHUB_WEBHOOK_SECRET=  # missing" in result.stdout
    assert "reviewer-app: configuration error: GITHUB_APP_ID is set but no private key" in result.stderr


@pytest.mark.parametrize(
    ("provider", "model", "verify_model"),
    [
        ("anthropic", "claude-sonnet-4-5", "claude-haiku-4-5"),
        ("bedrock", "anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic.claude-haiku-4-5-20251001-v1:0"),
        ("vertex", "claude-sonnet-4-5@20250929", "claude-haiku-4-5@20251001"),
    ],
)
def test_each_model_provider_has_default_model_ids_in_its_own_spelling(provider, model, verify_model) -> None:
    cfg = load_config({**BASE, "REVIEWER_MODEL_PROVIDER": provider})
    assert (cfg.provider.name, cfg.model, cfg.verify_model) == (provider, model, verify_model)
    chosen = load_config({**BASE, "REVIEWER_MODEL_PROVIDER": provider, "REVIEWER_MODEL": "my-model"})
    assert (chosen.model, chosen.verify_model) == ("my-model", verify_model)


def test_an_unknown_provider_or_unreadable_gateway_headers_stop_the_start_in_one_line() -> None:
    with pytest.raises(
        ConfigError, match="^REVIEWER_MODEL_PROVIDER='azure' is not one of: anthropic, bedrock, vertex$"
    ):
        load_config({**BASE, "REVIEWER_MODEL_PROVIDER": "azure"})
    with pytest.raises(ConfigError, match="^ANTHROPIC_CUSTOM_HEADERS line 2 is not 'Name: value'") as bad:
        load_config({**BASE, "ANTHROPIC_CUSTOM_HEADERS": "X-Ok: 1\nsecret-token-without-a-name"})
    assert "secret-token" not in str(bad.value)


def test_what_reviews_wait_for_depends_on_the_provider() -> None:
    from reviewer_app.settings.config import missing_for_reviews

    app = {**BASE, "GITHUB_APP_ID": "1", "GITHUB_PRIVATE_KEY": test_key_pair().private_pem}
    assert [m.env for m in missing_for_reviews(load_config(app))] == ["ANTHROPIC_API_KEY"]
    # Bedrock's credentials and region come from AWS's own chain (a profile, a role): nothing the settings can tell.
    assert missing_for_reviews(load_config({**app, "REVIEWER_MODEL_PROVIDER": "bedrock"})) == ()
    vertex = {**app, "REVIEWER_MODEL_PROVIDER": "vertex"}
    assert [m.env for m in missing_for_reviews(load_config(vertex))] == ["CLOUD_ML_REGION"]
    assert missing_for_reviews(load_config({**vertex, "CLOUD_ML_REGION": "us-east5"})) == ()


def test_config_masks_the_gateway_headers_and_shows_the_providers_settings() -> None:
    from reviewer_app.cli.config_report import inspect_config

    report = inspect_config(
        {
            **BASE,
            "REVIEWER_MODEL_PROVIDER": "bedrock",
            "AWS_REGION": "eu-west-1",
            "ANTHROPIC_CUSTOM_HEADERS": "K: gw-77",
        }
    )
    lines = _config_lines(report)
    assert lines["ANTHROPIC_CUSTOM_HEADERS"] == "***" and "gw-77" not in "\n".join(report.lines())
    assert (lines["REVIEWER_MODEL_PROVIDER"], lines["AWS_REGION"]) == ("bedrock", "eu-west-1")
    assert lines["REVIEWER_MODEL"] == "anthropic.claude-sonnet-4-5-20250929-v1:0"


def _cli(tmp_path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reviewer_app.cli.main", *argv],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env},
        cwd=tmp_path,
        timeout=60,
    )


def test_config_json_gives_each_setting_its_mark_and_what_stops_serve(tmp_path) -> None:
    import json

    result = _cli(tmp_path, "config", "--json", GITHUB_APP_ID="42", ANTHROPIC_API_KEY="sk-ant-secret")
    assert result.returncode == 2  # an App id without its secret: serve would refuse it
    data = json.loads(result.stdout)
    assert data["settings"]["GITHUB_APP_ID"] == {"value": "42", "mark": None}
    assert data["settings"]["ANTHROPIC_API_KEY"]["value"] == "***" and "sk-ant-secret" not in result.stdout
    assert data["settings"]["GITHUB_WEBHOOK_SECRET"]["mark"].startswith("missing")
    assert data["serve_would_start"] is False and data["problems"]
    ok = json.loads(_cli(tmp_path, "config", "--json", GITHUB_WEBHOOK_SECRET="s").stdout)
    assert ok["serve_would_start"] is True and ok["problems"] == []


def test_a_name_that_looks_like_a_setting_is_warned_about(tmp_path) -> None:
    """Issue 42: GITHUB_APPID was ignored without a word, leaving the App id unset."""
    result = _cli(tmp_path, "config", GITHUB_APPID="42", ANTHROPIC_KEY="k", GITHUB_SHA="abc", GITHUB_TOKEN="t")
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    assert warnings == [
        "reviewer-app: warning: ANTHROPIC_KEY is no setting of reviewer-app and is ignored: did you mean "
        "ANTHROPIC_API_KEY?",
        "reviewer-app: warning: GITHUB_APPID is no setting of reviewer-app and is ignored: did you mean GITHUB_APP_ID?",
    ]
    (tmp_path / ".env").write_text("GITHUB_PRIVATEKEY_PATH=/k.pem\n")
    served = _cli(tmp_path, "status")
    assert (
        "GITHUB_PRIVATEKEY_PATH is no setting of reviewer-app and is ignored: did you mean GITHUB_PRIVATE_KEY_PATH?"
        in (served.stderr)
    )
