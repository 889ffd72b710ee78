"""PostgreSQL connections as the store uses them: which failures mean the database is unavailable, and what is safe
to run again after a connection was lost (a restart, a failover, an administrator's pg_terminate_backend)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

from reviewer_app.store.base import StoreUnavailable

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
    # A connection the server closed while it sat idle in the pool: asyncpg finds its protocol in a state no query
    # can start from ("cannot switch to state ...; another operation is in progress").
    asyncpg.InternalClientError,
)
# A write maps every database error, as SqliteStore maps every sqlite3.DatabaseError of a write.
WRITE_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, asyncpg.PostgresError)
# Deadlocks and serialisation failures roll the whole transaction back: it is safe to run it again.
TX_RETRIES = 3


@contextlib.asynccontextmanager
async def connection(pool: asyncpg.Pool, timeout: float) -> AsyncIterator[asyncpg.Connection]:
    """A pooled connection. When one fails as a connection (the server closed it: a restart, a failover, an
    administrator), the others are likely gone too: every pooled connection is replaced at its next use, and this
    one is closed, instead of each caller meeting a dead connection in turn."""
    async with pool.acquire(timeout=timeout) as conn:
        try:
            yield conn
        except CONNECTION_ERRORS:
            await pool.expire_connections()
            with contextlib.suppress(asyncpg.InterfaceError):  # already released when asyncpg saw it close
                conn.terminate()
            raise


async def in_transaction(pool: asyncpg.Pool, timeout: float, op: TxOp[T], *, one_statement: bool = False) -> T:
    """Run ``op`` in one transaction on a pooled connection; returns after the commit.

    ``one_statement``: ``op`` runs a single statement, which PostgreSQL makes atomic on its own (its implicit
    transaction), so no BEGIN and COMMIT round trips are spent on it."""
    for attempt in range(1, TX_RETRIES + 1):
        committing = False
        try:
            async with connection(pool, timeout) as conn:
                if one_statement:
                    return await op(conn)
                async with conn.transaction():
                    result = await op(conn)
                    committing = True
                return result
        except asyncpg.TransactionRollbackError as exc:
            if attempt == TX_RETRIES:
                raise StoreUnavailable(f"database write failed: {exc}") from exc
            log.info("transaction rolled back (%s); running it again", exc)
        except CONNECTION_ERRORS as exc:
            # A transaction dies with its connection: one lost before COMMIT committed nothing and runs again on a
            # fresh connection (as does a statement that never left, on a connection found dead). One lost at
            # COMMIT, or during a single statement, may have committed: that is reported, never guessed.
            never_sent = isinstance(exc, asyncpg.InternalClientError)
            if attempt == TX_RETRIES or committing or (one_statement and not never_sent):
                raise StoreUnavailable(f"database write failed: {exc}") from exc
            log.info("connection lost before the commit (%s); running the transaction again", exc)
        except WRITE_ERRORS as exc:
            raise StoreUnavailable(f"database write failed: {exc}") from exc
    raise AssertionError("unreachable")


async def fetch(pool: asyncpg.Pool, timeout: float, query: str, *args: Any) -> list[asyncpg.Record]:
    try:
        try:
            async with connection(pool, timeout) as conn:
                return list(await conn.fetch(query, *args))
        except CONNECTION_ERRORS:  # a read is safe to ask again, on a fresh connection
            async with connection(pool, timeout) as conn:
                return list(await conn.fetch(query, *args))
    except CONNECTION_ERRORS as exc:
        # SQLite reads cannot lose their connection; here a dispatcher must see the outage as StoreUnavailable.
        raise StoreUnavailable(f"database read failed: {exc}") from exc
