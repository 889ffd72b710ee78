"""The SQLite store (aiosqlite): WAL, synchronous=FULL, and group commit of concurrent writes."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from importlib import resources
from typing import Any, TypeVar

import aiosqlite

from reviewer_app.core.admission import (
    CancelPR,
    Decision,
    Effect,
    Enqueue,
    Ignore,
    InstallationChange,
    Reply,
    ReposRemoved,
    SetPause,
)
from reviewer_app.core.states import TERMINAL, JobState
from reviewer_app.store import sql
from reviewer_app.store.base import (
    PROGRESS_COLUMNS,
    AdmitResult,
    Attempt,
    Delivery,
    Job,
    Lease,
    QueueStats,
    StoreUnavailable,
    Usage,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
WriteOp = Callable[[aiosqlite.Connection], Awaitable[Any]]

MAX_BATCH = 256


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


class SqliteStore:
    """One writer connection whose transactions are batched (group commit), one reader connection."""

    engine = "sqlite"

    def __init__(self, path: str, *, busy_timeout_ms: int = 5000, synchronous: str = "FULL") -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self.synchronous = synchronous
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._pending: list[tuple[WriteOp, asyncio.Future[Any]]] = []
        self._writer_task: asyncio.Task[None] | None = None
        self._read_lock = asyncio.Lock()
        self._file_id: tuple[int, int] | None = None
        self._wakeup_callbacks: list[Callable[[], None]] = []

    # -- lifecycle ---------------------------------------------------------------------------------------

    async def _connect(self) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(self.path, isolation_level=None, timeout=self.busy_timeout_ms / 1000)
        conn.row_factory = sqlite3.Row
        await conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
        await conn.execute("PRAGMA journal_mode = WAL")
        await conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        await conn.execute("PRAGMA foreign_keys = ON")
        return conn

    async def open(self) -> None:
        try:
            self._writer = await self._connect()
            await self._migrate()
            self._reader = await self._connect()
            self._file_id = _file_identity(self.path)
        except sqlite3.Error as exc:
            await self.close()
            raise StoreUnavailable(f"cannot open SQLite database {self.path!r}: {exc}") from exc

    async def close(self) -> None:
        if self._writer_task is not None:
            await asyncio.gather(self._writer_task, return_exceptions=True)
        for conn in (self._writer, self._reader):
            if conn is not None:
                await conn.close()
        self._writer = self._reader = None

    async def _migrate(self) -> None:
        assert self._writer is not None
        conn = self._writer
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at REAL)"
        )
        applied = {r[0] for r in await conn.execute_fetchall("SELECT version FROM schema_migrations")}
        for version, name, script in load_migrations("sqlite"):
            if version in applied:
                continue
            log.info("applying migration %s", name)
            await conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in script.split(";\n"):
                    if statement.strip():
                        await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, strftime('%s','now'))", (version, name)
                )
                await conn.execute("COMMIT")
            except BaseException:
                await conn.execute("ROLLBACK")
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
        if self._writer is None:
            raise StoreUnavailable("store is closed")
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((op, fut))
        if self._writer_task is None or self._writer_task.done():
            self._writer_task = asyncio.create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            try:
                results = await self._commit_batch(batch)
            except sqlite3.OperationalError as exc:
                # Locked past the timeout, disk full, read-only: nobody in the batch was committed.
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(self._wrap(exc))
                continue
            except Exception:
                # One op failed on its own terms: run each op alone so only the failing ones fail.
                for op, fut in batch:
                    try:
                        (result,) = await self._commit_batch([(op, fut)])
                    except Exception as exc:
                        if not fut.done():
                            fut.set_exception(self._wrap(exc))
                    else:
                        if not fut.done():
                            fut.set_result(result)
                continue
            for (_, fut), result in zip(batch, results, strict=True):
                if not fut.done():
                    fut.set_result(result)

    @staticmethod
    def _wrap(exc: Exception) -> Exception:
        if isinstance(exc, sqlite3.OperationalError | sqlite3.DatabaseError | ValueError):
            return StoreUnavailable(f"database write failed: {exc}")
        return exc

    async def _commit_batch(self, batch: list[tuple[WriteOp, asyncio.Future[Any]]]) -> list[Any]:
        conn = self._writer
        if conn is None:
            raise StoreUnavailable("store is closed")
        await conn.execute("BEGIN IMMEDIATE")
        try:
            results = [await op(conn) for op, _ in batch]
            await conn.execute("COMMIT")
        except BaseException:
            try:
                await conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise
        return results

    async def _read(self, query: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        conn = self._reader or self._writer
        if conn is None:
            raise StoreUnavailable("store is closed")
        async with self._read_lock:
            return list(await conn.execute_fetchall(query, params))

    # -- admission --------------------------------------------------------------------------------------

    async def admit(
        self, delivery: Delivery, decision: Decision, *, now: float, max_attempts: int
    ) -> AdmitResult:
        async def op(conn: aiosqlite.Connection) -> AdmitResult:
            seen = await conn.execute_fetchall(
                "SELECT outcome, job_id FROM deliveries WHERE delivery_id = ?", (delivery.delivery_id,)
            )
            if seen:
                return AdmitResult(
                    "duplicate-delivery", job_id=seen[0]["job_id"], reason="delivery already seen"
                )
            result = await self._apply(conn, decision, now=now, max_attempts=max_attempts)
            await conn.execute(
                "INSERT INTO deliveries (delivery_id, event, action, received_at, outcome, job_id)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (delivery.delivery_id, delivery.event, delivery.action, now, result.outcome, result.job_id),
            )
            return result

        result = await self._write(op)
        if result.created:
            self._wake_subscribers()
        return result

    async def _apply(
        self, conn: aiosqlite.Connection, decision: Decision, *, now: float, max_attempts: int
    ) -> AdmitResult:
        if isinstance(decision, Ignore):
            return AdmitResult("ignored", reason=decision.reason)
        if isinstance(decision, CancelPR):
            rows = await conn.execute_fetchall(
                sql.CANCEL_PR_PENDING, (decision.reason, now, now, decision.repo_id, decision.pr_number)
            )
            return AdmitResult("cancelled", cancelled=tuple(r[0] for r in rows), reason=decision.reason)
        if isinstance(decision, Reply):
            await self._effects(conn, decision.effects, now)
            return AdmitResult("replied", reason=decision.reason)
        if isinstance(decision, SetPause):
            await conn.execute(
                "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (pause_key(decision.repo_id, decision.pr_number), "1" if decision.paused else "0"),
            )
            await self._effects(conn, decision.effects, now)
            word = "paused" if decision.paused else "resumed"
            return AdmitResult(word, reason=f"automatic reviews {word} on this pull request")
        if isinstance(decision, InstallationChange):
            await conn.execute(sql.UPSERT_INSTALLATION, (decision.installation_id, decision.account,
                                                         1 if decision.active else 0, decision.reason, now))  # fmt: skip
            cancelled: tuple[int, ...] = ()
            if not decision.active:
                rows = await conn.execute_fetchall(
                    sql.CANCEL_INSTALLATION_PENDING, (decision.reason, now, now, decision.installation_id)
                )
                cancelled = tuple(r[0] for r in rows)
            return AdmitResult("installation", cancelled=cancelled, reason=decision.reason,
                               installation_gone=None if decision.active else decision.installation_id)  # fmt: skip
        if isinstance(decision, ReposRemoved):
            ids: list[int] = []
            for repo_id in decision.repo_ids:
                rows = await conn.execute_fetchall(
                    sql.CANCEL_REPO_PENDING, (decision.reason, now, now, decision.installation_id, repo_id)
                )
                ids.extend(r[0] for r in rows)
            return AdmitResult("cancelled", cancelled=tuple(ids), reason=decision.reason)
        assert isinstance(decision, Enqueue)
        return await self._enqueue(conn, decision, now=now, max_attempts=max_attempts)

    async def _effects(self, conn: aiosqlite.Connection, effects: Sequence[Effect], now: float) -> None:
        if effects:
            await conn.executemany(
                sql.INSERT_EFFECT,
                [(e.kind, e.installation_id, e.repo_full_name, e.target, e.content, now) for e in effects],
            )

    async def _refusal(self, conn: aiosqlite.Connection, decision: Enqueue, now: float) -> str | None:
        """Why the budget guard refuses this job, or None."""
        guard, spec = decision.guard, decision.job
        if guard is None:
            return None
        if guard.manual_per_pr_hour and not decision.automatic:
            rows = await conn.execute_fetchall(sql.COUNT_MANUAL_RECENT, (spec.repo_id, spec.pr_number, now - 3600))
            if rows[0][0] >= guard.manual_per_pr_hour:
                return f"limit of {guard.manual_per_pr_hour} requested reviews per pull request per hour reached"
        if guard.reviews_per_day and spec.installation_id is not None:
            rows = await conn.execute_fetchall(sql.COUNT_REVIEWS_RECENT, (spec.installation_id, now - 86400))
            if rows[0][0] >= guard.reviews_per_day:
                return f"limit of {guard.reviews_per_day} reviews per day for this installation reached"
        return None

    async def _enqueue(
        self, conn: aiosqlite.Connection, decision: Enqueue, *, now: float, max_attempts: int
    ) -> AdmitResult:
        spec = decision.job
        if spec.installation_id is not None:
            inactive = await conn.execute_fetchall(
                "SELECT reason FROM installations WHERE id = ? AND active = 0", (spec.installation_id,)
            )
            if inactive:
                return AdmitResult("ignored", reason=f"installation is not active ({inactive[0][0]})")
        if decision.automatic:
            paused = await conn.execute_fetchall(
                "SELECT 1 FROM settings WHERE key = ? AND value = '1'", (pause_key(spec.repo_id, spec.pr_number),)
            )
            if paused:
                return AdmitResult("ignored", reason="automatic reviews are paused on this pull request")
        existing = await conn.execute_fetchall("SELECT id FROM jobs WHERE revision_key = ?", (spec.revision_key,))
        if existing:
            return AdmitResult("duplicate-revision", job_id=existing[0][0], reason="revision already admitted")
        refusal = await self._refusal(conn, decision, now)
        event_at = spec.details.get("event_at")
        state, outcome = ("queued", None) if refusal is None else ("cancelled", f"refused: {refusal}")
        rows = await conn.execute_fetchall(
            "INSERT INTO jobs (revision_key, repo_id, repo_full_name, installation_id, pr_number, head_sha, trigger,"
            " priority, state, details, attempts, max_attempts, next_attempt_at, event_at, created_at, updated_at,"
            " outcome, finished_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (revision_key) DO NOTHING RETURNING id",
            (
                spec.revision_key, spec.repo_id, spec.repo_full_name, spec.installation_id, spec.pr_number,
                spec.head_sha, spec.trigger, spec.priority, state, json.dumps(spec.details), max_attempts,
                now + spec.delay_seconds, event_at, now, now, outcome, None if refusal is None else now,
            ),
        )  # fmt: skip
        job_id = rows[0][0]
        if refusal is not None:
            assert decision.guard is not None
            await self._effects(conn, decision.guard.refusal_effects, now)
            return AdmitResult("refused", job_id=job_id, reason=refusal)
        await self._effects(conn, decision.effects, now)
        superseded: tuple[int, ...] = ()
        if decision.supersede_older_heads and spec.head_sha:
            outcome = f"superseded by job {job_id} for newer head {spec.head_sha}"
            srows = await conn.execute_fetchall(
                sql.SUPERSEDE_OLDER_HEADS,
                (job_id, outcome, now, now, spec.repo_id, spec.pr_number, spec.head_sha, job_id, event_at, event_at),
            )
            superseded = tuple(r[0] for r in srows)
            if superseded:
                await conn.execute(
                    f"UPDATE attempts SET finished_at = ?, outcome = 'superseded' WHERE finished_at IS NULL"
                    f" AND job_id IN ({','.join('?' * len(superseded))})",
                    (now, *superseded),
                )
        return AdmitResult("enqueued", job_id=job_id, superseded=superseded)

    # -- dispatch ---------------------------------------------------------------------------------------

    async def claim(self, *, owner: str, limit: int, now: float, lease_seconds: float) -> list[Lease]:
        if limit <= 0:
            return []

        async def op(conn: aiosqlite.Connection) -> list[Lease]:
            # One statement picks and leases; the token is random per row.
            rows = await conn.execute_fetchall(
                "UPDATE jobs SET state = 'running', lease_owner = ?, lease_token = lower(hex(randomblob(16))),"
                " lease_expires_at = ?, attempts = attempts + 1, started_at = COALESCE(started_at, ?),"
                " updated_at = ?"
                " WHERE id IN (SELECT id FROM jobs WHERE state = 'queued' AND next_attempt_at <= ?"
                "   AND NOT EXISTS (SELECT 1 FROM settings WHERE key = 'queue_paused' AND value = '1')"
                "   ORDER BY priority, next_attempt_at, id LIMIT ?)"
                " RETURNING id, lease_token, attempts, lease_expires_at",
                (owner, now + lease_seconds, now, now, now, limit),
            )
            leases = [Lease(r[0], r[1], owner, r[2], r[3]) for r in rows]
            if leases:
                await conn.executemany(
                    sql.INSERT_ATTEMPT, [(le.job_id, le.attempt, owner, le.token, now) for le in leases]
                )
            return leases

        return await self._write(op)

    async def renew_lease(self, lease: Lease, *, now: float, lease_seconds: float) -> float | None:
        expires = now + lease_seconds

        async def op(conn: aiosqlite.Connection) -> bool:
            cur = await conn.execute(sql.RENEW_IF_LEASE_HELD, (expires, now, lease.job_id, lease.token))
            return cur.rowcount == 1

        return expires if await self._write(op) else None

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
        async def op(conn: aiosqlite.Connection) -> bool:
            cur = await conn.execute(
                sql.FINISH_IF_LEASE_HELD, (state.value, outcome, error, now, now, lease.job_id, lease.token)
            )
            held = cur.rowcount == 1
            await conn.execute(
                sql.FINISH_ATTEMPT,
                (now, state.value if held else "lease_lost", error, *_usage(usage), lease.token),
            )
            return held

        return await self._write(op)

    async def complete_if_lease_held(
        self, lease: Lease, *, now: float, outcome: str, usage: Usage | None = None
    ) -> bool:
        return await self._finish(
            lease, JobState.SUCCEEDED, now=now, outcome=outcome, error=None, usage=usage
        )

    async def fail_if_lease_held(
        self, lease: Lease, *, now: float, error: str, usage: Usage | None = None
    ) -> bool:
        return await self._finish(
            lease, JobState.FAILED, now=now, outcome=f"failed: {error}", error=error, usage=usage
        )

    async def cancel_if_lease_held(self, lease: Lease, *, now: float, outcome: str, usage: Usage | None = None) -> bool:
        return await self._finish(lease, JobState.CANCELLED, now=now, outcome=outcome, error=None, usage=usage)

    async def supersede_if_lease_held(
        self, lease: Lease, *, now: float, outcome: str, usage: Usage | None = None
    ) -> bool:
        return await self._finish(
            lease, JobState.SUPERSEDED, now=now, outcome=outcome, error=None, usage=usage
        )

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
        async def op(conn: aiosqlite.Connection) -> bool:
            cur = await conn.execute(
                sql.REQUEUE_IF_LEASE_HELD,
                (at, error, 0 if counts_attempt else 1, now, lease.job_id, lease.token),
            )
            held = cur.rowcount == 1
            outcome = ("retry" if counts_attempt else "deferred") if held else "lease_lost"
            await conn.execute(sql.FINISH_ATTEMPT, (now, outcome, error, *_usage(usage), lease.token))
            return held

        return await self._write(op)

    async def save_progress_if_lease_held(self, lease: Lease, *, now: float, **fields: Any) -> bool:
        unknown = set(fields) - PROGRESS_COLUMNS
        if unknown:
            raise ValueError(f"not a progress column: {sorted(unknown)}")
        cols = sorted(fields)
        values = [json.dumps(fields[c]) if c in ("answer", "details") else fields[c] for c in cols]

        async def op(conn: aiosqlite.Connection) -> bool:
            assignments = ", ".join(f"{c} = ?" for c in cols)
            cur = await conn.execute(
                f"UPDATE jobs SET {assignments}, updated_at = ? WHERE id = ? AND lease_token = ? AND state = 'running'",
                (*values, now, lease.job_id, lease.token),
            )
            return cur.rowcount == 1

        return await self._write(op)

    async def record_usage_if_lease_held(self, lease: Lease, usage: Usage) -> bool:
        async def op(conn: aiosqlite.Connection) -> bool:
            cur = await conn.execute(sql.ADD_ATTEMPT_USAGE, (*_usage(usage), lease.token))
            return cur.rowcount == 1

        return await self._write(op)

    async def rescue_expired(self, *, now: float) -> list[int]:
        async def op(conn: aiosqlite.Connection) -> list[int]:
            rescued = []
            for row in await conn.execute_fetchall(sql.SELECT_EXPIRED, (now,)):
                job_id, token, attempts, max_attempts = row[0], row[1], row[2], row[3]
                error = f"lease expired during attempt {attempts} (worker crashed, was killed or hung)"
                if attempts >= max_attempts:
                    cur = await conn.execute(
                        sql.EXPIRE_TO_FAILED, (error, f"failed: {error}", now, now, job_id, token)
                    )
                else:
                    cur = await conn.execute(sql.EXPIRE_TO_QUEUE, (now, error, now, job_id, token))
                if cur.rowcount == 1:
                    rescued.append(job_id)
                    await conn.execute(
                        sql.FINISH_ATTEMPT, (now, "lease_expired", error, None, 0, 0, 0, 0, token)
                    )
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

    async def set_check_run(self, job_id: int, *, check_run_id: int | None, key: str) -> None:
        async def op(conn: aiosqlite.Connection) -> None:
            await conn.execute(sql.SET_CHECK_RUN, (check_run_id, key, job_id))

        await self._write(op)

    # -- outbox -----------------------------------------------------------------------------------------

    async def pending_effects(self, *, limit: int = 50) -> list[dict[str, Any]]:
        return [dict(r) for r in await self._read(sql.PENDING_EFFECTS, (limit,))]

    async def mark_effect(self, effect_id: int, *, now: float, error: str | None, done: bool) -> None:
        async def op(conn: aiosqlite.Connection) -> None:
            await conn.execute(
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

    async def installation_active(self, installation_id: int) -> bool:
        rows = await self._read("SELECT active FROM installations WHERE id = ?", (installation_id,))
        return not rows or bool(rows[0][0])

    # -- settings (queue pause) -------------------------------------------------------------------------

    async def set_setting(self, key: str, value: str) -> None:
        async def op(conn: aiosqlite.Connection) -> None:
            await conn.execute(
                "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

        await self._write(op)

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
        async def op(conn: aiosqlite.Connection) -> bool:
            if await conn.execute_fetchall("SELECT 1 FROM deliveries WHERE delivery_id = ?", (guid,)):
                return False
            rows = await conn.execute_fetchall(
                sql.CLAIM_REDELIVERY_IF_UNCLAIMED, (guid, delivery_id, owner, now, stale_before)
            )
            return bool(rows)

        return await self._write(op)

    async def mark_redelivery_requested(self, guid: str, *, owner: str, now: float, error: str | None) -> None:
        async def op(conn: aiosqlite.Connection) -> None:
            await conn.execute(sql.MARK_REDELIVERY_REQUESTED_IF_CLAIMED, (now, error, guid, owner))

        await self._write(op)

    async def release_redelivery(self, guid: str, *, owner: str, error: str) -> None:
        async def op(conn: aiosqlite.Connection) -> None:
            await conn.execute(sql.RELEASE_REDELIVERY_IF_CLAIMED, (error, guid, owner))

        await self._write(op)

    async def forget_redeliveries(self, before: float) -> int:
        async def op(conn: aiosqlite.Connection) -> int:
            return (await conn.execute(sql.FORGET_REDELIVERIES, (before,))).rowcount

        return await self._write(op)

    async def take_duty_lease(self, duty: str, *, owner: str, now: float, seconds: float) -> bool:
        async def op(conn: aiosqlite.Connection) -> bool:
            return bool(await conn.execute_fetchall(sql.TAKE_DUTY_LEASE_IF_FREE, (duty, owner, now + seconds, now)))

        return await self._write(op)

    async def release_duty_lease(self, duty: str, *, owner: str, now: float) -> None:
        async def op(conn: aiosqlite.Connection) -> None:
            await conn.execute(sql.RELEASE_DUTY_LEASE_IF_HELD, (now, duty, owner))

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
        expired = await self._read(
            "SELECT COUNT(*) FROM jobs WHERE state = 'running' AND lease_expires_at < ?", (now,)
        )
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
        async def op(conn: aiosqlite.Connection) -> bool:
            cur = await conn.execute(sql.OPERATOR_CANCEL, (reason, now, now, job_id))
            return cur.rowcount == 1

        return await self._write(op)

    async def prune(self, before: float, batch: int) -> int:
        terminal = ", ".join(f"'{s.value}'" for s in sorted(TERMINAL))

        async def op(conn: aiosqlite.Connection) -> int:
            # The newest job always stays: SQLite gives a new row max(id) + 1, and a job id must never be reused
            # (review markers and check runs name it).
            rows = await conn.execute_fetchall(
                f"SELECT id FROM jobs WHERE state IN ({terminal}) AND finished_at < ?"
                " AND id < (SELECT MAX(id) FROM jobs) ORDER BY finished_at, id LIMIT ?",
                (before, batch),
            )
            ids = [r[0] for r in rows]
            removed = 0
            if ids:
                marks = ",".join("?" * len(ids))
                # A job that stays may name a pruned one as its superseder; its outcome text still says which.
                await conn.execute(f"UPDATE jobs SET superseded_by = NULL WHERE superseded_by IN ({marks})", ids)
                await conn.execute(f"DELETE FROM attempts WHERE job_id IN ({marks})", ids)
                removed += (await conn.execute(f"DELETE FROM jobs WHERE id IN ({marks})", ids)).rowcount
            cur = await conn.execute(
                "DELETE FROM deliveries WHERE delivery_id IN"
                " (SELECT delivery_id FROM deliveries WHERE received_at < ? LIMIT ?)",
                (before, batch),
            )
            return removed + cur.rowcount

        return await self._write(op)

    async def retry_job(self, job_id: int, *, now: float) -> bool:
        async def op(conn: aiosqlite.Connection) -> bool:
            cur = await conn.execute(sql.OPERATOR_RETRY, (now, now, job_id))
            return cur.rowcount == 1

        retried = await self._write(op)
        if retried:
            self._wake_subscribers()
        return retried


def pause_key(repo_id: int, pr_number: int) -> str:
    return f"paused:{repo_id}:{pr_number}"


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
