"""The Dockerfile, checked without a Docker engine: pinned small base, locked and hashed dependencies, non-root,
/data volume, health check, command."""

from __future__ import annotations

import fnmatch
import http.server
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


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


def test_small_base_images_pinned_to_one_exact_release() -> None:
    bases = [args.split()[0] for k, args in instructions() if k == "FROM"]
    # An exact Python release (a digest may follow); "python:3.11-slim" moves under us with every rebuild.
    assert bases and len(set(bases)) == 1, bases
    assert re.fullmatch(r"python:3\.11\.\d+-slim(-[a-z]+)?(@sha256:[0-9a-f]{64})?", bases[0]), bases[0]
    installs = [args for k, args in instructions() if k == "RUN" and "pip install" in args]
    assert installs and all("--no-cache-dir" in args for args in installs)


def pip_installs() -> list[str]:
    """Each `pip install` command of the Dockerfile, one string each (commands joined with && are split)."""
    runs = [args for k, args in instructions() if k == "RUN" and "pip install" in args]
    return [cmd.strip() for run in runs for cmd in run.split("&&") if "pip install" in cmd]


def test_every_third_party_package_comes_from_a_lock_file_with_hashes() -> None:
    installs = pip_installs()
    from_locks = [cmd for cmd in installs if " -r " in cmd]
    assert {shlex.split(cmd)[shlex.split(cmd).index("-r") + 1] for cmd in from_locks} == set(LOCKS)
    assert all("--require-hashes" in cmd for cmd in from_locks), from_locks
    # The package itself: built with the locked tools, its dependencies already installed, nothing downloaded.
    (project,) = [cmd for cmd in installs if " -r " not in cmd]
    assert project.endswith(" .") and all(
        flag in project for flag in ("--no-deps", "--no-index", "--no-build-isolation")
    )
    copied = [src for k, args in instructions() if k == "COPY" for src in shlex.split(args)[:-1]]
    assert all(lock in copied for lock in LOCKS)


LOCKS = ("requirements.lock", "requirements-build.lock")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(\S+)")  # extras kept: hishel[async,httpx]


def locked(path: Path) -> dict[str, tuple[str, list[str]]]:
    """{normalised name: (version, hashes)} of a pip-compile lock file."""
    out: dict[str, tuple[str, list[str]]] = {}
    name = ""
    for line in path.read_text().splitlines():
        pin = _PIN.match(line)
        if pin:
            name = canonicalize_name(pin[1])
            out[name] = (pin[2], [])
        elif line.strip().startswith("--hash=sha256:"):
            out[name][1].append(line.strip().split(":", 1)[1].rstrip(" \\"))
    return out


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


@pytest.mark.parametrize(
    ("lock", "requirements"),
    [
        ("requirements.lock", lambda p: p["project"]["dependencies"]),
        ("requirements-build.lock", lambda p: p["build-system"]["requires"]),
        (
            "requirements-test.lock",
            lambda p: [*p["project"]["dependencies"], *p["project"]["optional-dependencies"]["test"]],
        ),
    ],
)
def test_the_locks_pin_every_requirement_within_its_range_with_hashes(lock: str, requirements) -> None:
    pins = locked(ROOT / lock)
    assert pins, lock
    for name, (_version, hashes) in pins.items():
        assert hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes), (name, hashes)
    for spec in requirements(pyproject()):
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in pins, f"{lock} lacks {name}: refresh it (docs/operations.md, Dependencies)"
        assert req.specifier.contains(pins[name][0], prereleases=True), (name, pins[name][0], str(req.specifier))


def test_the_test_lock_runs_the_apps_dependencies_at_the_versions_the_image_ships() -> None:
    app, tests = locked(ROOT / "requirements.lock"), locked(ROOT / "requirements-test.lock")
    differ = {n: (app[n][0], tests[n][0]) for n in app.keys() & tests.keys() if app[n][0] != tests[n][0]}
    assert differ == {}, f"refresh requirements-test.lock with --constraint requirements.lock: {differ}"
    assert app.keys() <= tests.keys(), app.keys() - tests.keys()


def test_ci_and_the_readme_install_the_tests_from_the_locks_with_hashes() -> None:
    # A fresh machine installs exactly what passed: the locks, every file checked against its hash, and the package
    # itself without resolving anything (an unlocked `pip install -e '.[test]'` once took a graphql-core that failed).
    ci = (ROOT / ".ci" / "run").read_text().replace("\\\n", " ")
    installs = [line for line in ci.splitlines() if "pip install" in line]
    from_locks = [cmd for cmd in installs if " -r " in cmd]
    assert from_locks and all("--require-hashes" in cmd for cmd in from_locks), installs
    named = {shlex.split(cmd)[i + 1] for cmd in from_locks for i, w in enumerate(shlex.split(cmd)) if w == "-r"}
    assert named == {"requirements-test.lock", "requirements-build.lock"}
    (project,) = [cmd for cmd in installs if " -r " not in cmd]
    assert "--no-deps" in project and "--no-build-isolation" in project and project.rstrip().endswith("-e .")
    readme = (ROOT / "README.md").read_text()
    assert "pip install --require-hashes -r requirements-test.lock && pip install --no-deps -e ." in readme
    assert "pip install -e '.[test]'" not in readme


def test_ci_installs_into_a_venv_of_its_own() -> None:
    """Issue 42: .ci/run installed into whatever python3 came first on PATH. It makes its venv with python3 -m venv,
    and every pip, ruff and pytest runs on that venv's interpreter."""
    ci = (ROOT / ".ci" / "run").read_text().replace("\\\n", " ")
    commands = [line.strip() for line in ci.splitlines() if line.strip() and not line.strip().startswith("#")]
    assert 'venv="${REVIEWER_CI_VENV:-.ci/venv}"' in commands
    assert '[ -x "$venv/bin/python" ] || python3 -m venv "$venv"' in commands
    assert 'python="$venv/bin/python"' in commands
    tools = [c for c in commands if re.search(r"-m (pip|ruff|pytest)\b", c)]
    assert len(tools) == 5 and all(c.startswith('"$python" -m ') for c in tools), tools
    assert ".ci/venv/" in (ROOT / ".gitignore").read_text().splitlines()


def test_a_fresh_venv_installs_the_test_lock(tmp_path) -> None:
    # What .ci/run does on a new machine, resolved in an empty venv (nothing installed to hide a missing pin): a
    # lock that named `hishel` where githubkit asks for `hishel[async,httpx]` passed here and failed there. Files
    # come from pip's cache after .ci/run's own install; the index is asked only for what is not cached.
    venv = tmp_path / "venv"
    # The venv's own pip: the one a new machine has (Python's bundled pip; a newer pip forgives what it refuses).
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    locks = ["-r", str(ROOT / "requirements-build.lock"), "-r", str(ROOT / "requirements-test.lock")]
    done = subprocess.run(
        [*pip, "install", "--dry-run", "--quiet", "--require-hashes", *locks], capture_output=True, text=True
    )
    errors = [line for line in done.stderr.splitlines() if not line.startswith("WARNING")]
    assert done.returncode == 0, "\n".join(errors[-15:])


def test_the_tests_run_on_exactly_the_locked_versions() -> None:
    # What a fresh machine installs is what passed: in CI, every package of the test lock is installed at its pin.
    drift = {}
    for name, (version, _) in locked(ROOT / "requirements-test.lock").items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed is None or Version(installed) != Version(version):
            drift[name] = (version, installed)
    if drift and os.environ.get("CI") != "true":
        pytest.skip(
            f"this environment differs from requirements-test.lock (the README's test command installs it): {drift}"
        )
    assert drift == {}, f"installed differently from requirements-test.lock: {drift}"


# The last release with a published advisory that reaches this server, and the first without (docs/security.md).
ADVISORY_FLOORS = {
    "aiohttp": ("3.14.2", "3.14.3"),
    "orjson": ("3.11.5", "3.11.6"),
    "pyjwt": ("2.12.1", "2.13.0"),
    "cryptography": ("49.0.0", "50.0.0"),
    "setuptools": ("78.1.0", "78.1.1"),
    "requests": ("2.32.3", "2.32.4"),
    "urllib3": ("2.4.0", "2.5.0"),
}


@pytest.mark.parametrize(("name", "vulnerable", "fixed"), [(n, *v) for n, v in sorted(ADVISORY_FLOORS.items())])
def test_dependency_floors_exclude_versions_with_known_advisories(name: str, vulnerable: str, fixed: str) -> None:
    project = pyproject()
    specs = [Requirement(s) for s in (*project["project"]["dependencies"], *project["build-system"]["requires"])]
    (req,) = [r for r in specs if canonicalize_name(r.name) == name]
    assert not req.specifier.contains(vulnerable) and req.specifier.contains(fixed), (name, str(req.specifier))
    lock = "requirements-build.lock" if name == "setuptools" else "requirements.lock"
    assert Version(locked(ROOT / lock)[name][0]) >= Version(fixed)


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


def _grace() -> float:
    from reviewer_app.settings.config import Config

    return Config().shutdown_grace_seconds


def _docs() -> dict[str, str]:
    paths = [ROOT / "README.md", ROOT / "Dockerfile", *sorted((ROOT / "docs").glob("*.md"))]
    return {str(p.relative_to(ROOT)): p.read_text() for p in paths}


def test_every_docker_run_gives_the_shutdown_grace_time() -> None:
    """Docker's default stop timeout (10 s) is shorter than the app's grace (20 s) plus its last pass: a `docker stop`
    would kill running reviews instead of handing them back."""
    runs = []
    for name, text in _docs().items():
        for command in re.findall(r"docker run\b(?:[^\n]*\\\n)*[^\n]*", text):
            if " -d " in command or "-p 8080" in command:  # a server, not a one-off (a restore's shell)
                runs.append((name, command))
    assert len(runs) >= 2, runs
    for name, command in runs:
        found = re.search(r"--stop-timeout[ =](\d+)", command)
        assert found and int(found[1]) >= _grace() + 5, (name, command)


def test_the_compose_file_keeps_the_volume_the_key_and_the_stop_timeout() -> None:
    import yaml

    service = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]["reviewer-app"]
    grace = re.fullmatch(r"(\d+)s", service["stop_grace_period"])
    assert grace and int(grace[1]) >= _grace() + 5
    assert "reviewer-data:/data" in service["volumes"]  # the image's state directory
    # Passed on when set; the app reports it missing (issue 42: `:?` failed `docker compose logs` and `down`).
    assert service["environment"]["ANTHROPIC_API_KEY"] == "${ANTHROPIC_API_KEY:-}"
    assert service["build"] == "."


def test_no_compose_command_needs_the_key_only_the_app_does() -> None:
    """Compose interpolates the whole file for every command: a required variable (`${X:?}`, `${X?}`) anywhere fails
    `docker compose logs` and `down` run without it. `docker compose config` proves it where Compose is installed."""
    text = (ROOT / "compose.yaml").read_text()
    assert not re.search(r"\$\{[A-Z_]+:?\?", text)
    compose = shutil.which("docker")
    if compose is None or subprocess.run([compose, "compose", "version"], capture_output=True).returncode != 0:
        return  # no Docker Compose here: the file's test above stands for it
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    done = subprocess.run([compose, "compose", "config", "--quiet"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_docs_show_the_setup_token_without_hiding_errors() -> None:
    """The documented `| grep "Setup token"` hid the line saying why the server did not start."""
    setup = (ROOT / "docs" / "setup.md").read_text()
    assert 'grep "Setup token"' not in setup
    assert 'grep -iE "setup token|error|anthropic_api_key"' in setup


def test_the_docs_use_the_images_paths_and_back_up_without_sqlite3() -> None:
    """The image keeps its state in /data and has no sqlite3 program: a backup recipe must work inside it."""
    for name, text in _docs().items():
        assert "/var/lib/reviewer" not in text, name
        commands = "\n".join(re.findall(r"```sh\n(.*?)```", text, flags=re.S))
        assert not re.search(r"^\s*sqlite3 ", commands, flags=re.M), name
    operations = (ROOT / "docs" / "operations.md").read_text()
    assert "docker exec reviewer-app reviewer-app backup /data/" in operations


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
            result = subprocess.run(
                [sys.executable, *argv[1:]], env={**os.environ, "PORT": str(port)}, capture_output=True, timeout=30
            )
            assert (result.returncode == 0) is healthy, result.stderr
    assert "--timeout=" in options and "--interval=" in options


def test_everything_the_build_copies_is_in_the_context() -> None:
    ignored = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
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
