"""Killed between sending a batch and its result: a new process picks the batch up, without sending it again."""

from __future__ import annotations

import json
import sqlite3

from tests.e2e.test_serve_subprocess import job_row, wait_until
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.github import FakeGitHub
from tests.fakes.threads import FakesThread
from tests.harness import REPO, SOURCE
from tests.helpers import webhook_headers
from tests.payloads import pull_request_event
from tests.serve_process import ServeProcess, fakes_env


def batch_rows(db: str, job_id: int) -> list[sqlite3.Row]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        return conn.execute("SELECT * FROM batch_requests WHERE job_id = ?", (job_id,)).fetchall()


def test_killed_while_batched_a_new_process_gets_the_result_with_no_second_submit(tmp_path) -> None:
    github, anthropic = FakeGitHub(), FakeAnthropic()
    inst = github.add_installation()
    repo = github.add_repo(REPO, inst.id)
    github.set_file(REPO, ".github/reviewer.yml", "batch: true\n")
    pull = github.add_pull(REPO, 1, files=[SOURCE])
    anthropic.hold_batches = True
    anthropic.script_tool_answer({"summary": "Answered by the batch.", "comments": []})
    db = str(tmp_path / "reviewer.db")
    with FakesThread(github, anthropic) as fakes:
        env = fakes_env(
            f"sqlite:///{db}",
            fakes,
            github,
            REVIEWER_LEASE_SECONDS="2",
            REVIEWER_RENEW_SECONDS="0.5",
            REVIEWER_SCAN_SECONDS="0.2",
            REVIEWER_CHECK_SYNC_SECONDS="0.2",
            REVIEWER_SWEEP_SECONDS="0",
            REVIEWER_BATCH="1",
            REVIEWER_BATCH_POLL_SECONDS="0.2",
            REVIEWER_BATCH_GATHER_SECONDS="0.1",
        )
        payload = pull_request_event(
            "opened",
            number=1,
            head=pull.head_sha,
            base_sha=pull.base_sha,
            repo=REPO,
            repo_id=repo.id,
            installation_id=inst.id,
            title=pull.title,
            body="",
        )
        first = ServeProcess(env, tmp_path / "serve1.log").start(timeout=60)
        try:
            body = json.dumps(payload).encode()
            status, answer = first.post("/api/github/webhooks", body, webhook_headers(body))
            assert status == 202
            job_id = json.loads(answer)["job_id"]
            wait_until(lambda: job_row(db, job_id)["state"] == "queued" and batch_rows(db, job_id))
            first.kill()  # SIGKILL: the batch runs on at Anthropic, nobody here waits for it
        finally:
            first.kill()
        [row] = batch_rows(db, job_id)
        assert row["state"] == "pending"
        fakes.call(anthropic.end_batches)  # the batch ends while no process runs
        # A process killed in the middle of a duty pass holds that duty's lease until it runs out (2 minutes): let
        # the dead process's leases run out now instead of waiting for them.
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE duty_leases SET expires_at = 0")

        second = ServeProcess(env, tmp_path / "serve2.log").start(timeout=60)
        try:
            wait_until(lambda: job_row(db, job_id)["state"] == "succeeded", timeout=60)
            reviews = fakes.call(github.reviews_for, REPO, 1)
            assert len(reviews) == 1 and "Answered by the batch." in reviews[0]["body"]
            assert len(anthropic.batch_creates) == 1  # not sent again
            assert anthropic.message_requests == []  # nor asked interactively
            [row] = batch_rows(db, job_id)
            assert row["state"] == "succeeded" and row["input_tokens"] > 0
            assert job_row(db, job_id)["attempts"] == 1
        finally:
            second.kill()
