"""The SQLite store (aiosqlite): WAL, synchronous=FULL, and group commit of concurrent writes."""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import secrets
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import Any, TypeVar

import aiosqlite

from reviewer_app.core.admission import Decision, Enqueue
from reviewer_app.core.states import TERMINAL, JobState
from reviewer_app.store import sql
from reviewer_app.store.base import (
    PROGRESS_COLUMNS,
    AdmitResult,
    Attempt,
    Delivery,
    FencedFinishes,
    Job,
    Lease,
    QueueStats,
    StoreUnavailable,
    Usage,
)
from reviewer_app.store.sqlite_admission import _fetchall, admit_in, prepare_enqueue

log = logging.getLogger(__name__)
T = TypeVar("T")
WriteOp = Callable[[sqlite3.Connection], Any]

MAX_BATCH = 256


Queued = tuple[WriteOp, "asyncio.Future[Any]"]  # an op and its caller's future
Settled = tuple["asyncio.Future[Any]", Any, bool]  # (future, result or exception, ok)


def _post(loop: asyncio.AbstractEventLoop, settled: list[Settled]) -> None:
    """From the writer thread: resolve a batch's futures on their event loop, with one wake-up."""
    try:
        loop.call_soon_threadsafe(_resolve, settled)
    except RuntimeError:  # the loop is closed: nobody is waiting any more
        pass


def _resolve(settled: list[Settled]) -> None:
    for fut, value, ok in settled:
        if fut.done():  # the caller was cancelled; its write happened all the same
            continue
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)


def load_migrations(engine: str) -> list[tuple[int, str, str]]:
    """(version, name, sql) for each migration file of ``engine``, in order."""
    folder = resources.files("reviewer_app.store").joinpath("migrations", engine)
    out = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            out.append((int(entry.name.split("_", 1)[0]), entry.name, entry.read_text()))
    return sorted(out)


def _usage(u: Usage | None) -> tuple[str | None, int, int, int, int]:
    if u is None:
        return (None, 0, 0, 0, 0)
    return (u.model or None, u.input_tokens, u.output_tokens, u.cache_creation_tokens, u.cache_read_tokens)


class SqliteStore(FencedFinishes):
    """Writes go to one connection on its own thread, batched so that each batch is one transaction and one
    thread hop (group commit); reads go through aiosqlite on a second connection."""

    engine = "sqlite"

    def __init__(self, path: str, *, busy_timeout_ms: int = 5000, synchronous: str = "FULL") -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self.synchronous = synchronous
        self._writer: sqlite3.Connection | None = None
        self._thread: ThreadPoolExecutor | None = None
        self._reader: aiosqlite.Connection | None = None
        # The write queue, shared with the writer thread: futures are only resolved on the event loop.
        self._queue: collections.deque[Queued] = collections.deque()
        self._queue_lock = threading.Lock()
        self._draining = False
        self._drain_job: asyncio.Future[None] | None = None
        self._read_lock = asyncio.Lock()
        self._file_id: tuple[int, int] | None = None
        self._wakeup_callbacks: list[Callable[[], None]] = []

    # -- lifecycle ---------------------------------------------------------------------------------------

    def _pragmas(self) -> list[str]:
        return [
            f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}",
            "PRAGMA journal_mode = WAL",
            f"PRAGMA synchronous = {self.synchronous}",
            "PRAGMA foreign_keys = ON",
        ]

    def _connect_writer(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=self.busy_timeout_ms / 1000,
                               check_same_thread=False)  # fmt: skip
        conn.row_factory = sqlite3.Row
        for pragma in self._pragmas():
            conn.execute(pragma)
        return conn

    async def _in_writer_thread(self, fn: Callable[[], T]) -> T:
        if self._thread is None:
            raise StoreUnavailable("store is closed")
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn)

    async def open(self) -> None:
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-writer")
        try:
            self._writer = await self._in_writer_thread(self._connect_writer)
            await self._in_writer_thread(self._migrate)
            self._reader = await aiosqlite.connect(self.path, isolation_level=None,
                                                   timeout=self.busy_timeout_ms / 1000)  # fmt: skip
            self._reader.row_factory = sqlite3.Row
            for pragma in self._pragmas():
                await self._reader.execute(pragma)
            self._file_id = _file_identity(self.path)
        except sqlite3.Error as exc:
            await self.close()
            raise StoreUnavailable(f"cannot open SQLite database {self.path!r}: {exc}") from exc

    async def close(self) -> None:
        if self._drain_job is not None:
            await asyncio.gather(self._drain_job, return_exceptions=True)
        if self._reader is not None:
            await self._reader.close()
        if self._writer is not None and self._thread is not None:
            await self._in_writer_thread(self._writer.close)
        if self._thread is not None:
            self._thread.shutdown(wait=True)
        self._writer = self._reader = None
        self._thread = None

    def _migrate(self) -> None:
        conn = self._writer
        assert conn is not None
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at REAL)"
        )
        applied = {r[0] for r in conn.execute("SELECT version FROM schema_migrations").fetchall()}
        for version, name, script in load_migrations("sqlite"):
            if version in applied:
                continue
            log.info("applying migration %s", name)
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in script.split(";\n"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("INSERT INTO schema_migrations VALUES (?, ?, strftime('%s','now'))", (version, name))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    async def migrations_pending(self) -> list[str]:
        rows = await self._read("SELECT version FROM schema_migrations")
        applied = {r[0] for r in rows}
        return [name for version, name, _ in load_migrations("sqlite") if version not in applied]

    async def ping(self) -> None:
        # `SELECT 1` on an open connection answers even when the file is gone: an open descriptor outlives an
        # unlink or a rename. A database deleted, moved or replaced under a running app is an outage all the same
        # (every commit goes to a file no restart will open), so ping reads a real table and checks that the path
        # still names the file this store opened.
        try:
            await self._read("SELECT COUNT(*) FROM schema_migrations")
        except (sqlite3.Error, ValueError) as exc:
            raise StoreUnavailable(str(exc)) from exc
        if self._file_id is not None and _file_identity(self.path) != self._file_id:
            raise StoreUnavailable(f"the database file {self.path!r} was removed or replaced while open")

    async def subscribe_wakeups(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after this store commits claimable work (SQLite serves one host, so in-process)."""
        self._wakeup_callbacks.append(callback)

    def _wake_subscribers(self) -> None:
        for callback in self._wakeup_callbacks:
            callback()

    # -- the write path: group commit ------------------------------------------------------------------

    async def _write(self, op: WriteOp) -> Any:
        """Run ``op`` inside a write transaction; returns after the transaction committed."""
        if self._writer is None or self._thread is None:
            raise StoreUnavailable("store is closed")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        with self._queue_lock:
            self._queue.append((op, fut))
            start = not self._draining
            self._draining = True
        if start:
            self._drain_job = loop.run_in_executor(self._thread, self._drain, loop)
        return await fut

    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        """In the writer thread: commit batches until the queue is empty.

        The thread takes the next batch as soon as one commits, without a round trip through the event loop: the
        loop only resolves the batch's futures. Everything queued meanwhile goes into the next transaction."""
        while True:
            with self._queue_lock:
                if not self._queue:
                    self._draining = False
                    return
                batch = [self._queue.popleft() for _ in range(min(MAX_BATCH, len(self._queue)))]
            try:
                settled = self._settle_batch(batch)
            except BaseException as exc:  # a bug, or the thread is being torn down: fail what it took, stop
                settled = [(fut, exc, False) for _, fut in batch]
                with self._queue_lock:
                    self._draining = False
                _post(loop, settled)
                raise
            _post(loop, settled)

    def _settle_batch(self, batch: list[Queued]) -> list[Settled]:
        """(future, result or exception, ok) for each op of the batch, committed as one transaction if possible."""
        try:
            results = self._commit_batch([op for op, _ in batch])
        except sqlite3.OperationalError as exc:
            # Locked past the timeout, disk full, read-only: nobody in the batch was committed.
            return [(fut, self._wrap(exc), False) for _, fut in batch]
        except Exception:
            # One op failed on its own terms: run each op alone so only the failing ones fail.
            settled: list[Settled] = []
            for op, fut in batch:
                try:
                    (result,) = self._commit_batch([op])
                except Exception as exc:
                    settled.append((fut, self._wrap(exc), False))
                else:
                    settled.append((fut, result, True))
            return settled
        return [(fut, result, True) for (_, fut), result in zip(batch, results, strict=True)]

    @staticmethod
    def _wrap(exc: Exception) -> Exception:
        if isinstance(exc, sqlite3.OperationalError | sqlite3.DatabaseError | ValueError):
            return StoreUnavailable(f"database write failed: {exc}")
        return exc

    def _commit_batch(self, ops: list[WriteOp]) -> list[Any]:
        """In the writer thread: every op of the batch in one transaction, one fsync at COMMIT."""
        conn = self._writer
        if conn is None:
            raise StoreUnavailable("store is closed")
        conn.execute("BEGIN IMMEDIATE")
        try:
            results = [op(conn) for op in ops]
            conn.execute("COMMIT")
        except BaseException:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise
        return results

    async def _read(self, query: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        conn = self._reader
        if conn is None:
            raise StoreUnavailable("store is closed")
        async with self._read_lock:
            return list(await conn.execute_fetchall(query, params))

    # -- admission --------------------------------------------------------------------------------------

    async def admit(self, delivery: Delivery, decision: Decision, *, now: float, max_attempts: int) -> AdmitResult:
        # Statement parameters are built here, so the writer thread (the serial resource) only runs statements.
        prepared = (
            prepare_enqueue(decision, now=now, max_attempts=max_attempts, delivery_id=delivery.delivery_id)
            if isinstance(decision, Enqueue)
            else None
        )

        def op(conn: sqlite3.Connection) -> AdmitResult:
            return admit_in(conn, delivery, decision, prepared, now=now)

        result = await self._write(op)
        if result.created:
            self._wake_subscribers()
        return result

    # -- dispatch ---------------------------------------------------------------------------------------

    async def claim(self, *, owner: str, limit: int, now: float, lease_seconds: float) -> list[Lease]:
        if limit <= 0:
            return []

        def op(conn: sqlite3.Connection) -> list[Lease]:
            # One statement picks and leases; the token is random per row.
            rows = _fetchall(
                conn,
                "UPDATE jobs SET state = 'running', lease_owner = ?, lease_token = lower(hex(randomblob(16))),"
                " lease_expires_at = ?, attempts = attempts + 1, started_at = COALESCE(started_at, ?),"
                " updated_at = ?"
                " WHERE id IN (SELECT id FROM jobs WHERE state = 'queued' AND next_attempt_at <= ?"
                "   AND NOT EXISTS (SELECT 1 FROM settings WHERE key = 'queue_paused' AND value = '1')"
                "   ORDER BY priority, next_attempt_at, id LIMIT ?)"
                f" RETURNING {sql.JOB_COLUMNS}",
                (owner, now + lease_seconds, now, now, now, limit),
            )
            # The claimed rows come back whole, so a worker starts without reading its job again.
            leases = [Lease(r["id"], r["lease_token"], owner, r["attempts"], r["lease_expires_at"], Job.from_row(r))
                      for r in rows]  # fmt: skip
            if leases:
                conn.executemany(sql.INSERT_ATTEMPT, [(le.job_id, le.attempt, owner, le.token, now) for le in leases])
            return leases

        return await self._write(op)

    async def renew_lease(self, lease: Lease, *, now: float, lease_seconds: float) -> float | None:
        expires = now + lease_seconds

        def op(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(sql.RENEW_IF_LEASE_HELD, (expires, now, lease.job_id, lease.token))
            return cur.rowcount == 1

        return expires if await self._write(op) else None

    async def renew_leases(self, leases: Sequence[Lease], *, now: float, lease_seconds: float) -> set[str]:
        if not leases:
            return set()
        expires = now + lease_seconds

        def op(conn: sqlite3.Connection) -> set[str]:
            held = set()
            for lease in leases:
                if conn.execute(sql.RENEW_IF_LEASE_HELD, (expires, now, lease.job_id, lease.token)).rowcount == 1:
                    held.add(lease.token)
            return held

        return await self._write(op)

    async def _finish(
        self,
        lease: Lease,
        state: JobState,
        *,
        now: float,
        outcome: str,
        error: str | None,
        usage: Usage | None,
    ) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                sql.FINISH_IF_LEASE_HELD, (state.value, outcome, error, now, now, lease.job_id, lease.token)
            )
            held = cur.rowcount == 1
            conn.execute(
                sql.FINISH_ATTEMPT,
                (now, state.value if held else "lease_lost", error, *_usage(usage), lease.token),
            )
            return held

        return await self._write(op)

    async def retry_if_lease_held(
        self,
        lease: Lease,
        *,
        now: float,
        at: float,
        error: str,
        counts_attempt: bool = True,
        usage: Usage | None = None,
    ) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                sql.REQUEUE_IF_LEASE_HELD,
                (at, error, 0 if counts_attempt else 1, now, lease.job_id, lease.token),
            )
            held = cur.rowcount == 1
            outcome = ("retry" if counts_attempt else "deferred") if held else "lease_lost"
            conn.execute(sql.FINISH_ATTEMPT, (now, outcome, error, *_usage(usage), lease.token))
            return held

        return await self._write(op)

    async def save_progress_if_lease_held(self, lease: Lease, *, now: float, **fields: Any) -> bool:
        unknown = set(fields) - PROGRESS_COLUMNS
        if unknown:
            raise ValueError(f"not a progress column: {sorted(unknown)}")
        cols = sorted(fields)
        values = [json.dumps(fields[c]) if c in ("answer", "details") else fields[c] for c in cols]

        def op(conn: sqlite3.Connection) -> bool:
            assignments = ", ".join(f"{c} = ?" for c in cols)
            cur = conn.execute(
                f"UPDATE jobs SET {assignments}, updated_at = ? WHERE id = ? AND lease_token = ? AND state = 'running'",
                (*values, now, lease.job_id, lease.token),
            )
            return cur.rowcount == 1

        return await self._write(op)

    async def record_usage_if_lease_held(self, lease: Lease, usage: Usage) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(sql.ADD_ATTEMPT_USAGE, (*_usage(usage), lease.token))
            return cur.rowcount == 1

        return await self._write(op)

    async def rescue_expired(self, *, now: float) -> list[int]:
        def op(conn: sqlite3.Connection) -> list[int]:
            rescued = []
            for row in _fetchall(conn, sql.SELECT_EXPIRED, (now,)):
                job_id, token, attempts, max_attempts = row[0], row[1], row[2], row[3]
                error = f"lease expired during attempt {attempts} (worker crashed, was killed or hung)"
                if attempts >= max_attempts:
                    cur = conn.execute(sql.EXPIRE_TO_FAILED, (error, f"failed: {error}", now, now, job_id, token))
                else:
                    cur = conn.execute(sql.EXPIRE_TO_QUEUE, (now, error, now, job_id, token))
                if cur.rowcount == 1:
                    rescued.append(job_id)
                    conn.execute(sql.FINISH_ATTEMPT, (now, "lease_expired", error, None, 0, 0, 0, 0, token))
            return rescued

        return await self._write(op)

    async def next_wakeup(self, *, now: float) -> float | None:
        rows = await self._read(
            "SELECT MIN(t) FROM (SELECT MIN(next_attempt_at) AS t FROM jobs WHERE state = 'queued'"
            " UNION ALL SELECT MIN(lease_expires_at) FROM jobs WHERE state = 'running')"
        )
        return rows[0][0] if rows else None

    # -- check runs -------------------------------------------------------------------------------------

    async def jobs_needing_check_sync(self, *, limit: int = 50) -> list[Job]:
        return [Job.from_row(r) for r in await self._read(sql.NEEDS_CHECK_SYNC, (limit,))]

    async def claim_check_run_creation(self, job_id: int, *, owner: str, now: float, seconds: float) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            return bool(_fetchall(conn, sql.CLAIM_CHECK_RUN_CREATION, (owner, now + seconds, job_id, now, owner)))

        return await self._write(op)

    async def set_check_run_if_unchanged(self, job_id: int, *, state: JobState, attempts: int,
                                         check_run_id: int | None, key: str) -> bool:  # fmt: skip
        params = (check_run_id, key, job_id, state.value, attempts, check_run_id)

        def op(conn: sqlite3.Connection) -> bool:
            return conn.execute(sql.SET_CHECK_RUN_IF_UNCHANGED, params).rowcount == 1

        return await self._write(op)

    async def forget_check_run_status(self, job_id: int, *, check_run_id: int | None) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute(sql.FORGET_CHECK_RUN_STATUS, (check_run_id, job_id))

        await self._write(op)

    # -- outbox -----------------------------------------------------------------------------------------

    async def pending_effects(self, *, limit: int = 50) -> list[dict[str, Any]]:
        return [dict(r) for r in await self._read(sql.PENDING_EFFECTS, (limit,))]

    async def mark_effect(self, effect_id: int, *, now: float, error: str | None, done: bool) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE outbox SET attempts = attempts + 1, last_error = ?, sent_at = CASE WHEN ? THEN ? END"
                " WHERE id = ?",
                (error, 1 if done else 0, now, effect_id),
            )

        await self._write(op)

    async def usage_by_repo(self, *, since: float) -> list[dict[str, Any]]:
        rows = await self._read(sql.USAGE_BY_REPO, (since,))
        return [dict(r) for r in rows]

    async def last_reviewed_head(self, repo_id: int, pr_number: int) -> str | None:
        rows = await self._read(sql.LAST_REVIEWED_HEAD, (repo_id, pr_number))
        return rows[0][0] if rows else None

    async def skip_if_unpoked(self, lease: Lease, *, pokes: int, now: float, outcome: str) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                sql.SKIP_IF_LEASE_HELD_AND_UNPOKED, (outcome, now, now, lease.job_id, lease.token, pokes)
            )
            if cur.rowcount == 1:
                conn.execute(sql.FINISH_ATTEMPT, (now, JobState.CANCELLED.value, None, *_usage(None), lease.token))
            return cur.rowcount == 1

        return await self._write(op)

    async def record_published_review(self, job_id: int, review_id: int) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute(sql.RECORD_PUBLISHED_REVIEW, (review_id, job_id))

        await self._write(op)

    async def installation_active(self, installation_id: int) -> bool:
        rows = await self._read("SELECT active FROM installations WHERE id = ?", (installation_id,))
        return not rows or bool(rows[0][0])

    # -- settings (queue pause) -------------------------------------------------------------------------

    async def set_setting(self, key: str, value: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

        await self._write(op)
        self._wake_subscribers()  # a resumed queue has claimable work at once (PostgreSQL notifies too)

    async def get_setting(self, key: str) -> str | None:
        rows = await self._read("SELECT value FROM settings WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    # -- missed-webhook recovery ------------------------------------------------------------------------

    async def deliveries_to_recover(self, guids: Sequence[str]) -> set[str]:
        if not guids:
            return set()
        rows = await self._read(
            "SELECT j.value FROM json_each(?) AS j"
            " WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.delivery_id = j.value)"
            "   AND NOT EXISTS (SELECT 1 FROM redeliveries r WHERE r.guid = j.value AND r.requested_at IS NOT NULL)",
            (json.dumps(list(guids)),),
        )
        return {r[0] for r in rows}

    async def claim_redelivery(self, guid: str, delivery_id: int, *, owner: str, now: float,
                               stale_before: float) -> bool:  # fmt: skip
        def op(conn: sqlite3.Connection) -> bool:
            if _fetchall(conn, "SELECT 1 FROM deliveries WHERE delivery_id = ?", (guid,)):
                return False
            rows = _fetchall(conn, sql.CLAIM_REDELIVERY_IF_UNCLAIMED, (guid, delivery_id, owner, now, stale_before))
            return bool(rows)

        return await self._write(op)

    async def mark_redelivery_requested(self, guid: str, *, owner: str, now: float, error: str | None) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute(sql.MARK_REDELIVERY_REQUESTED_IF_CLAIMED, (now, error, guid, owner))

        await self._write(op)

    async def release_redelivery(self, guid: str, *, owner: str, error: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute(sql.RELEASE_REDELIVERY_IF_CLAIMED, (error, guid, owner))

        await self._write(op)

    async def forget_redeliveries(self, before: float) -> int:
        def op(conn: sqlite3.Connection) -> int:
            return (conn.execute(sql.FORGET_REDELIVERIES, (before,))).rowcount

        return await self._write(op)

    async def take_duty_lease(self, duty: str, *, owner: str, now: float, seconds: float) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            return bool(_fetchall(conn, sql.TAKE_DUTY_LEASE_IF_FREE, (duty, owner, now + seconds, now)))

        return await self._write(op)

    async def release_duty_lease(self, duty: str, *, owner: str, now: float) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute(sql.RELEASE_DUTY_LEASE_IF_HELD, (now, duty, owner))

        await self._write(op)

    # -- reads and admin --------------------------------------------------------------------------------

    async def get_job(self, job_id: int) -> Job | None:
        rows = await self._read(f"SELECT {sql.JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,))
        return Job.from_row(rows[0]) if rows else None

    async def list_jobs(
        self,
        *,
        states: Sequence[str] = (),
        repo: str | None = None,
        pr_number: int | None = None,
        limit: int = 100,
    ) -> list[Job]:
        where, params = ["1 = 1"], []
        if states:
            where.append(f"state IN ({','.join('?' * len(states))})")
            params.extend(states)
        if repo:
            where.append("repo_full_name = ?")
            params.append(repo)
        if pr_number is not None:
            where.append("pr_number = ?")
            params.append(pr_number)
        rows = await self._read(
            f"SELECT {sql.JOB_COLUMNS} FROM jobs WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?",
            (*params, limit),
        )
        return [Job.from_row(r) for r in rows]

    async def attempts_of(self, job_id: int) -> list[Attempt]:
        rows = await self._read(
            "SELECT job_id, attempt, lease_owner, started_at, finished_at, outcome, error, model, input_tokens,"
            " output_tokens, cache_creation_tokens, cache_read_tokens FROM attempts WHERE job_id = ? ORDER BY id",
            (job_id,),
        )
        return [Attempt(*tuple(r)) for r in rows]

    async def stats(self, *, now: float) -> QueueStats:
        by_state = {r[0]: r[1] for r in await self._read("SELECT state, COUNT(*) FROM jobs GROUP BY state")}
        oldest = await self._read("SELECT MIN(created_at) FROM jobs WHERE state IN ('queued', 'running')")
        expired = await self._read("SELECT COUNT(*) FROM jobs WHERE state = 'running' AND lease_expires_at < ?", (now,))
        awaiting = await self._read(
            "SELECT COUNT(*) FROM jobs WHERE publish_intent_at IS NOT NULL AND review_id IS NULL"
            " AND state IN ('queued', 'running')"
        )
        return QueueStats(
            by_state=by_state,
            oldest_pending_created_at=oldest[0][0],
            expired_leases=expired[0][0],
            awaiting_reconciliation=awaiting[0][0],
        )

    async def cancel_job(self, job_id: int, *, now: float, reason: str) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(sql.OPERATOR_CANCEL, (reason, now, now, job_id))
            return cur.rowcount == 1

        return await self._write(op)

    async def prune(self, before: float, batch: int) -> int:
        terminal = ", ".join(f"'{s.value}'" for s in sorted(TERMINAL))

        def op(conn: sqlite3.Connection) -> int:
            # The newest job always stays: SQLite gives a new row max(id) + 1, and a job id must never be reused
            # (review markers and check runs name it).
            rows = _fetchall(
                conn,
                f"SELECT id FROM jobs WHERE state IN ({terminal}) AND finished_at < ?"
                " AND id < (SELECT MAX(id) FROM jobs) ORDER BY finished_at, id LIMIT ?",
                (before, batch),
            )
            ids = [r[0] for r in rows]
            removed = 0
            if ids:
                marks = ",".join("?" * len(ids))
                # A job that stays may name a pruned one as its superseder; its outcome text still says which.
                conn.execute(f"UPDATE jobs SET superseded_by = NULL WHERE superseded_by IN ({marks})", ids)
                conn.execute(f"DELETE FROM attempts WHERE job_id IN ({marks})", ids)
                removed += (conn.execute(f"DELETE FROM jobs WHERE id IN ({marks})", ids)).rowcount
            cur = conn.execute(
                "DELETE FROM deliveries WHERE delivery_id IN"
                " (SELECT delivery_id FROM deliveries WHERE received_at < ? LIMIT ?)",
                (before, batch),
            )
            removed += cur.rowcount
            return removed + conn.execute(sql.PRUNE_FINISHED_EFFECTS, (before, batch)).rowcount

        return await self._write(op)

    async def retry_job(self, job_id: int, *, now: float) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(sql.OPERATOR_RETRY, (now, now, job_id))
            return cur.rowcount == 1

        retried = await self._write(op)
        if retried:
            self._wake_subscribers()
        return retried


def _file_identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the database file; None when there is no file (``:memory:``)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def new_owner_id(prefix: str = "worker") -> str:
    import os
    import socket

    return f"{prefix}-{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
