"""A worker killed mid-answer (its answer stored, its POST in flight): the lease expires, the next process takes the
job over, and the thread gets exactly one answer from one model call, on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.github import FakeGitHub
from tests.fakes.github.routes.threads import add_review_reply
from tests.fakes.github.shapes import user_json
from tests.fakes.threads import FakesThread
from tests.harness import REPO, SOURCE
from tests.helpers import webhook_headers
from tests.payloads import review_comment_event
from tests.pg import create_schema, drop_schema, postgres_dsn
from tests.serve_process import ServeProcess, fakes_env, wait_until

BOT = "reviewer-app[bot]"


class Database:
    """Reads the app's job and attempt rows, from SQLite or from a PostgreSQL schema."""

    def __init__(self, tmp_path: Path, backend: str) -> None:
        self.backend = backend
        self.path = str(tmp_path / "reviewer.db")
        self.schema: str | None = None
        if backend == "postgres":
            self.schema = asyncio.run(create_schema(postgres_dsn()))
            dsn = postgres_dsn()
            self.url = f"{dsn}{'&' if '?' in dsn else '?'}search_path={self.schema}"
        else:
            self.url = f"sqlite:///{self.path}"

    def rows(self, query: str, *args: Any) -> list[dict[str, Any]]:
        if self.backend == "sqlite":
            with sqlite3.connect(self.path) as conn:
                conn.row_factory = sqlite3.Row
                return [dict(r) for r in conn.execute(query.replace("$1", "?"), args).fetchall()]

        async def read() -> list[dict[str, Any]]:
            conn = await asyncpg.connect(postgres_dsn(), server_settings={"search_path": self.schema or ""})
            try:
                return [dict(r) for r in await conn.fetch(query, *args)]
            finally:
                await conn.close()

        return asyncio.run(read())

    def job(self, job_id: int) -> dict[str, Any]:
        return self.rows("SELECT * FROM jobs WHERE id = $1", job_id)[0]

    def drop(self) -> None:
        if self.schema is not None:
            asyncio.run(drop_schema(postgres_dsn(), self.schema))


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_killed_mid_answer_the_next_worker_answers_once(tmp_path, backend) -> None:
    github, anthropic = FakeGitHub(), FakeAnthropic()
    inst = github.add_installation()
    repo = github.add_repo(REPO, inst.id)
    pull = github.add_pull(REPO, 1, files=[SOURCE])
    root_id = github.next_id()
    github.review_comments[(REPO, 1)] = [
        {"id": root_id, "path": "src/widget.py", "line": 2, "body": "Why a constant?", "user": user_json(BOT)}
    ]
    reply = add_review_reply(github, REPO, 1, root_id, pull.user, "It is on purpose, no?")
    anthropic.script_answer("Then say so in a comment next to it.")
    db = Database(tmp_path, backend)
    payload = review_comment_event(
        reply,
        login=pull.user,
        number=1,
        head=pull.head_sha,
        base_sha=pull.base_sha,
        repo=REPO,
        repo_id=repo.id,
        installation_id=inst.id,
        author=pull.user,
    )
    try:
        with FakesThread(github, anthropic) as fakes:
            # The answer's POST hangs: the process dies with its request in flight, its answer stored.
            hang = fakes.call(github.inject, "POST", r"/comments/\d+/replies$", "hang", times=1)
            env = fakes_env(
                db.url,
                fakes,
                github,
                REVIEWER_LEASE_SECONDS="2",
                REVIEWER_RENEW_SECONDS="0.3",
                REVIEWER_SCAN_SECONDS="0.2",
                REVIEWER_CHECK_SYNC_SECONDS="0.2",
                REVIEWER_SWEEP_SECONDS="0",
            )
            first = ServeProcess(env, tmp_path / "serve1.log")
            try:
                first.start(timeout=60)  # a loaded machine starts a process slowly; a failed start is killed too
                body = json.dumps(payload).encode()
                status, answer = first.post(
                    "/api/github/webhooks", body, webhook_headers(body, event="pull_request_review_comment")
                )
                assert status == 202
                job_id = json.loads(answer)["job_id"]
                wait_until(lambda: db.job(job_id)["answer"] is not None)
                wait_until(lambda: hang.hits > 0)
            finally:
                first.kill()
            fakes.call(github.release_hangs)

            second = ServeProcess(env, tmp_path / "serve2.log")
            try:
                second.start(timeout=60)
                wait_until(lambda: db.job(job_id)["state"] == "succeeded")
                comments = fakes.call(github.review_comments_for, REPO, 1)
                answers = [c for c in comments if c["user"]["login"] == BOT and c.get("in_reply_to_id") == root_id]
                assert len(answers) == 1 and "say so in a comment" in answers[0]["body"]
                assert len(anthropic.message_requests) == 1
                attempts = db.rows("SELECT outcome FROM attempts WHERE job_id = $1 ORDER BY id", job_id)
                outcomes = [a["outcome"] for a in attempts]
                assert outcomes[0] == "lease_expired" and outcomes[-1] == "succeeded"  # killed, then taken over
            finally:
                second.kill()
    finally:
        db.drop()
