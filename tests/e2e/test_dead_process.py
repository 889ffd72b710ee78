"""Nothing waits for a dead process (issue #38, points 1 to 3): `reviewer-app serve` is killed with SIGKILL in the
middle of its check-run sync and outbox passes, restarted on the same host, and the restarted process takes the
duties over at once: the published review's check run completes and the queued reply goes out while the dead
process's duty leases have not run out yet."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from typing import Any

from tests.e2e.test_serve_subprocess import job_row
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.github import FakeGitHub
from tests.fakes.threads import FakesThread
from tests.harness import REPO, SOURCE
from tests.helpers import webhook_headers
from tests.payloads import issue_comment_event, pull_request_event
from tests.serve_process import ServeProcess, fakes_env, wait_until

DUTIES = ("duty:check-sync", "duty:outbox")


def duty_leases(db: str) -> dict[str, sqlite3.Row]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute("SELECT duty, owner, expires_at FROM duty_leases").fetchall()
    return {r["duty"]: r for r in rows}


def worker_row(db: str, pid: int) -> sqlite3.Row | None:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        return conn.execute("SELECT id, lease_seconds FROM workers WHERE pid = ?", (pid,)).fetchone()


def deliver(proc: ServeProcess, event: str, payload: dict[str, Any]) -> dict[str, Any]:
    body = json.dumps(payload).encode()
    status, answer = proc.post("/api/github/webhooks", body, webhook_headers(body, event=event))
    assert status == 202, answer
    return json.loads(answer)


def test_after_kill_9_mid_pass_a_restart_completes_the_check_run_and_sends_the_reply_at_once(tmp_path) -> None:
    github, anthropic = FakeGitHub(), FakeAnthropic()
    inst = github.add_installation()
    repo = github.add_repo(REPO, inst.id)
    pull = github.add_pull(REPO, 1, files=[SOURCE])
    github.set_permission(REPO, "maintainer", "write")
    db = str(tmp_path / "reviewer.db")
    with FakesThread(github, anthropic) as fakes:
        publishing = fakes.call(github.inject, "POST", r"/pulls/1/reviews$", "hang")
        env = fakes_env(
            f"sqlite:///{db}",
            fakes,
            github,
            REVIEWER_SCAN_SECONDS="0.2",
            REVIEWER_CHECK_SYNC_SECONDS="0.2",
            REVIEWER_DEBOUNCE_SECONDS="0",
            REVIEWER_SWEEP_SECONDS="0",
            REVIEWER_RECOVERY_SECONDS="0",
        )  # the default leases: 120 s for a job, 30 s for a duty
        first = ServeProcess(env, tmp_path / "first.log").start()
        try:
            common = {"repo": REPO, "repo_id": repo.id, "installation_id": inst.id}
            job_id = deliver(first, "pull_request", pull_request_event(number=1, head=pull.head_sha, **common))[
                "job_id"
            ]
            wait_until(lambda: publishing.hits == 1)  # the worker showed its check run in progress, and publishes
            # From now on the sync's completing PATCH and the outbox's reply are held: the process dies in both passes.
            completing = fakes.call(github.inject, "PATCH", r"/check-runs/\d+$", "hang", times=None)
            # (the outbox's reply looks for itself first; the pass may also wait for its write turn behind the PATCH)
            fakes.call(github.inject, "GET", r"/issues/1/comments$", "hang", times=None)
            fakes.call(github.release_hangs)
            wait_until(lambda: job_row(db, job_id)["state"] == "succeeded")
            comment = fakes.call(github.add_issue_comment, REPO, 1, "maintainer", "/review help")
            deliver(first, "issue_comment", issue_comment_event("/review help", comment_id=comment["id"], **common))

            def both_passes_held() -> bool:
                leases = duty_leases(db)
                return completing.hits > 0 and all(leases[d]["expires_at"] > time.time() for d in DUTIES)

            wait_until(both_passes_held)
            held = duty_leases(db)
            assert first.proc is not None
            dead = worker_row(db, first.proc.pid)
            assert dead is not None and all(f"-{first.proc.pid}-" in held[d]["owner"] for d in DUTIES), held
            first.proc.send_signal(signal.SIGKILL)
            first.proc.wait(10)
        finally:
            first.kill()
        # Its held requests never land (they are not released); new requests go through.
        fakes.call(github.clear_faults)
        [run] = fakes.call(github.check_runs_for, REPO, pull.head_sha)
        assert run["status"] == "in_progress"

        second = ServeProcess(env, tmp_path / "second.log").start()
        try:

            def done() -> bool:
                [run] = fakes.call(github.check_runs_for, REPO, pull.head_sha)
                replies = [c for c in fakes.call(github.issue_comments_for, REPO, 1) if c["user"]["type"] == "Bot"]
                return run["status"] == "completed" and len(replies) == 1

            wait_until(done)
            seen_at = time.time()
            # The dead process's leases were taken over before they would have run out.
            assert all(seen_at < held[d]["expires_at"] for d in DUTIES), (seen_at, [dict(r) for r in held.values()])
            assert second.proc is not None
            alive = worker_row(db, second.proc.pid)
            assert alive is not None
            assert all(duty_leases(db)[d]["owner"] == alive["id"] for d in DUTIES)
            assert worker_row(db, first.proc.pid)["lease_seconds"] == 0  # listed gone at once
            assert f"{dead['id']} (pid {first.proc.pid} on this host) is dead" in second.log_path.read_text()
        finally:
            second.kill()
        [run] = fakes.call(github.check_runs_for, REPO, pull.head_sha)
        assert run["conclusion"] == "success" and len(fakes.call(github.reviews_for, REPO, 1)) == 1
