"""The PostgreSQL store (asyncpg): a connection pool, SKIP LOCKED claims and NOTIFY wake-ups, for many hosts."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeVar

import asyncpg

from reviewer_app.core.admission import Decision
from reviewer_app.core.states import JobState
from reviewer_app.redaction import redact_url
from reviewer_app.store import postgres_sql as q
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
from reviewer_app.store.postgres_admission import admit_in
from reviewer_app.store.postgres_wakeups import WakeupListener
from reviewer_app.store.sqlite import load_migrations

log = logging.getLogger(__name__)
T = TypeVar("T")
TxOp = Callable[[asyncpg.Connection], Awaitable[T]]

# The database could not be reached or could not take the work: the caller gets StoreUnavailable.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.InsufficientResourcesError,
)
# A write maps every database error, as SqliteStore maps every sqlite3.DatabaseError of a write.
WRITE_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, asyncpg.PostgresError)
# Deadlocks and serialisation failures roll the whole transaction back: it is safe to run it again.
TX_RETRIES = 3

_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def _usage(u: Usage | None) -> tuple[str | None, int, int, int, int]:
    if u is None:
        return (None, 0, 0, 0, 0)
    return (u.model or None, u.input_tokens, u.output_tokens, u.cache_creation_tokens, u.cache_read_tokens)


def _plain(row: asyncpg.Record) -> dict[str, Any]:
    """The row as SQLite gives it: PostgreSQL's SUM of integers is NUMERIC (a Decimal), SQLite's an int."""
    return {k: int(v) if isinstance(v, Decimal) and v == v.to_integral_value() else v for k, v in row.items()}


@dataclass
class _Finish:
    """One fenced finish waiting for the next batch statement."""

    lease: Lease
    state: str
    outcome: str
    error: str | None
    now: float
    usage: tuple[str | None, int, int, int, int]
    done: asyncio.Future[bool]


async def _keep_session(conn: asyncpg.Connection) -> None:
    """The pool's reset on release, instead of asyncpg's default `RESET ALL; UNLISTEN *; ...` round trip.

    Nothing here leaves session state behind: advisory locks are transaction-scoped, SET is only SET LOCAL, LISTEN
    runs on the dedicated wake-up connection, and asyncpg still rolls back a transaction left open."""


def _changed(status: str) -> int:
    """Rows an ``UPDATE``/``INSERT``/``DELETE`` changed, from asyncpg's status string (``"UPDATE 1"``)."""
    return int(status.rsplit(" ", 1)[-1])


class PostgresStore(FencedFinishes):
    """A pool of ``max_size`` connections for queries, plus one dedicated connection for LISTEN when subscribed."""

    engine = "postgres"

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        schema: str | None = None,
        timeout_ms: int = 5000,
    ) -> None:
        if schema is not None and not _SCHEMA_NAME.fullmatch(schema):
            raise ValueError(f"schema {schema!r} is not a plain identifier (letters, digits, underscore)")
        self.dsn = dsn
        self.min_size = min_size
        self.max_size = max_size
        self.schema = schema
        self.timeout = timeout_ms / 1000
        self._pool: asyncpg.Pool | None = None
        self._schema_name = schema or "public"
        self._wakeups: WakeupListener | None = None
        self._finishes: list[_Finish] = []
        self._finisher: asyncio.Task[None] | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------

    def _server_settings(self) -> dict[str, str]:
        # lock_timeout is this backend's busy timeout: a write stuck behind a lock fails (503) instead of hanging.
        settings = {"application_name": "reviewer-app", "lock_timeout": f"{int(self.timeout * 1000)}ms"}
        if self.schema is not None:
            settings["search_path"] = f'"{self.schema}"'
        return settings

    async def _connect_one(self) -> asyncpg.Connection:
        return await asyncpg.connect(self.dsn, timeout=max(self.timeout, 1.0), server_settings=self._server_settings())

    async def open(self) -> None:
        try:
            self._pool = await asyncpg.create_pool(
                self.dsn,
                min_size=self.min_size,
                max_size=self.max_size,
                timeout=max(self.timeout, 1.0),
                server_settings=self._server_settings(),
                reset=_keep_session,
            )
            await self._migrate()
            self._schema_name = await self._pool.fetchval("SELECT current_schema()") or self._schema_name
        except (*WRITE_ERRORS, ValueError) as exc:
            await self.close()
            raise StoreUnavailable(
                f"cannot open PostgreSQL database {redact_url(self.dsn)}: {redact_url(str(exc))}"
            ) from exc

    async def close(self) -> None:
        if self._finisher is not None:
            # Finishes already handed over still go out (callers normally awaited them all before closing).
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._finisher), timeout=10)
        if self._wakeups is not None:
            await self._wakeups.stop()
            self._wakeups = None
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await asyncio.wait_for(pool.close(), timeout=10)
            except (TimeoutError, *CONNECTION_ERRORS):
                pool.terminate()

    async def _migrate(self) -> None:
        assert self._pool is not None
        async with self._pool.acquire() as conn, conn.transaction():
            # Many processes may start at once: one migrates, the others wait here and then find nothing to do.
            await conn.execute("SET LOCAL lock_timeout = '60s'")
            await conn.execute(q.LOCK_MIGRATIONS, f"reviewer-app:migrate:{self._schema_name}")
            if self.schema is not None:
                await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations"
                " (version INTEGER PRIMARY KEY, name TEXT, applied_at DOUBLE PRECISION)"
            )
            applied = {r[0] for r in await conn.fetch("SELECT version FROM schema_migrations")}
            for version, name, script in load_migrations("postgres"):
                if version in applied:
                    continue
                log.info("applying migration %s", name)
                await conn.execute(script)
                await conn.execute(
                    "INSERT INTO schema_migrations VALUES ($1, $2, extract(epoch FROM now()))", version, name
                )

    async def migrations_pending(self) -> list[str]:
        rows = await self._fetch("SELECT version FROM schema_migrations")
        applied = {r[0] for r in rows}
        return [name for version, name, _ in load_migrations("postgres") if version not in applied]

    async def ping(self) -> None:
        try:
            # A real table, as on SQLite: a database that answers but lost our schema is an outage too.
            await self._fetch("SELECT COUNT(*) FROM schema_migrations")
        except asyncpg.PostgresError as exc:
            raise StoreUnavailable(str(exc)) from exc

    async def subscribe_wakeups(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` whenever any host makes a job claimable (admission, operator retry, hand-back)."""
        if self._wakeups is None:
            self._wakeups = WakeupListener(self._connect_one, q.CHANNEL, self._schema_name)
            self._wakeups.callbacks.append(callback)
            await self._wakeups.start()
        else:
            self._wakeups.callbacks.append(callback)

    # -- transactions and reads -------------------------------------------------------------------------

    def _require_pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise StoreUnavailable("store is closed")
        return self._pool

    async def _tx(self, op: TxOp[T], *, one_statement: bool = False) -> T:
        """Run ``op`` in one transaction on a pooled connection; returns after the commit.

        ``one_statement``: ``op`` runs a single statement, which PostgreSQL makes atomic on its own (its implicit
        transaction), so no BEGIN and COMMIT round trips are spent on it."""
        pool = self._require_pool()
        for attempt in range(1, TX_RETRIES + 1):
            try:
                async with pool.acquire(timeout=self.timeout) as conn:
                    if one_statement:
                        return await op(conn)
                    async with conn.transaction():
                        return await op(conn)
            except asyncpg.TransactionRollbackError as exc:
                if attempt == TX_RETRIES:
                    raise StoreUnavailable(f"database write failed: {exc}") from exc
                log.info("transaction rolled back (%s); running it again", exc)
            except WRITE_ERRORS as exc:
                raise StoreUnavailable(f"database write failed: {exc}") from exc
        raise AssertionError("unreachable")

    async def _fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        pool = self._require_pool()
        try:
            async with pool.acquire(timeout=self.timeout) as conn:
                return list(await conn.fetch(query, *args))
        except CONNECTION_ERRORS as exc:
            # SQLite reads cannot lose their connection; here a dispatcher must see the outage as StoreUnavailable.
            raise StoreUnavailable(f"database read failed: {exc}") from exc

    # -- admission --------------------------------------------------------------------------------------

    async def admit(self, delivery: Delivery, decision: Decision, *, now: float, max_attempts: int) -> AdmitResult:
        async def op(conn: asyncpg.Connection) -> AdmitResult:
            result = await admit_in(conn, delivery, decision, now=now, max_attempts=max_attempts)
            if result.created:
                await conn.execute(q.NOTIFY_WAKEUP)
            return result

        return await self._tx(op)

    # -- dispatch ---------------------------------------------------------------------------------------

    async def claim(self, *, owner: str, limit: int, now: float, lease_seconds: float) -> list[Lease]:
        if limit <= 0:
            return []

        async def op(conn: asyncpg.Connection) -> list[Lease]:
            rows = await conn.fetch(q.CLAIM_QUEUED, owner, now + lease_seconds, now, limit)
            return [Lease(r["id"], r["lease_token"], owner, r["attempts"], r["lease_expires_at"], Job.from_row(r))
                    for r in rows]  # fmt: skip

        return await self._tx(op, one_statement=True)

    async def renew_lease(self, lease: Lease, *, now: float, lease_seconds: float) -> float | None:
        expires = now + lease_seconds

        async def op(conn: asyncpg.Connection) -> bool:
            return _changed(await conn.execute(q.RENEW_IF_LEASE_HELD, expires, now, lease.job_id, lease.token)) == 1

        return expires if await self._tx(op, one_statement=True) else None

    async def renew_leases(self, leases: Sequence[Lease], *, now: float, lease_seconds: float) -> set[str]:
        if not leases:
            return set()
        ids, tokens = [le.job_id for le in leases], [le.token for le in leases]

        async def op(conn: asyncpg.Connection) -> set[str]:
            rows = await conn.fetch(q.RENEW_MANY_IF_LEASE_HELD, now + lease_seconds, now, ids, tokens)
            return {r[0] for r in rows}

        return await self._tx(op, one_statement=True)

    async def _finish(
        self, lease: Lease, state: JobState, *, now: float, outcome: str, error: str | None, usage: Usage | None
    ) -> bool:
        """Fenced finish. Finishes that arrive while a batch statement is in flight go out together in the next one:
        one round trip and one commit for all of them, each job still changed only under its own lease token."""
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._finishes.append(_Finish(lease, state.value, outcome, error, now, _usage(usage), done))
        if self._finisher is None or self._finisher.done():
            # A clean context: the batch is nobody's job in the logs.
            self._finisher = asyncio.create_task(self._flush_finishes(), name="postgres-finishes",
                                                 context=contextvars.Context())  # fmt: skip
        return await done

    async def _flush_finishes(self) -> None:
        while self._finishes:
            batch, self._finishes = self._finishes, []
            batch.sort(key=lambda f: f.lease.job_id)  # rows locked in id order on every host
            rows = [(f.lease.job_id, f.lease.token, f.state, f.outcome, f.error, f.now, *f.usage) for f in batch]
            columns = [list(c) for c in zip(*rows, strict=True)]

            async def op(conn: asyncpg.Connection, columns: list[list[Any]] = columns) -> set[str]:
                return {r[0] for r in await conn.fetch(q.FINISH_JOBS_AND_ATTEMPTS, *columns)}

            try:
                held = await self._tx(op, one_statement=True)
            except Exception as exc:  # noqa: BLE001 - every waiter gets it (StoreUnavailable, mostly)
                for f in batch:
                    if not f.done.done():
                        f.done.set_exception(exc)
                continue
            except BaseException:
                for f in batch:
                    if not f.done.done():
                        f.done.set_exception(StoreUnavailable("store closed while finishing"))
                raise
            for f in batch:
                if not f.done.done():
                    f.done.set_result(f.lease.token in held)

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
        async def op(conn: asyncpg.Connection) -> bool:
            status = await conn.execute(
                q.REQUEUE_IF_LEASE_HELD, at, error, 0 if counts_attempt else 1, now, lease.job_id, lease.token
            )
            held = _changed(status) == 1
            outcome = ("retry" if counts_attempt else "deferred") if held else "lease_lost"
            await conn.execute(q.FINISH_ATTEMPT, now, outcome, error, *_usage(usage), lease.token)
            if held and at <= now:
                # Handed back for another host to take now (shutdown): wake the others.
                await conn.execute(q.NOTIFY_WAKEUP)
            return held

        return await self._tx(op)

    async def save_progress_if_lease_held(self, lease: Lease, *, now: float, **fields: Any) -> bool:
        unknown = set(fields) - PROGRESS_COLUMNS
        if unknown:
            raise ValueError(f"not a progress column: {sorted(unknown)}")
        cols = sorted(fields)
        values = [json.dumps(fields[c]) if c in ("answer", "details") else fields[c] for c in cols]
        assignments = ", ".join(f"{c} = ${i}" for i, c in enumerate(cols, start=1))
        n = len(cols)
        # Progress is written only while this attempt holds the lease.
        query = (
            f"UPDATE jobs SET {assignments}, updated_at = ${n + 1}"
            f" WHERE id = ${n + 2} AND lease_token = ${n + 3} AND state = 'running'"
        )

        async def op(conn: asyncpg.Connection) -> bool:
            return _changed(await conn.execute(query, *values, now, lease.job_id, lease.token)) == 1

        return await self._tx(op)

    async def record_usage_if_lease_held(self, lease: Lease, usage: Usage) -> bool:
        async def op(conn: asyncpg.Connection) -> bool:
            return _changed(await conn.execute(q.ADD_ATTEMPT_USAGE, *_usage(usage), lease.token)) == 1

        return await self._tx(op)

    async def rescue_expired(self, *, now: float) -> list[int]:
        async def op(conn: asyncpg.Connection) -> list[int]:
            rescued = []
            requeued = False
            for job_id, token, attempts, max_attempts in await conn.fetch(q.SELECT_EXPIRED_SKIP_LOCKED, now):
                error = f"lease expired during attempt {attempts} (worker crashed, was killed or hung)"
                if attempts >= max_attempts:
                    status = await conn.execute(q.EXPIRE_TO_FAILED, error, f"failed: {error}", now, now, job_id, token)
                else:
                    status = await conn.execute(q.EXPIRE_TO_QUEUE, now, error, now, job_id, token)
                    requeued = True
                if _changed(status) == 1:
                    rescued.append(job_id)
                    await conn.execute(q.FINISH_ATTEMPT, now, "lease_expired", error, None, 0, 0, 0, 0, token)
            if requeued:
                await conn.execute(q.NOTIFY_WAKEUP)
            return rescued

        return await self._tx(op)

    async def next_wakeup(self, *, now: float) -> float | None:
        rows = await self._fetch(q.NEXT_WAKEUP)
        return rows[0][0] if rows else None

    # -- check runs -------------------------------------------------------------------------------------

    async def jobs_needing_check_sync(self, *, limit: int = 50) -> list[Job]:
        return [Job.from_row(r) for r in await self._fetch(q.NEEDS_CHECK_SYNC, limit)]

    async def claim_check_run_creation(self, job_id: int, *, owner: str, now: float, seconds: float) -> bool:
        async def op(conn: asyncpg.Connection) -> bool:
            return bool(await conn.fetch(q.CLAIM_CHECK_RUN_CREATION, owner, now + seconds, job_id, now, owner))

        return await self._tx(op)

    async def set_check_run_if_unchanged(self, job_id: int, *, state: JobState, attempts: int,
                                         check_run_id: int | None, key: str) -> bool:  # fmt: skip
        async def op(conn: asyncpg.Connection) -> bool:
            status = await conn.execute(q.SET_CHECK_RUN_IF_UNCHANGED, check_run_id, key, job_id, state.value, attempts,
                                        check_run_id)  # fmt: skip
            return _changed(status) == 1

        return await self._tx(op)

    async def forget_check_run_status(self, job_id: int, *, check_run_id: int | None) -> None:
        async def op(conn: asyncpg.Connection) -> None:
            await conn.execute(q.FORGET_CHECK_RUN_STATUS, check_run_id, job_id)

        await self._tx(op)

    # -- outbox and installations ----------------------------------------------------------------------

    async def pending_effects(self, *, limit: int = 50) -> list[dict[str, Any]]:
        return [dict(r) for r in await self._fetch(q.PENDING_EFFECTS, limit)]

    async def usage_by_repo(self, *, since: float) -> list[dict[str, Any]]:
        return [_plain(r) for r in await self._fetch(q.USAGE_BY_REPO, since)]

    async def mark_effect(self, effect_id: int, *, now: float, error: str | None, done: bool) -> None:
        async def op(conn: asyncpg.Connection) -> None:
            await conn.execute(q.MARK_EFFECT, error, done, now, effect_id)

        await self._tx(op)

    async def last_reviewed_head(self, repo_id: int, pr_number: int) -> str | None:
        rows = await self._fetch(q.LAST_REVIEWED_HEAD, repo_id, pr_number)
        return rows[0][0] if rows else None

    async def skip_if_unpoked(self, lease: Lease, *, pokes: int, now: float, outcome: str) -> bool:
        async def op(conn: asyncpg.Connection) -> bool:
            status = await conn.execute(q.SKIP_IF_LEASE_HELD_AND_UNPOKED, outcome, now, now, lease.job_id, lease.token,
                                        pokes)  # fmt: skip
            if _changed(status) == 1:
                await conn.execute(q.FINISH_ATTEMPT, now, JobState.CANCELLED.value, None, *_usage(None), lease.token)
            return _changed(status) == 1

        return await self._tx(op)

    async def record_published_review(self, job_id: int, review_id: int) -> None:
        async def op(conn: asyncpg.Connection) -> None:
            await conn.execute(q.RECORD_PUBLISHED_REVIEW, review_id, job_id)

        await self._tx(op)

    async def installation_active(self, installation_id: int) -> bool:
        rows = await self._fetch(q.SELECT_INSTALLATION_ACTIVE, installation_id)
        return not rows or bool(rows[0][0])

    # -- settings (queue pause) -------------------------------------------------------------------------

    async def set_setting(self, key: str, value: str) -> None:
        async def op(conn: asyncpg.Connection) -> None:
            await conn.execute(q.UPSERT_SETTING, key, value)
            await conn.execute(q.NOTIFY_WAKEUP)  # a resumed queue has claimable work at once

        await self._tx(op)

    async def get_setting(self, key: str) -> str | None:
        rows = await self._fetch("SELECT value FROM settings WHERE key = $1", key)
        return rows[0][0] if rows else None

    # -- missed-webhook recovery (the shared statements of sql.py, renumbered) ------------------------------

    async def deliveries_to_recover(self, guids: Sequence[str]) -> set[str]:
        if not guids:
            return set()
        rows = await self._fetch(
            "SELECT g FROM unnest($1::text[]) AS g"
            " WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.delivery_id = g)"
            "   AND NOT EXISTS (SELECT 1 FROM redeliveries r WHERE r.guid = g AND r.requested_at IS NOT NULL)",
            list(guids),
        )
        return {r[0] for r in rows}

    async def claim_redelivery(self, guid: str, delivery_id: int, *, owner: str, now: float,
                               stale_before: float) -> bool:  # fmt: skip
        async def op(conn: asyncpg.Connection) -> bool:
            if await conn.fetchval("SELECT 1 FROM deliveries WHERE delivery_id = $1", guid):
                return False
            claim = q.numbered(sql.CLAIM_REDELIVERY_IF_UNCLAIMED)
            return await conn.fetchval(claim, guid, delivery_id, owner, now, stale_before) is not None

        return await self._tx(op)

    async def mark_redelivery_requested(self, guid: str, *, owner: str, now: float, error: str | None) -> None:
        async def op(conn: asyncpg.Connection) -> None:
            await conn.execute(q.numbered(sql.MARK_REDELIVERY_REQUESTED_IF_CLAIMED), now, error, guid, owner)

        await self._tx(op)

    async def release_redelivery(self, guid: str, *, owner: str, error: str) -> None:
        async def op(conn: asyncpg.Connection) -> None:
            await conn.execute(q.numbered(sql.RELEASE_REDELIVERY_IF_CLAIMED), error, guid, owner)

        await self._tx(op)

    async def forget_redeliveries(self, before: float) -> int:
        async def op(conn: asyncpg.Connection) -> int:
            return _changed(await conn.execute(q.numbered(sql.FORGET_REDELIVERIES), before))

        return await self._tx(op)

    async def take_duty_lease(self, duty: str, *, owner: str, now: float, seconds: float) -> bool:
        async def op(conn: asyncpg.Connection) -> bool:
            taken = await conn.fetchval(q.numbered(sql.TAKE_DUTY_LEASE_IF_FREE), duty, owner, now + seconds, now)
            return taken is not None

        return await self._tx(op)

    async def release_duty_lease(self, duty: str, *, owner: str, now: float) -> None:
        async def op(conn: asyncpg.Connection) -> None:
            await conn.execute(q.numbered(sql.RELEASE_DUTY_LEASE_IF_HELD), now, duty, owner)

        await self._tx(op)

    # -- reads and admin --------------------------------------------------------------------------------

    async def get_job(self, job_id: int) -> Job | None:
        rows = await self._fetch(f"SELECT {sql.JOB_COLUMNS} FROM jobs WHERE id = $1", job_id)
        return Job.from_row(rows[0]) if rows else None

    async def list_jobs(
        self,
        *,
        states: Sequence[str] = (),
        repo: str | None = None,
        pr_number: int | None = None,
        limit: int = 100,
    ) -> list[Job]:
        where: list[str] = ["TRUE"]
        params: list[Any] = []
        if states:
            params.append([str(s) for s in states])
            where.append(f"state = ANY(${len(params)}::text[])")
        if repo:
            params.append(repo)
            where.append(f"repo_full_name = ${len(params)}")
        if pr_number is not None:
            params.append(pr_number)
            where.append(f"pr_number = ${len(params)}")
        params.append(limit)
        rows = await self._fetch(
            f"SELECT {sql.JOB_COLUMNS} FROM jobs WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ${len(params)}",
            *params,
        )
        return [Job.from_row(r) for r in rows]

    async def attempts_of(self, job_id: int) -> list[Attempt]:
        return [Attempt(*tuple(r)) for r in await self._fetch(q.SELECT_ATTEMPTS, job_id)]

    async def stats(self, *, now: float) -> QueueStats:
        by_state = {r[0]: r[1] for r in await self._fetch("SELECT state, COUNT(*) FROM jobs GROUP BY state")}
        oldest = await self._fetch("SELECT MIN(created_at) FROM jobs WHERE state IN ('queued', 'running')")
        expired = await self._fetch("SELECT COUNT(*) FROM jobs WHERE state = 'running' AND lease_expires_at < $1", now)
        awaiting = await self._fetch(
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
        async def op(conn: asyncpg.Connection) -> bool:
            return _changed(await conn.execute(q.OPERATOR_CANCEL, reason, now, now, job_id)) == 1

        return await self._tx(op)

    async def prune(self, before: float, batch: int) -> int:
        async def op(conn: asyncpg.Connection) -> int:
            ids = [r[0] for r in await conn.fetch(q.PRUNABLE_JOBS, before, batch)]
            removed = 0
            if ids:
                await conn.execute(q.FORGET_PRUNED_SUPERSEDERS, ids)
                await conn.execute(q.DELETE_PRUNED_ATTEMPTS, ids)
                removed += _changed(await conn.execute(q.DELETE_PRUNED_JOBS, ids))
            removed += _changed(await conn.execute(q.PRUNE_DELIVERIES, before, batch))
            return removed + _changed(await conn.execute(q.PRUNE_FINISHED_EFFECTS, before, batch))

        return await self._tx(op)

    async def retry_job(self, job_id: int, *, now: float) -> bool:
        async def op(conn: asyncpg.Connection) -> bool:
            retried = _changed(await conn.execute(q.OPERATOR_RETRY, now, now, job_id)) == 1
            if retried:
                await conn.execute(q.NOTIFY_WAKEUP)
            return retried

        return await self._tx(op)
