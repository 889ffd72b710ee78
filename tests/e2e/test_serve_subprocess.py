"""End to end: `reviewer-app serve` as a process, signed webhooks over HTTP, kill -9 mid-job, restart."""

from __future__ import annotations

import json
import signal
import sqlite3

from tests.helpers import SECRET, encode, pr_payload, sha, webhook_headers
from tests.serve_process import ServeProcess, wait_until


def job_row(db: str, job_id: int):
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        return conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()


def test_kill_9_mid_job_then_restart_finishes_the_job(tmp_path) -> None:
    db = str(tmp_path / "reviewer.db")
    env = {
        "DATABASE_URL": f"sqlite:///{db}",
        "GITHUB_WEBHOOK_SECRET": SECRET,
        "REVIEWER_RUNNER": "noop",
        "REVIEWER_NOOP_SECONDS": "60",
        "REVIEWER_LEASE_SECONDS": "1",
        "REVIEWER_RENEW_SECONDS": "0.3",
        "REVIEWER_SCAN_SECONDS": "0.2",
    }
    first = ServeProcess(env, tmp_path / "serve1.log").start()
    try:
        body = encode(pr_payload(head=sha(1)))
        status, answer = first.post("/api/github/webhooks", body, webhook_headers(body))
        assert status == 202
        job_id = json.loads(answer)["job_id"]
        wait_until(lambda: job_row(db, job_id)["state"] == "running")
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
    finally:
        first.kill()
    assert job_row(db, job_id)["state"] == "running"  # abandoned: only its lease's expiry can free it

    second = ServeProcess({**env, "REVIEWER_NOOP_SECONDS": "0"}, tmp_path / "serve2.log").start()
    try:
        wait_until(lambda: job_row(db, job_id)["state"] == "succeeded")
        with sqlite3.connect(db) as conn:
            outcomes = [
                r[0] for r in conn.execute("SELECT outcome FROM attempts WHERE job_id = ? ORDER BY id", (job_id,))
            ]
        assert outcomes == ["lease_expired", "succeeded"]
        # And the restarted process keeps admitting and answering.
        body = encode(pr_payload(number=2, head=sha(2)))
        status, _ = second.post("/api/github/webhooks", body, webhook_headers(body))
        assert status == 202
        assert second.terminate() == 0
    finally:
        second.kill()


def test_sigterm_hands_back_running_work(tmp_path) -> None:
    db = str(tmp_path / "reviewer.db")
    env = {
        "DATABASE_URL": f"sqlite:///{db}",
        "GITHUB_WEBHOOK_SECRET": SECRET,
        "REVIEWER_RUNNER": "noop",
        "REVIEWER_NOOP_SECONDS": "60",
        "REVIEWER_SHUTDOWN_GRACE_SECONDS": "0.2",
    }
    proc = ServeProcess(env, tmp_path / "serve.log").start()
    try:
        body = encode(pr_payload(head=sha(1)))
        status, answer = proc.post("/api/github/webhooks", body, webhook_headers(body))
        job_id = json.loads(answer)["job_id"]
        wait_until(lambda: job_row(db, job_id)["state"] == "running")
        assert proc.terminate() == 0
    finally:
        proc.kill()
    row = job_row(db, job_id)
    assert row["state"] == "queued" and row["lease_token"] is None and row["attempts"] == 0


def test_refuses_to_start_without_a_webhook_secret(tmp_path) -> None:
    """An App id without its secret is a broken configuration, not a fresh one (which starts the setup page:
    tests/web/test_setup.py), so serve stops with one line."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "reviewer_app.cli.main", "serve"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "DATABASE_URL": f"sqlite:///{tmp_path}/x.db", "GITHUB_APP_ID": "42"},
        cwd=tmp_path,
        timeout=30,
    )
    assert result.returncode == 2
    assert "GITHUB_WEBHOOK_SECRET is not set" in result.stderr and "Traceback" not in result.stderr


def test_serve_and_worker_on_a_port_in_use_exit_at_once_with_one_line(tmp_path) -> None:
    """`serve` on a port in use printed a traceback and then never exited (the main thread waited for the SQLite
    connection's thread): a supervisor saw a live, useless process."""
    import socket
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {
            "PATH": "/usr/bin:/bin",
            "DATABASE_URL": f"sqlite:///{tmp_path}/x.db",
            "GITHUB_WEBHOOK_SECRET": SECRET,
            "REVIEWER_RUNNER": "noop",
        }
        for command in (["serve", "--host", "127.0.0.1", "--port", str(port)], ["worker", "--port", str(port)]):
            result = subprocess.run(
                [sys.executable, "-m", "reviewer_app.cli.main", *command],
                capture_output=True,
                text=True,
                env={**env, "HOST": "127.0.0.1"},
                cwd=tmp_path,
                timeout=30,
            )
            assert result.returncode == 2, (command, result.stderr)
            assert f"cannot listen on 127.0.0.1:{port}: address already in use" in result.stderr, result.stderr
            assert "Traceback" not in result.stderr


def test_without_the_model_key_readyz_says_so_and_the_log_names_only_what_is_missing(tmp_path) -> None:
    """With the App configured and no ANTHROPIC_API_KEY, /readyz answered 200 although no review could ever run,
    and the log also claimed "no GitHub App configured"."""
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    from tests.fakes.keys import test_key_pair
    from tests.serve_process import free_port

    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path}/reviewer.db",
        "GITHUB_WEBHOOK_SECRET": SECRET,
        "GITHUB_APP_ID": "42",
        "GITHUB_PRIVATE_KEY": test_key_pair().private_pem,
        "GITHUB_API_URL": f"http://127.0.0.1:{free_port()}",  # never asked: nothing runs without the key
        "ANTHROPIC_API_KEY": "",
    }
    proc = ServeProcess(env, tmp_path / "serve.log").start()
    try:
        try:
            urllib.request.urlopen(proc.url + "/readyz", timeout=10)
            raise AssertionError("/readyz answered 200 without the model key")
        except urllib.error.HTTPError as e:
            assert e.code == 503
            reason = json.loads(e.read())["reason"]
        assert reason == "no review can run: ANTHROPIC_API_KEY (the model key) is not set"
        body = encode(pr_payload(head=sha(1)))
        assert proc.post("/api/github/webhooks", body, webhook_headers(body))[0] == 202  # kept for later
        assert proc.terminate() == 0
    finally:
        proc.kill()
    log = proc.log_path.read_text()
    warnings = [line for line in log.splitlines() if " WARNING " in line]
    assert len(warnings) == 1 and "ANTHROPIC_API_KEY (the model key) is not set" in warnings[0], warnings
    assert "GitHub App" not in log

    # A worker without the key has nothing to run: it says what is missing and exits at once.
    result = subprocess.run(
        [sys.executable, "-m", "reviewer_app.cli.main", "worker"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env, "REVIEWER_ENV_FILE": str(tmp_path / ".env")},
        cwd=tmp_path,
        timeout=30,
    )
    assert result.returncode == 2
    assert "worker: nothing to run: ANTHROPIC_API_KEY (the model key) is not set" in result.stderr
    assert "GitHub App" not in result.stderr
