"""The SQLite driver (sqlite3 + aiosqlite): WAL, synchronous=FULL, and group commit of concurrent writes."""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import aiosqlite

from reviewer_app.store.base import StoreUnavailable
from reviewer_app.store.driven import DrivenStore, ProcedureFactory
from reviewer_app.store.procedures import Count, Insert, Later, Many, Procedure, Row, Rows, Step, Wake
from reviewer_app.store.schema import load_migrations
from reviewer_app.store.statements import Statement, for_sqlite

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


class SqliteStore(DrivenStore):
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
        conn = sqlite3.connect(
            self.path, isolation_level=None, timeout=self.busy_timeout_ms / 1000, check_same_thread=False
        )
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
            self._reader = await aiosqlite.connect(self.path, isolation_level=None, timeout=self.busy_timeout_ms / 1000)
            self._reader.row_factory = sqlite3.Row
            for pragma in self._pragmas():
                await self._reader.execute(pragma)
            self._file_id = _file_identity(self.path)
        except sqlite3.Error as exc:
            await self.close()
            raise StoreUnavailable(f"cannot open SQLite database {self.path!r}: {exc}") from exc

    async def close(self) -> None:
        await self._settle_finishes()
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

    # -- the driver: procedures in the writer thread, reads on the reader ---------------------------------

    async def _run(self, procedure: ProcedureFactory[T], *, one_statement: bool = False) -> T:
        wakes: list[bool] = []

        def op(conn: sqlite3.Connection) -> T:
            wakes.clear()  # the op may run again alone, after its batch failed
            return _drive(conn, procedure(), wakes)

        result = await self._write(op)
        if wakes:
            self._wake_subscribers()
        return result

    async def _rows(self, stmt: Statement, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        query = for_sqlite(stmt)
        assert query is not None, "a read every dialect runs"
        return await self._read(query, params)


def _drive(conn: sqlite3.Connection, procedure: Procedure[T], wakes: list[bool]) -> T:
    """In the writer thread: run every step of ``procedure`` inside the open transaction; its result."""
    result: Any = None
    try:
        while True:
            result = _step(conn, procedure.send(result), wakes)
    except StopIteration as stop:
        return stop.value


def _step(conn: sqlite3.Connection, step: Step, wakes: list[bool]) -> Any:
    kind = type(step)
    if kind is Wake:
        if not step.other_hosts:  # type: ignore[union-attr]
            wakes.append(True)
        return None
    query = for_sqlite(step.stmt)  # type: ignore[union-attr]
    if query is None:  # a step only the other dialect needs
        return None
    if kind is Row:
        return conn.execute(query, step.params).fetchone()  # type: ignore[union-attr]
    if kind is Rows:
        return conn.execute(query, step.params).fetchall()  # type: ignore[union-attr]
    if kind is Count:
        return conn.execute(query, step.params).rowcount
    if kind is Later:  # one writer, one transaction at a time: nothing to gain by holding it
        conn.execute(query, step.params)
        return None  # type: ignore[union-attr]
    if kind is Insert:
        return conn.execute(query, step.params).lastrowid  # type: ignore[union-attr]
    assert kind is Many
    conn.executemany(query, step.params)  # type: ignore[union-attr]
    return None


def _file_identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the database file; None when there is no file (``:memory:``)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)
