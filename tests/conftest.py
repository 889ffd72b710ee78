"""Shared fixtures: a fresh store per test, for every backend the contract suite covers."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from reviewer_app.store.sqlite import SqliteStore

STORE_BACKENDS = ["sqlite"]


@pytest.fixture
async def sqlite_store(tmp_path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(str(tmp_path / "reviewer.db"), busy_timeout_ms=2000)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture(params=STORE_BACKENDS)
async def store(request, tmp_path) -> AsyncIterator[object]:
    if request.param == "sqlite":
        s = SqliteStore(str(tmp_path / "reviewer.db"), busy_timeout_ms=2000)
    else:  # pragma: no cover - added with the PostgreSQL backend
        raise NotImplementedError(request.param)
    await s.open()
    try:
        yield s
    finally:
        await s.close()
