"""How fast the command starts: `reviewer-app --help` to exit, and `reviewer-app serve` to a healthy /healthz.

Each run is a fresh subprocess (`python -m reviewer_app.cli.main ...`, what the installed `reviewer-app` script runs),
so the figures include the interpreter and every import. `serve` runs as a configured App (an App id and key, a
webhook secret, a model key; the review runner built) on a fresh SQLite file; its GitHub and Claude URLs point at a
closed port, since start-up asks neither. Every process runs in a temporary directory with the measured code first
on its path (a process started in the checkout would import the checkout's code whatever ``--rev`` says). The median of ``--runs`` runs is reported, with the fastest and slowest,
and which heavy modules the process imported (asked by `-X importtime`, in a run of its own).

    python bench/startup.py --runs 10                 # this checkout
    python bench/startup.py --runs 10 --rev main      # another commit, exported with `git archive`
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Modules whose import start-up should not pay for until they are used.
HEAVY = ("anthropic", "httpx", "pydantic", "tree_sitter", "asyncpg")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def private_key_pem() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    ).decode()


def environment(source: Path, tmp: Path, key: str) -> dict[str, str]:
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens: start-up must not need GitHub or Claude
    # Byte code is written and read as an installed app's is (pip compiles at install): PYTHONDONTWRITEBYTECODE, set
    # on some machines, would make every run compile every module from source.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("REVIEWER_", "GITHUB_", "ANTHROPIC_")) and k != "PYTHONDONTWRITEBYTECODE"
    }
    return {
        **env,
        "PYTHONPATH": str(source),
        "REVIEWER_ENV_FILE": str(tmp / ".env"),
        "GITHUB_WEBHOOK_SECRET": "bench-secret",
        "GITHUB_APP_ID": "42",
        "GITHUB_PRIVATE_KEY": key,
        "GITHUB_API_URL": closed,
        "ANTHROPIC_API_KEY": "sk-ant-bench",
        "ANTHROPIC_BASE_URL": closed,
        "HOST": "127.0.0.1",
        "LOG_LEVEL": "WARNING",
    }


def time_help(env: dict[str, str], tmp: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "reviewer_app.cli.main", "--help"], env=env, cwd=tmp, check=True, capture_output=True
    )
    return time.perf_counter() - started


def time_serve(env: dict[str, str], tmp: Path, run: int, deadline_seconds: float) -> float:
    port = free_port()
    env = {**env, "PORT": str(port), "DATABASE_URL": f"sqlite:///{tmp / f'serve-{run}.db'}"}
    log = open(tmp / f"serve-{run}.log", "wb")  # noqa: SIM115 - closed below
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "reviewer_app.cli.main", "serve"], env=env, cwd=tmp, stdout=log, stderr=log
    )
    try:
        deadline = started + deadline_seconds
        while time.perf_counter() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"serve exited with {proc.returncode}: {(tmp / f'serve-{run}.log').read_text()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                    if r.status == 200:
                        return time.perf_counter() - started
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.005)
        raise SystemExit(f"serve was not healthy within {deadline_seconds} s")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def heavy_imports(env: dict[str, str], tmp: Path, command: str) -> list[str]:
    """Which of HEAVY the process imports while it runs ``command`` (`--help`) or builds `serve`'s service."""
    if command == "--help":
        code = "import sys\nfrom reviewer_app.cli.main import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
    else:
        code = (
            "import asyncio, sys\nfrom reviewer_app.settings.config import load_config\nfrom reviewer_app.service import "
            "build_service\nasync def go():\n    svc = await build_service(load_config(allow_setup=False))\n"
            "    await svc.stop()\nasyncio.run(go())\n"
        )
    code += f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp, check=True, capture_output=True, text=True
    ).stdout
    found = out.strip().splitlines()[-1] if out.strip() else ""
    return [m for m in found.split(",") if m]


def summary(seconds: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(statistics.median(seconds) * 1000, 1),
        "min_ms": round(min(seconds) * 1000, 1),
        "max_ms": round(max(seconds) * 1000, 1),
    }


def export(rev: str, into: Path) -> Path:
    """``rev``'s tree, as `git archive` gives it: the code of that commit, nothing of the working tree."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each command (default 10)")
    parser.add_argument("--rev", help="measure this commit's code (git archive) instead of this checkout")
    parser.add_argument("--deadline", type=float, default=60.0, help="seconds serve may take to be healthy")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="startup-") as d:
        tmp = Path(d)
        source = export(args.rev, tmp / "src") if args.rev else ROOT
        env = environment(source, tmp, private_key_pem())
        # The measured code compiled first, as `pip install` does: no run pays for compiling it.
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(source / "reviewer_app")], env=env, check=True)
        time_help(env, tmp)  # one warm-up run: the byte-code cache written, the file system cache filled
        helps = [time_help(env, tmp) for _ in range(args.runs)]
        serves = [time_serve(env, tmp, i, args.deadline) for i in range(args.runs)]
        env_build = {**env, "DATABASE_URL": f"sqlite:///{tmp / 'imports.db'}"}
        result = {
            "code": args.rev or "this checkout",
            "runs": args.runs,
            "help": {**summary(helps), "heavy_imports": heavy_imports(env, tmp, "--help")},
            "serve_to_healthy": {**summary(serves), "heavy_imports": heavy_imports(env_build, tmp, "serve")},
            "load_average_1m": round(os.getloadavg()[0], 2),
        }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"code: {result['code']}; {args.runs} runs each; load average {result['load_average_1m']}")
    print(f"{'command':<26} {'median ms':>10} {'min ms':>8} {'max ms':>8}  heavy modules imported")
    for name, key in (("reviewer-app --help", "help"), ("serve to healthy", "serve_to_healthy")):
        r = result[key]
        mods = ", ".join(r["heavy_imports"]) or "none"
        print(f"{name:<26} {r['median_ms']:>10} {r['min_ms']:>8} {r['max_ms']:>8}  {mods}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
