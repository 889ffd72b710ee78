"""The test PostgreSQL server: its DSN, a fresh schema per test, and skip-or-fail when it is not reachable."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import NoReturn

import asyncpg
import pytest

from reviewer_app.redaction import redact_url

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
CONNECT_ERRORS = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)


def postgres_dsn() -> str:
    return os.environ.get("REVIEWER_TEST_POSTGRES_DSN") or DEFAULT_DSN


def unreachable(dsn: str, exc: BaseException) -> NoReturn:
    """Skip the PostgreSQL half of a test, or fail it on CI, where the server must be there."""
    msg = (
        f"PostgreSQL not reachable at {redact_url(dsn)} ({type(exc).__name__}: {exc}); "
        "set REVIEWER_TEST_POSTGRES_DSN or start the server to run the PostgreSQL half"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(msg)
    pytest.skip(msg)


async def _connect(dsn: str) -> asyncpg.Connection:
    try:
        return await asyncpg.connect(dsn, timeout=5)
    except CONNECT_ERRORS as exc:
        unreachable(dsn, exc)


async def create_schema(dsn: str) -> str:
    schema = f"test_{uuid.uuid4().hex[:16]}"
    conn = await _connect(dsn)
    try:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
    finally:
        await conn.close()
    return schema


async def drop_schema(dsn: str, schema: str) -> None:
    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


@asynccontextmanager
async def fresh_schema(dsn: str | None = None) -> AsyncIterator[tuple[str, str]]:
    """(dsn, schema) of an empty schema that is dropped afterwards."""
    dsn = dsn or postgres_dsn()
    schema = await create_schema(dsn)
    try:
        yield dsn, schema
    finally:
        await drop_schema(dsn, schema)
