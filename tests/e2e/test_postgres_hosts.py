"""End to end on PostgreSQL: several `reviewer-app serve` processes share one database, as several hosts would."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.helpers import SECRET, encode, pr_payload, sha, webhook_headers
from tests.pg import create_schema, drop_schema, postgres_dsn
from tests.serve_process import ServeProcess, wait_until


@pytest.fixture
def database() -> Iterator[tuple[str, str]]:
    """(DATABASE_URL naming a fresh schema, schema)."""
    dsn = postgres_dsn()
    schema = asyncio.run(create_schema(dsn))
    try:
        yield f"{dsn}{'&' if '?' in dsn else '?'}search_path={schema}", schema
    finally:
        asyncio.run(drop_schema(dsn, schema))


def query(url: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    async def run() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(url)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    return asyncio.run(run())


def job(url: str, job_id: int) -> asyncpg.Record:
    [row] = query(url, "SELECT state, lease_owner FROM jobs WHERE id = $1", job_id)
    return row


def base_env(url: str) -> dict[str, str]:
    return {"DATABASE_URL": url, "GITHUB_WEBHOOK_SECRET": SECRET, "REVIEWER_RUNNER": "noop"}


def admit(host: ServeProcess, head: int) -> int:
    body = encode(pr_payload(head=sha(head)))
    status, answer = host.post("/api/github/webhooks", body, webhook_headers(body))
    assert status == 202, answer
    return int(json.loads(answer)["job_id"])


def test_a_webhook_received_by_one_host_starts_at_once_on_another(database: tuple[str, str], tmp_path: Path) -> None:
    url, _ = database
    # The worker scans only every 60 s: finishing within the deadline takes the NOTIFY from the receiving host.
    receiver = ServeProcess(base_env(url), tmp_path / "receiver.log", args=("--no-worker",)).start()
    worker = ServeProcess({**base_env(url), "REVIEWER_SCAN_SECONDS": "60"}, tmp_path / "worker.log").start()
    try:
        job_id = admit(receiver, head=1)
        wait_until(lambda: job(url, job_id)["state"] == "succeeded")
        assert str(worker.proc.pid) in job(url, job_id)["lease_owner"]  # type: ignore[union-attr]
    finally:
        receiver.kill()
        worker.kill()


def test_a_host_killed_mid_job_is_rescued_by_another(database: tuple[str, str], tmp_path: Path) -> None:
    url, _ = database
    fast = {"REVIEWER_LEASE_SECONDS": "1", "REVIEWER_RENEW_SECONDS": "0.3", "REVIEWER_SCAN_SECONDS": "0.2"}
    doomed = ServeProcess({**base_env(url), **fast, "REVIEWER_NOOP_SECONDS": "60"}, tmp_path / "doomed.log").start()
    survivor: ServeProcess | None = None
    try:
        job_id = admit(doomed, head=1)
        wait_until(lambda: job(url, job_id)["state"] == "running")
        survivor = ServeProcess({**base_env(url), **fast}, tmp_path / "survivor.log").start()
        assert doomed.proc is not None
        doomed.proc.send_signal(signal.SIGKILL)
        doomed.proc.wait(10)
        wait_until(lambda: job(url, job_id)["state"] == "succeeded")
        outcomes = [r[0] for r in query(url, "SELECT outcome FROM attempts WHERE job_id = $1 ORDER BY id", job_id)]
        assert outcomes == ["lease_expired", "succeeded"]
        # The survivor keeps admitting on its own.
        assert admit(survivor, head=2) != job_id
    finally:
        doomed.kill()
        if survivor is not None:
            survivor.kill()
