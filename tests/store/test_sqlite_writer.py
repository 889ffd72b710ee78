"""The SQLite store's write path: one writer thread, concurrent writes committed together (group commit)."""

from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest

from reviewer_app.core.admission import Enqueue, JobSpec
from reviewer_app.store.base import Delivery, StoreUnavailable
from reviewer_app.store.sqlite import SqliteStore
from tests.helpers import sha


def enqueue(n: int) -> tuple[Delivery, Enqueue]:
    spec = JobSpec(repo_id=1, repo_full_name="o/r", installation_id=7, pr_number=n, head_sha=sha(n))
    return Delivery(f"w-{n}", "pull_request", "opened"), Enqueue(spec)


class CountingCommits(SqliteStore):
    """The real store, counting the transactions its writer thread commits."""

    def __init__(self, path: str) -> None:
        super().__init__(path, busy_timeout_ms=300)
        self.transactions: list[int] = []  # ops per committed transaction

    def _commit_batch(self, ops):  # type: ignore[no-untyped-def]
        results = super()._commit_batch(ops)
        self.transactions.append(len(ops))
        return results


async def test_concurrent_admissions_share_transactions_and_each_gets_its_own_answer(tmp_path) -> None:
    store = CountingCommits(str(tmp_path / "w.db"))
    await store.open()
    try:
        results = await asyncio.gather(
            *(store.admit(d, e, now=time.time(), max_attempts=3) for d, e in map(enqueue, range(200)))
        )
        assert [r.outcome for r in results] == ["enqueued"] * 200
        assert len({r.job_id for r in results}) == 200
        assert sum(store.transactions) == 200
        assert len(store.transactions) < 200  # group commit: fewer transactions than writes
    finally:
        await store.close()


async def test_an_op_that_fails_on_its_own_fails_alone(tmp_path) -> None:
    store = CountingCommits(str(tmp_path / "w.db"))
    await store.open()
    try:

        def broken(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO settings (key, value) VALUES ('half-written', 'x')")
            raise RuntimeError("a bug in one write")

        admissions = [store.admit(d, e, now=time.time(), max_attempts=3) for d, e in map(enqueue, range(20))]
        outcomes = await asyncio.gather(store._write(broken), *admissions, return_exceptions=True)
        assert isinstance(outcomes[0], RuntimeError)
        assert [r.outcome for r in outcomes[1:]] == ["enqueued"] * 20  # type: ignore[union-attr]
        assert await store.get_setting("half-written") is None  # its partial write was rolled back
        assert len(await store.list_jobs()) == 20
    finally:
        await store.close()


async def test_a_locked_database_fails_the_batch_then_the_writer_recovers(tmp_path) -> None:
    path = str(tmp_path / "w.db")
    store = CountingCommits(path)
    await store.open()
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock past the busy timeout
        d, e = enqueue(1)
        with pytest.raises(StoreUnavailable):
            await store.admit(d, e, now=time.time(), max_attempts=3)
        other.execute("ROLLBACK")
        result = await store.admit(d, e, now=time.time(), max_attempts=3)  # nothing of the failed one stayed
        assert result.outcome == "enqueued"
        assert [j.id for j in await store.list_jobs()] == [result.job_id]
    finally:
        other.close()
        await store.close()
