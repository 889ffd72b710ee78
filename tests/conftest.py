"""Shared fixtures: a fresh store per test, for every backend the contract suite covers."""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator

import pytest
from hypothesis import settings

from reviewer_app.store.postgres import PostgresStore
from reviewer_app.store.sqlite import SqliteStore
from tests.pg import fresh_schema

# A SIGTERM (a timeout wrapper, CI cancelling) ends the run through SystemExit, so every test's cleanup and the
# atexit hook of tests/serve_process.py run: no `reviewer-app serve` started by a test outlives the run.
signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))

STORE_BACKENDS = ["sqlite", "postgres"]

# Property and fuzz tests: the same examples on every CI run (a failure there reproduces anywhere), new ones on a
# developer's machine. Each test names its own number of examples, so CI's cost stays fixed.
settings.register_profile("ci", derandomize=True, deadline=None, database=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev")


@pytest.fixture
def keep_logging() -> Iterator[None]:
    """The root logger's handlers and level as they were before the test (the CLI's main() installs its own)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
async def sqlite_store(tmp_path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(str(tmp_path / "reviewer.db"), busy_timeout_ms=2000)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
async def pg_schema() -> AsyncIterator[tuple[str, str]]:
    """(dsn, schema): a fresh schema on the test PostgreSQL server, dropped after the test (see tests/pg.py)."""
    async with fresh_schema() as dsn_schema:
        yield dsn_schema


@pytest.fixture(params=STORE_BACKENDS)
async def store(request, tmp_path) -> AsyncIterator[object]:
    if request.param == "sqlite":
        s = SqliteStore(str(tmp_path / "reviewer.db"), busy_timeout_ms=2000)
        await s.open()
        try:
            yield s
        finally:
            await s.close()
        return
    async with fresh_schema() as (dsn, schema):
        s = PostgresStore(dsn, schema=schema, timeout_ms=2000)
        await s.open()
        try:
            yield s
        finally:
            await s.close()
