"""Open the store a DATABASE_URL names."""

from __future__ import annotations

from reviewer_app.settings.config import Config, sqlite_path
from reviewer_app.store.base import Store


def make_store(cfg: Config) -> Store:
    path = sqlite_path(cfg.database_url)
    if path is not None:
        from reviewer_app.store.sqlite import SqliteStore

        return SqliteStore(path, busy_timeout_ms=cfg.db_busy_timeout_ms)
    from reviewer_app.store.postgres import PostgresStore

    return PostgresStore(cfg.database_url, max_size=cfg.db_pool_size, timeout_ms=cfg.db_busy_timeout_ms)
