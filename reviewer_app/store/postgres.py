"""The PostgreSQL driver (asyncpg): a connection pool, SKIP LOCKED claims, NOTIFY wake-ups, group commit of admissions."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import asyncpg

from reviewer_app.redaction import redact_url
from reviewer_app.store import procedures as p
from reviewer_app.store.base import StoreUnavailable
from reviewer_app.store.driven import DrivenStore, ProcedureFactory
from reviewer_app.store.postgres_pool import CONNECTION_ERRORS, WRITE_ERRORS, TxOp, fetch, in_transaction
from reviewer_app.store.postgres_wakeups import WakeupListener
from reviewer_app.store.records import AdmitResult
from reviewer_app.store.schema import load_migrations
from reviewer_app.store.statements import (
    CLAIM_DELIVERIES_AND_LOCK_ENQUEUES,
    CLAIM_DELIVERY_AND_LOCK_ENQUEUE,
    ENQUEUE_PRECHECK,
    ENQUEUE_PRECHECKS_TOGETHER,
    INSERT_JOB_IF_NEW_REVISION,
    INSERT_JOBS_IF_NEW_REVISIONS,
    LOCK_MIGRATIONS,
    Statement,
    for_postgres,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

CHANNEL = "reviewer_jobs"
# Wake every host listening on this schema: the payload is the schema, so stores that share a database but not a
# schema ignore each other's wake-ups.
NOTIFY_WAKEUP = f"SELECT pg_notify('{CHANNEL}', current_schema())"

# Admissions committed together, at most: a bigger backlog goes out in several transactions.
MAX_ADMISSION_BATCH = 256
# Admission transactions in flight at once: one fills while another waits for its round trips and its commit.
ADMISSION_LANES = 2


@dataclass
class _Admission:
    """One admission waiting for the next batch transaction."""

    key: tuple[int, int, int]  # its locks' order: installation, repository, pull request
    procedure: ProcedureFactory[AdmitResult]
    done: asyncio.Future[AdmitResult]


async def _keep_session(conn: asyncpg.Connection) -> None:
    """The pool's reset on release, instead of asyncpg's default `RESET ALL; UNLISTEN *; ...` round trip.

    Nothing here leaves session state behind: advisory locks are transaction-scoped, SET is only SET LOCAL, LISTEN
    runs on the dedicated wake-up connection, and asyncpg still rolls back a transaction left open."""


def _changed(status: str) -> int:
    """Rows an ``UPDATE``/``INSERT``/``DELETE`` changed, from asyncpg's status string (``"UPDATE 1"``)."""
    return int(status.rsplit(" ", 1)[-1])


class PostgresStore(DrivenStore):
    """A pool of ``max_size`` connections for queries, plus one dedicated connection for LISTEN when subscribed."""

    engine = "postgres"
    finishes_in_one_statement = True

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
        self._admissions: list[_Admission] = []
        self._admitters: set[asyncio.Task[None]] = set()

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
        if self._admitters:
            # Admissions already handed over still commit (their callers are waiting for the answer).
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.gather(*self._admitters, return_exceptions=True), timeout=10)
        await self._settle_finishes()
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
            await conn.execute(LOCK_MIGRATIONS, f"reviewer-app:migrate:{self._schema_name}")
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
            self._wakeups = WakeupListener(self._connect_one, CHANNEL, self._schema_name)
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
        """Run ``op`` in one transaction on a pooled connection; returns after the commit (see postgres_pool)."""
        return await in_transaction(self._require_pool(), self.timeout, op, one_statement=one_statement)

    async def _fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        return await fetch(self._require_pool(), self.timeout, query, *args)

    # -- the driver: procedures on a pooled connection ---------------------------------------------------

    async def _run(self, procedure: ProcedureFactory[T], *, one_statement: bool = False) -> T:
        async def op(conn: asyncpg.Connection) -> T:
            later: HeldWrites = {}
            value, wake = await _drive(conn, procedure(), later, one_statement=one_statement)
            await _run_later(conn, later)
            if wake:
                await conn.execute(NOTIFY_WAKEUP)
            return value

        return await self._tx(op, one_statement=one_statement)

    async def _rows(self, stmt: Statement, params: Sequence[Any] = ()) -> list[asyncpg.Record]:
        query = for_postgres(stmt)
        assert query is not None, "a read every dialect runs"
        return await self._fetch(query, *params)

    # -- group commit of admissions ----------------------------------------------------------------------

    async def _admit(self, procedure: ProcedureFactory[AdmitResult], key: tuple[int, int, int]) -> AdmitResult:
        """Admissions that arrive while a batch is in flight commit together in the next transaction: one commit
        (one WAL flush) for all of them, each still applied in full, in lock order, before the next."""
        self._require_pool()
        done: asyncio.Future[AdmitResult] = asyncio.get_running_loop().create_future()
        self._admissions.append(_Admission(key, procedure, done))
        if len(self._admitters) < ADMISSION_LANES:
            # A clean context: the batch is nobody's delivery in the logs.
            task = asyncio.create_task(
                self._flush_admissions(), name="postgres-admissions", context=contextvars.Context()
            )
            self._admitters.add(task)
            task.add_done_callback(self._admitters.discard)
        return await done

    async def _flush_admissions(self) -> None:
        while self._admissions:
            batch = self._admissions[:MAX_ADMISSION_BATCH]
            del self._admissions[:MAX_ADMISSION_BATCH]
            # Every transaction takes its advisory locks in the same order, so two batches never deadlock.
            batch.sort(key=lambda a: a.key)
            try:
                results = await self._run_admissions(batch)
            except BaseException as exc:
                if not isinstance(exc, Exception):
                    for a in batch:
                        if not a.done.done():
                            a.done.set_exception(StoreUnavailable("store closed while admitting"))
                    raise
                if len(batch) == 1 or not _one_admissions_fault(exc):
                    # Unreachable, a lock held past the timeout, deadlocks again and again: nobody was committed.
                    for a in batch:
                        if not a.done.done():
                            a.done.set_exception(exc)
                    continue
                # One admission failed on its own terms (or the database did): each alone, so only those fail.
                for a in batch:
                    try:
                        (result,) = await self._run_admissions([a])
                    except Exception as alone:  # noqa: BLE001 - its caller gets it (StoreUnavailable, mostly)
                        if not a.done.done():
                            a.done.set_exception(alone)
                    else:
                        if not a.done.done():
                            a.done.set_result(result)
                continue
            for a, result in zip(batch, results, strict=True):
                if not a.done.done():  # the caller was cancelled; its admission committed all the same
                    a.done.set_result(result)

    async def _run_admissions(self, batch: list[_Admission]) -> list[AdmitResult]:
        async def op(conn: asyncpg.Connection) -> list[AdmitResult]:
            later: HeldWrites = {}
            procedures = [a.procedure() for a in batch]
            firsts: list[p.Step | None] = []
            results: list[Any] = [_UNANSWERED] * len(batch)
            for i, procedure in enumerate(procedures):
                try:
                    firsts.append(procedure.send(None))
                except StopIteration as stop:  # a procedure without a step
                    firsts.append(None)
                    results[i] = stop.value
            # Every Enqueue of the batch claims its delivery and takes its locks in one statement, in lock order.
            claims = [
                i for i, st in enumerate(firsts) if type(st) is p.Row and st.stmt is CLAIM_DELIVERY_AND_LOCK_ENQUEUE
            ]
            answers: dict[int, Any] = {}
            if len(claims) > 1:
                columns = [list(c) for c in zip(*(firsts[i].params for i in claims), strict=True)]  # type: ignore[union-attr]
                claimed = await conn.fetch(CLAIM_DELIVERIES_AND_LOCK_ENQUEUES, *columns)
                # Each claim's answer gives its procedure's next step: the pre-check.
                for i, answer in zip(claims, claimed, strict=True):
                    try:
                        firsts[i] = procedures[i].send(answer)
                    except StopIteration as stop:
                        results[i] = stop.value
                # Then the pre-checks no other admission of the batch can change, in one statement too.
                together = _independent_prechecks(firsts, results, all_enqueues=len(claims) == len(batch))
                if len(together) > 1:
                    columns = [
                        list(c)
                        for c in zip(*(_precheck_columns(firsts[i].params) for i in together), strict=True)  # type: ignore[union-attr]
                    ]
                    prechecked = await conn.fetch(ENQUEUE_PRECHECKS_TOGETHER, *columns)
                    # Each pre-check's answer gives the next step: for most, the insert, which go together too.
                    for i, answer in zip(together, prechecked, strict=True):
                        try:
                            firsts[i] = procedures[i].send(answer)
                        except StopIteration as stop:
                            results[i] = stop.value
                    inserts = [
                        i
                        for i in together
                        if results[i] is _UNANSWERED
                        and type(firsts[i]) is p.Insert
                        and firsts[i].stmt is INSERT_JOB_IF_NEW_REVISION  # type: ignore[union-attr]
                    ]
                    if len(inserts) > 1:
                        columns = [list(c) for c in zip(*(firsts[i].params for i in inserts), strict=True)]  # type: ignore[union-attr]
                        ids = {
                            r["revision_key"]: r["id"] for r in await conn.fetch(INSERT_JOBS_IF_NEW_REVISIONS, *columns)
                        }
                        answers = {i: ids.get(firsts[i].params[p.INSERT_REVISION_KEY]) for i in inserts}  # type: ignore[union-attr]
            wake = False
            for i, procedure in enumerate(procedures):
                if results[i] is not _UNANSWERED:
                    continue
                if i in answers:
                    results[i], woke = await _drive(conn, procedure, later, answer=answers[i])
                else:
                    results[i], woke = await _drive(conn, procedure, later, first=firsts[i])
                wake = wake or woke
            await _run_later(conn, later)
            if wake:
                await conn.execute(NOTIFY_WAKEUP)
            return results

        return await self._tx(op)


def _independent_prechecks(steps: Sequence[p.Step | None], results: Sequence[Any], *, all_enqueues: bool) -> list[int]:
    """The admissions of a batch whose pre-check may run before the others' writes: each the batch's only admission
    of its pull request (so no other writes its PR's jobs, pause or revision), counting no day's or hour's jobs (the
    others' inserts would count), in a batch of Enqueues only (no uninstall, removal or pause among them)."""
    if not all_enqueues:
        return []
    prs: dict[tuple[Any, Any], int] = {}
    for step in steps:
        if type(step) is p.Row and step.stmt is ENQUEUE_PRECHECK:
            key = (step.params[p.PRECHECK_REPO], step.params[p.PRECHECK_PR])
            prs[key] = prs.get(key, 0) + 1
    return [
        i
        for i, step in enumerate(steps)
        if results[i] is _UNANSWERED
        and type(step) is p.Row
        and step.stmt is ENQUEUE_PRECHECK
        and not step.params[p.PRECHECK_COUNTS_DAY]  # the day's reviews of the installation
        and not step.params[p.PRECHECK_COUNTS_HOUR]  # the hour's requested reviews of the PR
        and prs[(step.params[p.PRECHECK_REPO], step.params[p.PRECHECK_PR])] == 1
    ]


def _precheck_columns(params: Sequence[Any]) -> tuple[Any, ...]:
    """ENQUEUE_PRECHECK's parameters as ENQUEUE_PRECHECKS_TOGETHER takes them (one element of each array)."""
    return tuple(params[i] for i in p.PRECHECK_TOGETHER_COLUMNS)


def _one_admissions_fault(exc: Exception) -> bool:
    """Whether ``exc`` may be one admission's own (a bug, a constraint), not the database's: then the others of its
    batch commit without it. An outage or a lock timeout would only fail each of them again, one after another."""
    cause = exc.__cause__ if isinstance(exc, StoreUnavailable) else exc
    if cause is None:
        return False
    database_wide = (
        *CONNECTION_ERRORS,
        asyncpg.TransactionRollbackError,
        asyncpg.exceptions.LockNotAvailableError,
        asyncpg.exceptions.QueryCanceledError,
    )
    return not isinstance(cause, database_wide)


_UNANSWERED = object()
HeldWrites = dict[str, list[Sequence[Any]]]  # the writes held back until just before the commit, by statement


async def _drive(
    conn: asyncpg.Connection,
    procedure: p.Procedure[T],
    later: HeldWrites,
    *,
    one_statement: bool = False,
    first: p.Step | None = None,
    answer: Any = _UNANSWERED,
) -> tuple[T, bool]:
    """Run every step of ``procedure`` on ``conn`` (inside the caller's transaction, unless ``one_statement``); its
    result, and whether it asked to wake the hosts. ``first``: the step it already yielded; ``answer``: that step's
    result, when the caller ran it (a batch's claims, together)."""
    wake = ran = False
    try:
        if answer is not _UNANSWERED:
            step = procedure.send(answer)
        else:
            step = first if first is not None else procedure.send(None)
        while True:
            kind = type(step)
            result: Any = None
            if kind is p.Wake:
                wake = True
            elif (query := for_postgres(step.stmt)) is not None:  # type: ignore[union-attr]  # None: not here
                if one_statement and ran:
                    raise AssertionError(f"a one-statement procedure ran a second statement: {query[:60]!r}")
                ran = True
                params = step.params  # type: ignore[union-attr]
                if kind is p.Row:
                    result = await conn.fetchrow(query, *params)
                elif kind is p.Rows:
                    result = await conn.fetch(query, *params)
                elif kind is p.Count:
                    result = _changed(await conn.execute(query, *params))
                elif kind is p.Insert:
                    result = await conn.fetchval(query, *params)
                elif kind is p.Later:
                    later.setdefault(query, []).append(params)
                else:
                    assert kind is p.Many
                    await conn.executemany(query, params)
            step = procedure.send(result)
    except StopIteration as stop:
        return stop.value, wake


async def _run_later(conn: asyncpg.Connection, later: HeldWrites) -> None:
    for query, rows in later.items():
        await conn.executemany(query, rows)
