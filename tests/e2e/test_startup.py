"""Start-up pays for no model SDK: `reviewer-app --help` and `serve`'s start import no anthropic; the client (and the
SDK under it) is built in a worker thread once the server answers, and every job waits for it there, off the event
loop (review/sdk.py; bench/startup.py measures both)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.fakes.github import FakeGitHub
from tests.helpers import SECRET

HELP = """
import sys
from reviewer_app.cli.main import main
try:
    main(["--help"])
except SystemExit:
    pass
print("anthropic" in sys.modules)
"""

SERVE_START = """
import asyncio, sys
from reviewer_app.settings.config import load_config
from reviewer_app.service import build_service

async def start() -> None:
    svc = await build_service(load_config(allow_setup=False))
    print("anthropic" in sys.modules)  # the service is built as `serve` builds it: reviews can run
    await svc.model_client.ready()  # what the first job (or the warm-up after start) does
    print("anthropic" in sys.modules, type(svc.model_client.get()).__name__)
    await svc.stop()

asyncio.run(start())
"""


def run(code: str, env: dict[str, str]) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_the_command_and_its_help_import_no_model_sdk() -> None:
    out = run(HELP, {})
    assert out[0] == "usage:" and out[-1] == "False"  # the help was printed, and no SDK was imported for it


def test_serve_builds_its_service_without_the_model_sdk_and_loads_it_on_first_use(tmp_path) -> None:
    github = FakeGitHub()
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'reviewer.db'}",
        "REVIEWER_ENV_FILE": str(tmp_path / ".env"),
        "GITHUB_WEBHOOK_SECRET": SECRET,
        "GITHUB_APP_ID": str(github.app_id),
        "GITHUB_PRIVATE_KEY": github.private_key,
        "GITHUB_API_URL": "http://127.0.0.1:9",  # nothing is asked of GitHub or the model here
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
    }
    assert run(SERVE_START, env) == ["False", "True", "AsyncAnthropic"]
