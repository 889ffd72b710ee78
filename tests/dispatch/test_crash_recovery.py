"""Killed after the model answered and before publishing: the restart publishes the stored answer."""

from __future__ import annotations

import json
import sqlite3

from tests.e2e.test_serve_subprocess import job_row
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.github import FakeGitHub
from tests.fakes.threads import FakesThread
from tests.harness import REPO, SOURCE
from tests.helpers import webhook_headers
from tests.payloads import pull_request_event
from tests.serve_process import ServeProcess, fakes_env, wait_until


def test_killed_after_the_model_answered_publishes_once_without_a_second_model_call(tmp_path) -> None:
    github, anthropic = FakeGitHub(), FakeAnthropic()
    inst = github.add_installation()
    repo = github.add_repo(REPO, inst.id)
    pull = github.add_pull(REPO, 1, files=[SOURCE])
    anthropic.script_tool_answer(
        {
            "summary": "Stored answer.",
            "comments": [{"path": "src/widget.py", "line": 2, "body": "Consider a docstring."}],
        }
    )
    db = str(tmp_path / "reviewer.db")
    with FakesThread(github, anthropic) as fakes:
        # The publisher's look for an existing review hangs: the process dies right there. (The first look, before
        # the model call, finds the head not reviewed yet.)
        hang = fakes.call(github.inject, "GET", r"/pulls/1/reviews", "hang", times=1, after=1)
        env = fakes_env(
            f"sqlite:///{db}",
            fakes,
            github,
            REVIEWER_LEASE_SECONDS="1",
            REVIEWER_RENEW_SECONDS="0.3",
            REVIEWER_SCAN_SECONDS="0.2",
            REVIEWER_CHECK_SYNC_SECONDS="0.2",
            REVIEWER_SWEEP_SECONDS="0",  # the sweep would list PR 1's reviews and take the hang meant for the publisher
        )
        payload = pull_request_event(
            number=1,
            head=pull.head_sha,
            base_sha=pull.base_sha,
            title=pull.title,
            body="",
            repo=REPO,
            repo_id=repo.id,
            installation_id=inst.id,
        )
        first = ServeProcess(env, tmp_path / "serve1.log").start()
        try:
            body = json.dumps(payload).encode()
            status, answer = first.post("/api/github/webhooks", body, webhook_headers(body))
            assert status == 202
            job_id = json.loads(answer)["job_id"]
            wait_until(lambda: job_row(db, job_id)["answer"] is not None)
            wait_until(lambda: hang.hits > 0)
            first.kill()
        finally:
            first.kill()
        fakes.call(github.release_hangs)
        assert fakes.call(github.reviews_for, REPO, 1) == []

        second = ServeProcess(env, tmp_path / "serve2.log").start()
        try:
            wait_until(lambda: job_row(db, job_id)["state"] == "succeeded")
            reviews = fakes.call(github.reviews_for, REPO, 1)
            assert len(reviews) == 1 and "Stored answer." in reviews[0]["body"]
            # The stored answer is published: neither the review nor its verification is asked again.
            assert (len(anthropic.review_requests), len(anthropic.verify_requests)) == (1, 1)
            with sqlite3.connect(db) as conn:
                outcomes = [
                    r[0] for r in conn.execute("SELECT outcome FROM attempts WHERE job_id = ? ORDER BY id", (job_id,))
                ]
            assert outcomes == ["lease_expired", "succeeded"]
        finally:
            second.kill()
