"""The Dockerfile, checked without a Docker engine: small base, non-root, /data volume, health check, command."""

from __future__ import annotations

import fnmatch
import http.server
import json
import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def instructions(path: Path = ROOT / "Dockerfile") -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, args = line.partition(" ")
        out.append((keyword.upper(), args.strip()))
    return out


def final_stage() -> list[tuple[str, str]]:
    steps = instructions()
    last_from = max(i for i, (k, _) in enumerate(steps) if k == "FROM")
    return steps[last_from:]


def only(stage: list[tuple[str, str]], keyword: str) -> str:
    found = [args for k, args in stage if k == keyword]
    assert len(found) == 1, f"expected one {keyword}, found {found}"
    return found[0]


def env_of(stage: list[tuple[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for keyword, args in stage:
        if keyword == "ENV":
            env.update(dict(item.split("=", 1) for item in shlex.split(args)))
    return env


def test_small_base_images() -> None:
    bases = [args.split()[0] for k, args in instructions() if k == "FROM"]
    assert bases and all(b == "python:3.11-slim" for b in bases)
    installs = [args for k, args in instructions() if k == "RUN" and "pip install" in args]
    assert installs and all("--no-cache-dir" in args for args in installs)


def test_runs_as_a_non_root_user() -> None:
    user = only(final_stage(), "USER").split(":")[0]
    assert user not in ("root", "0", "")
    creating = " ".join(args for k, args in final_stage() if k == "RUN")
    assert "useradd" in creating and user in creating


def test_state_lives_in_the_data_volume() -> None:
    stage = final_stage()
    assert "/data" in json.loads(only(stage, "VOLUME"))
    env = env_of(stage)
    assert env["DATABASE_URL"] == "sqlite:////data/reviewer.db"
    assert env["REVIEWER_ENV_FILE"] == "/data/.env"
    assert only(stage, "WORKDIR") == "/data"
    assert "chown reviewer:reviewer /data" in " ".join(args for k, args in stage if k == "RUN")


def test_exposes_the_port_and_serves() -> None:
    stage = final_stage()
    assert only(stage, "EXPOSE") == "8080" and env_of(stage)["PORT"] == "8080"
    assert json.loads(only(stage, "CMD")) == ["reviewer-app", "serve"]


class _Health(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        self.send_response(self.status if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def health_server(status: int) -> Iterator[int]:
    handler = type("Handler", (_Health,), {"status": status})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_the_healthcheck_asks_healthz_with_python_alone() -> None:
    check = only(final_stage(), "HEALTHCHECK")
    options, _, command = check.partition("CMD ")
    assert "curl" not in check and "wget" not in check
    argv = json.loads(command)
    assert argv[0] == "python" and "urllib" in argv[-1] and "/healthz" in argv[-1]
    for status, healthy in ((200, True), (503, False)):
        with health_server(status) as port:
            result = subprocess.run([sys.executable, *argv[1:]], env={**os.environ, "PORT": str(port)},
                                    capture_output=True, timeout=30)  # fmt: skip
            assert (result.returncode == 0) is healthy, result.stderr
    assert "--timeout=" in options and "--interval=" in options


def test_everything_the_build_copies_is_in_the_context() -> None:
    ignored = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")]  # fmt: skip
    assert ".env" in ignored and ".git" in ignored  # secrets and history never reach the builder
    for keyword, args in instructions():
        if keyword != "COPY" or args.startswith("--from"):
            continue
        *sources, _dest = shlex.split(args)
        for source in sources:
            assert (ROOT / source).exists(), source
            assert not any(fnmatch.fnmatch(source, pattern) for pattern in ignored), source
    # The package's manifest is a link to the repository's file, and the build copies both.
    assert (ROOT / "reviewer_app" / "app-manifest.yml").resolve() == (ROOT / "app-manifest.yml").resolve()
