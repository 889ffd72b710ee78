"""How fast each dashboard page answers on a big database: 100,000 jobs, on SQLite and on PostgreSQL.

Each store is filled with ``--jobs`` jobs over 90 days and 50 repositories in a realistic mix of states, each
claimed job with one attempt and its token usage (plain INSERTs: the fill is not what is measured), then the
dashboard is served on a loopback port and every page is requested ``--requests`` times, one at a time, by a
signed-in client. The figures are the median and the slowest wall time of a request as the client sees it, and
apart the first (cold) request's.

    python bench/dashboard.py                    # both stores; --stores sqlite; --jobs N; --requests N; --json

PostgreSQL is the test server (REVIEWER_TEST_POSTGRES_DSN, default postgresql://postgres@127.0.0.1:5432/test), in
a schema of its own that is dropped afterwards; it is skipped with a note when it cannot be reached.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
from aiohttp import web

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from reviewer_app.core.pricing import DEFAULT_PRICES  # noqa: E402
from reviewer_app.store.base import WorkerInfo  # noqa: E402
from reviewer_app.store.postgres import PostgresStore  # noqa: E402
from reviewer_app.store.sqlite import SqliteStore  # noqa: E402
from reviewer_app.web.dashboard import Dashboard  # noqa: E402
from tests.dashboard_seed import bulk_rows, insert_sql  # noqa: E402
from tests.pg import create_schema, drop_schema, postgres_dsn  # noqa: E402

TOKEN = "bench-token-0123456789abcdef"


def pages(n: int) -> dict[str, str]:
    return {
        "queue": "/dashboard",
        "workers": "/dashboard/workers",
        "jobs (newest)": "/dashboard/jobs",
        "jobs state=failed": "/dashboard/jobs?state=failed",
        "jobs repo": "/dashboard/jobs?repo=org7/repo7",
        "jobs repo+pr": "/dashboard/jobs?repo=org7/repo7&pr=42",
        "jobs page in the middle": f"/dashboard/jobs?before={n // 2}",
        "one job": f"/dashboard/jobs/{n // 3}",
        "spend": "/dashboard/spend",
        "spend chart (SVG)": "/dashboard/spend.svg",
    }


async def fill_sqlite(path: str, n: int, now: float) -> None:
    jobs, attempts = bulk_rows(n, now)
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.executemany(insert_sql("jobs", "?"), jobs)
            conn.executemany(insert_sql("attempts", "?"), attempts)
        conn.execute("ANALYZE")
    finally:
        conn.close()


async def fill_postgres(dsn: str, schema: str, n: int, now: float) -> None:
    jobs, attempts = bulk_rows(n, now)
    conn = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    try:
        async with conn.transaction():
            await conn.executemany(insert_sql("jobs", "${}"), jobs)
            await conn.executemany(insert_sql("attempts", "${}"), attempts)
        # What autovacuum does to a table in service: statistics, and the visibility map index-only scans rely on.
        await conn.execute("VACUUM ANALYZE jobs")
        await conn.execute("VACUUM ANALYZE attempts")
    finally:
        await conn.close()


async def register_workers(store: Any, now: float) -> None:
    for k in range(4):
        beat = now - (5 if k < 3 else 900)  # the last one is gone, holding its running jobs
        await store.register_worker(
            WorkerInfo(f"worker-h{k}", f"host-{k}", 1000 + k, "worker", "0.1.0", 8, 120.0, now - 86400, beat, 2)
        )


async def measure(store: Any, n: int, requests: int) -> dict[str, dict[str, float]]:
    app = web.Application()
    Dashboard(store, token=TOKEN, prices=DEFAULT_PRICES).register(app)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    base = f"http://127.0.0.1:{port}"
    out: dict[str, dict[str, float]] = {}
    try:
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:  # an IP host
            async with http.post(base + "/dashboard/login", data={"token": TOKEN}, allow_redirects=False) as r:
                assert r.status == 303, r.status
            for name, path in pages(n).items():
                times = []
                for _ in range(requests + 1):
                    started = time.perf_counter()
                    async with http.get(base + path, allow_redirects=False) as r:
                        await r.read()
                        assert r.status == 200, (path, r.status)
                    times.append((time.perf_counter() - started) * 1000)
                # The first request is cold (the database's page cache, prepared statements, and for the spend the
                # days before today read and the chart drawn): reported apart, left out of the median.
                first, rest = times[0], times[1:]
                out[name] = {"first_ms": first, "median_ms": statistics.median(rest), "max_ms": max(rest)}
    finally:
        await runner.cleanup()
    return out


async def run_sqlite(n: int, requests: int) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/reviewer.db"
        store = SqliteStore(path)
        await store.open()
        await store.close()  # migrations applied: fill the tables directly
        now = time.time()
        await fill_sqlite(path, n, now)
        store = SqliteStore(path)
        await store.open()
        try:
            await register_workers(store, now)
            return await measure(store, n, requests)
        finally:
            await store.close()


async def run_postgres(n: int, requests: int) -> dict[str, dict[str, float]] | str:
    dsn = postgres_dsn()
    try:
        schema = await create_schema(dsn)
    except BaseException as exc:  # noqa: BLE001 - tests.pg skips with pytest's exception outside a test
        return f"PostgreSQL not reachable ({type(exc).__name__})"
    try:
        store = PostgresStore(dsn, schema=schema)
        await store.open()
        try:
            now = time.time()
            await fill_postgres(dsn, schema, n, now)
            await register_workers(store, now)
            return await measure(store, n, requests)
        finally:
            await store.close()
    finally:
        await drop_schema(dsn, schema)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=20, help="requests per page (the median is reported)")
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    for name in args.stores.split(","):
        started = time.perf_counter()
        run = run_sqlite if name == "sqlite" else run_postgres
        results[name] = await run(args.jobs, args.requests)
        print(f"{name}: done in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    stores = list(results)
    print(f"{args.jobs:,} jobs; median (max) of {args.requests} requests per page after a first one [its time], in ms")
    print("| page | " + " | ".join(stores) + " |")
    print("|---|" + "---|" * len(stores))
    names = next((list(r) for r in results.values() if isinstance(r, dict)), [])
    for page in names:
        cells = []
        for store in stores:
            r = results[store]
            if isinstance(r, str):
                cells.append(r)
                continue
            m = r[page]
            cells.append(f"{m['median_ms']:.1f} ({m['max_ms']:.1f}) [{m['first_ms']:.1f}]")
        print(f"| {page} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    asyncio.run(main())
