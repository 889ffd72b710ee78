"""Run `reviewer-app serve` as a subprocess for end-to-end tests, and talk to it over HTTP."""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.helpers import SECRET


def fakes_env(database_url: str, fakes: Any, github: Any, **settings: str) -> dict[str, str]:
    """The environment of an app process that talks to the fakes of ``fakes`` (a FakesThread) as its GitHub App
    and Claude, plus ``settings`` (environment variable names to values)."""
    return {
        "DATABASE_URL": database_url,
        "GITHUB_WEBHOOK_SECRET": SECRET,
        "GITHUB_APP_ID": str(github.app_id),
        "GITHUB_PRIVATE_KEY": github.private_key,
        "GITHUB_API_URL": fakes.github_url,
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "ANTHROPIC_BASE_URL": fakes.anthropic_url,
        **settings,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(cond: Any, timeout: float = 60.0) -> Any:
    """Poll ``cond`` (from a test thread, while processes work) until it is truthy; its value. The deadline is
    generous because a loaded machine runs the processes slowly; a condition met returns at once."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"condition not met within {timeout} s")


def _kill_leftovers() -> None:
    """At exit (a finished run, or SIGTERM turned into SystemExit by conftest.py): no server outlives the tests."""
    for proc in list(_LIVE):
        if proc.poll() is None:
            proc.kill()


_LIVE: set[subprocess.Popen[bytes]] = set()
atexit.register(_kill_leftovers)


class ServeProcess:
    """`reviewer-app serve` (or ``command="worker"``, which gets ``--port`` for its health port unless
    ``health=False``: then ``start`` only checks that the process is up, and the test waits on its effects)."""

    def __init__(
        self,
        env: dict[str, str],
        log_path: Path,
        *,
        args: tuple[str, ...] = (),
        command: str = "serve",
        health: bool = True,
    ) -> None:
        self.port = free_port()
        self.command = command
        self.health = health
        # A .env of the test's own, so a developer's ./.env never leaks into a test.
        own_env_file = {"REVIEWER_ENV_FILE": str(log_path.parent / ".env")}
        self.env = {**os.environ, **own_env_file, **env, "PORT": str(self.port), "HOST": "127.0.0.1"}
        self.log_path = log_path
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> ServeProcess:  # a deadline: a loaded machine imports slowly
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        extra = ("--port", str(self.port)) if self.command == "worker" and self.health else ()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "reviewer_app.cli.main", self.command, *self.args, *extra],
            env=self.env,
            stdout=log,
            stderr=log,
        )
        _LIVE.add(self.proc)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.command} exited with {self.proc.returncode}: {self.log_path.read_text()}")
            if not self.health:
                return self
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.05)
        self.kill()  # a process that never became healthy must not outlive its test (it would load the machine)
        raise AssertionError(f"{self.command} did not become healthy: {self.log_path.read_text()}")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def terminate(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        self.proc.terminate()
        return self.proc.wait(timeout)

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        req = urllib.request.Request(self.url + path, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
