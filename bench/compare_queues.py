"""reviewer-app's no-op job throughput next to procrastinate and huey, in one run on one machine.

Every system gets the same work, measured the same way ("drain"): enqueue N no-op jobs, then start the workers and
time them until the N-th job is done.

- reviewer-app, SQLite and PostgreSQL: `bench/noop_jobs.py`'s drain mode (jobs admitted with `store.admit`, then the
  real `Dispatcher` with `--slots` slots (default `--concurrency`; a list runs each) claims, runs `noop_runner(0)` and completes them, all fenced).
  PostgreSQL gets a fresh schema per run on the server of `--pg-dsn`, dropped afterwards.
- procrastinate (PostgreSQL): an async no-op task, N jobs deferred one per transaction (in batches of `--batch`
  awaited together, as our admissions are), then `run_worker_async(concurrency=--concurrency, wait=False)`, which
  returns once the queue is empty. It gets a database of its own on the same server (`--procrastinate-db`,
  dropped and created again for every run) and a pool of 10 connections (our pool's default size).
- huey (SQLite): `SqliteHuey` with its defaults (WAL, SQLite's default synchronous=FULL), N tasks enqueued, then
  a consumer of `--huey-workers` thread workers; done when the N-th task body has run.

procrastinate and huey are benchmark-only dependencies: `pip install -r bench/requirements.txt`.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import logging
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import asyncpg  # noqa: E402
import noop_jobs  # noqa: E402 - bench/ is not a package

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
SYSTEMS = ("reviewer-app sqlite", "huey sqlite", "reviewer-app postgres", "procrastinate postgres")


@dataclass
class Measurement:
    system: str
    run: int
    jobs: int
    workers: int
    enqueue_rate: float  # jobs/s while enqueueing (not the target: reported for context)
    seconds: float  # drain time
    rate: float  # jobs/s while draining
    cpu_s: float  # this process during the drain (the database server's CPU is in other_cpu_s)
    other_cpu_s: float
    steal_s: float
    verified: str
    ok: bool


class Meter:
    """Wall, own CPU and the rest of the machine's CPU over one drain."""

    def __enter__(self) -> Meter:
        self.t0, self.cpu0 = time.perf_counter(), sum(os.times()[:2])
        self.m0, self.s0 = noop_jobs.machine_cpu()
        return self

    def stop(self) -> tuple[float, float, float, float]:
        seconds, cpu = time.perf_counter() - self.t0, sum(os.times()[:2]) - self.cpu0
        m1, s1 = noop_jobs.machine_cpu()
        return seconds, cpu, max(0.0, m1 - self.m0 - cpu), s1 - self.s0

    def __exit__(self, *exc: object) -> None:
        pass


def with_database(dsn: str, database: str, **query: str) -> str:
    parts = urlsplit(dsn)
    extra = "&".join(f"{k}={v}" for k, v in query.items())
    q = "&".join(x for x in (parts.query, extra) if x)
    return urlunsplit(parts._replace(path=f"/{database}", query=q))


# -- reviewer-app ---------------------------------------------------------------------------------------------


def ours(args: argparse.Namespace, run: int, engine: str, workdir: str, slots: int) -> Measurement:
    ns = argparse.Namespace(
        jobs=args.jobs,
        concurrency=slots,
        batch=args.batch,
        scan_seconds=1.0,
        sqlite_synchronous=None,
        deadline=time.monotonic() + args.max_seconds,
    )
    if engine == "sqlite":
        result = asyncio.run(noop_jobs.one_run(ns, "drain", run, f"sqlite:///{workdir}/reviewer-{run}-{slots}.db"))
    else:
        schema = f"bench_{uuid.uuid4().hex[:12]}"
        asyncio.run(pg_execute(args.pg_dsn, f'CREATE SCHEMA "{schema}"'))
        try:
            url = args.pg_dsn + ("&" if "?" in args.pg_dsn else "?") + f"search_path={schema}"
            result = asyncio.run(noop_jobs.one_run(ns, "drain", run, url))
        finally:
            asyncio.run(pg_execute(args.pg_dsn, f'DROP SCHEMA "{schema}" CASCADE'))
    x = result.extra
    return Measurement(
        f"reviewer-app {engine}",
        run,
        args.jobs,
        slots,
        result.admit_rate or 0.0,
        result.seconds,
        result.rate,
        x["drain_cpu_s"],
        x["drain_other_cpu_s"],
        x["drain_steal_s"],
        result.verified,
        bool(x["ok"]),
    )


async def pg_execute(dsn: str, *statements: str) -> list[Any]:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        return [await conn.fetchval(s) for s in statements]
    finally:
        await conn.close()


# -- procrastinate --------------------------------------------------------------------------------------------


async def procrastinate_drain(args: argparse.Namespace, run: int, concurrency: int) -> Measurement:
    import procrastinate

    db = args.procrastinate_db
    await pg_execute(args.pg_dsn, f'DROP DATABASE IF EXISTS "{db}"')
    await pg_execute(args.pg_dsn, f'CREATE DATABASE "{db}"')
    conninfo = with_database(args.pg_dsn, db)
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=conninfo, min_size=10, max_size=10))
    done = 0

    @app.task(name="noop")
    async def noop() -> None:
        nonlocal done
        done += 1

    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        t0 = time.perf_counter()
        for start in range(0, args.jobs, args.batch):
            await asyncio.gather(*(noop.defer_async() for _ in range(min(args.batch, args.jobs - start))))
        enqueue_seconds = time.perf_counter() - t0
        with Meter() as meter:
            await asyncio.wait_for(
                app.run_worker_async(
                    concurrency=concurrency, wait=False, install_signal_handlers=False, delete_jobs="never"
                ),
                timeout=args.max_seconds,
            )
            seconds, cpu, other, steal = meter.stop()
    counts = dict(
        (r[0], r[1])
        for r in await pg_fetch(conninfo, "SELECT status::text, count(*) FROM procrastinate_jobs GROUP BY status")
    )
    await pg_execute(args.pg_dsn, f'DROP DATABASE IF EXISTS "{db}"')
    ok = counts.get("succeeded") == args.jobs == done and len(counts) == 1
    verified = f"{'OK' if ok else 'MISMATCH'}: {counts.get('succeeded', 0)}/{args.jobs} succeeded, statuses {counts}"
    return Measurement(
        "procrastinate postgres",
        run,
        args.jobs,
        concurrency,
        args.jobs / enqueue_seconds,
        seconds,
        args.jobs / seconds,
        cpu,
        other,
        steal,
        verified,
        ok,
    )


async def pg_fetch(dsn: str, query: str) -> list[Any]:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        return list(await conn.fetch(query))
    finally:
        await conn.close()


# -- huey -----------------------------------------------------------------------------------------------------


def huey_drain(args: argparse.Namespace, run: int, workers: int, workdir: str) -> Measurement:
    from huey import SqliteHuey

    huey = SqliteHuey(name=f"bench{run}w{workers}", filename=os.path.join(workdir, f"huey-{run}-{workers}.db"))
    lock, finished, done = threading.Lock(), threading.Event(), [0]

    @huey.task(name="noop")
    def noop() -> None:
        with lock:
            done[0] += 1
            if done[0] >= args.jobs:
                finished.set()

    t0 = time.perf_counter()
    for _ in range(args.jobs):
        noop()
    enqueue_seconds = time.perf_counter() - t0
    consumer = huey.create_consumer(workers=workers, worker_type="thread", periodic=False, check_worker_health=False)
    with Meter() as meter:
        consumer.start()
        completed = finished.wait(args.max_seconds)
        seconds, cpu, other, steal = meter.stop()
    consumer.stop(graceful=True)
    left = huey.pending_count()
    huey.storage.close()
    ok = completed and done[0] == args.jobs and left == 0
    verified = f"{'OK' if ok else 'MISMATCH'}: {done[0]}/{args.jobs} ran, {left} left in the queue"
    return Measurement(
        "huey sqlite",
        run,
        args.jobs,
        workers,
        args.jobs / enqueue_seconds,
        seconds,
        args.jobs / seconds,
        cpu,
        other,
        steal,
        verified,
        ok,
    )


# -- report ---------------------------------------------------------------------------------------------------


def versions(args: argparse.Namespace) -> dict[str, str]:
    out: dict[str, str] = {"python": platform.python_version(), "sqlite": sqlite3.sqlite_version}
    for dist in ("procrastinate", "huey", "asyncpg", "psycopg", "psycopg-binary", "psycopg-pool", "aiosqlite"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "not installed"
    try:
        import psycopg

        out["psycopg implementation"] = psycopg.pq.__impl__
    except ImportError:
        pass
    try:
        out["postgresql server"] = asyncio.run(pg_execute(args.pg_dsn, "SHOW server_version"))[0]
        out["postgresql synchronous_commit"] = asyncio.run(pg_execute(args.pg_dsn, "SHOW synchronous_commit"))[0]
        out["postgresql fsync"] = asyncio.run(pg_execute(args.pg_dsn, "SHOW fsync"))[0]
    except (OSError, asyncpg.PostgresError) as exc:
        out["postgresql server"] = f"unreachable ({exc})"
    return out


def machine() -> str:
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    except OSError:
        pass
    return f"{os.cpu_count()} CPU(s), {model}; {platform.system()} {platform.release()}"


def summarize(results: list[Measurement]) -> dict[str, Any]:
    medians: dict[str, float] = {}
    best_workers: dict[str, int] = {}
    for system in SYSTEMS:
        # Per worker count, the median over runs; a system tried with several counts is compared at its best.
        by_workers = {
            w: statistics.median(r.rate for r in results if r.system == system and r.workers == w)
            for w in sorted({r.workers for r in results if r.system == system})
        }
        if by_workers:
            best_workers[system] = max(by_workers, key=lambda w: by_workers[w])
            medians[system] = by_workers[best_workers[system]]
    ratios = {}
    if "reviewer-app postgres" in medians and "procrastinate postgres" in medians:
        ratios["postgres: reviewer-app / procrastinate"] = (
            medians["reviewer-app postgres"] / medians["procrastinate postgres"],
            10.0,
        )
    if "reviewer-app sqlite" in medians and "huey sqlite" in medians:
        ratios["sqlite: reviewer-app / huey"] = (medians["reviewer-app sqlite"] / medians["huey sqlite"], 2.0)
    return {
        "median_rate": medians,
        "workers": best_workers,
        "ratios": {k: {"ratio": v, "target": t, "met": v >= t} for k, (v, t) in ratios.items()},
    }


def print_report(results: list[Measurement], summary: dict[str, Any], info: dict[str, Any]) -> None:
    print(f"{info['machine']}; load average {info['load']}; code {info['code']}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()))
    print(f"{info['jobs']} no-op jobs per run, drain mode (enqueue all, then time the workers)\n")
    head = (
        f"{'system':<24} {'run':>3} {'workers':>7} {'enqueue/s':>9} {'drain s':>7} {'jobs/s':>8} {'CPU s':>6}"
        f" {'oth/steal':>9}  check"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        print(
            f"{r.system:<24} {r.run:>3} {r.workers:>7} {r.enqueue_rate:>9.0f} {r.seconds:>7.2f} {r.rate:>8.0f}"
            f" {r.cpu_s:>6.2f} {f'{r.other_cpu_s:.1f}/{r.steal_s:.1f}':>9}  {r.verified}"
        )
    print()
    for system, rate in summary["median_rate"].items():
        print(f"median {system:<24}: {rate:>7.0f} jobs/s  ({summary['workers'][system]} workers)")
    for name, r in summary["ratios"].items():
        print(f"{name}: {r['ratio']:.2f}x  (target >= {r['target']:g}x: {'met' if r['met'] else 'MISSED'})")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", "-n", type=int, default=5000, help="no-op jobs per system and run (default 5000)")
    p.add_argument(
        "--concurrency",
        "-c",
        type=int,
        default=32,
        help="reviewer-app dispatcher slots and procrastinate worker concurrency (default 32)",
    )
    p.add_argument(
        "--huey-workers", default="32", help="huey consumer thread workers; a comma list runs each (default 32)"
    )
    p.add_argument(
        "--slots", default=None, help="reviewer-app dispatcher slots; a comma list runs each (default: --concurrency)"
    )
    p.add_argument(
        "--procrastinate-concurrency",
        default=None,
        help="procrastinate worker concurrency; a comma list runs each (default: --concurrency)",
    )
    p.add_argument("--batch", type=int, default=64, help="enqueues awaited together (default 64)")
    p.add_argument("--runs", type=int, default=3, help="runs; systems interleave within a run (default 3)")
    p.add_argument(
        "--pg-dsn",
        default=os.environ.get("REVIEWER_BENCH_POSTGRES_DSN", DEFAULT_DSN),
        help=f"PostgreSQL server and database for our schema (default {DEFAULT_DSN})",
    )
    p.add_argument(
        "--procrastinate-db",
        default="reviewer_bench_procrastinate",
        help="database procrastinate gets on that server; dropped and created for every run",
    )
    p.add_argument("--only", default=",".join(SYSTEMS), help=f"comma list of systems to run ({', '.join(SYSTEMS)})")
    p.add_argument("--max-seconds", type=float, default=300, help="give up on one drain after this long")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    only = {s.strip() for s in args.only.split(",")}
    unknown = only - set(SYSTEMS)
    if unknown:
        p.error(f"unknown system(s): {', '.join(sorted(unknown))}")
    huey_workers = [int(w) for w in args.huey_workers.split(",")]
    slots = [int(c) for c in (args.slots or str(args.concurrency)).split(",")]
    procrastinate_concurrency = [int(c) for c in (args.procrastinate_concurrency or str(args.concurrency)).split(",")]
    results: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="reviewer-compare-") as workdir:
        for run in range(1, args.runs + 1):
            if "reviewer-app sqlite" in only:
                results.extend(ours(args, run, "sqlite", workdir, n) for n in slots)
            if "huey sqlite" in only:
                results.extend(huey_drain(args, run, w, workdir) for w in huey_workers)
            if "reviewer-app postgres" in only:
                results.extend(ours(args, run, "postgres", workdir, n) for n in slots)
            if "procrastinate postgres" in only:
                results.extend(asyncio.run(procrastinate_drain(args, run, c)) for c in procrastinate_concurrency)
    summary = summarize(results)
    info = {
        "machine": machine(),
        "load": noop_jobs.loadavg(),
        "code": noop_jobs.code_version(),
        "versions": versions(args),
        "jobs": args.jobs,
    }
    if args.json:
        print(json.dumps({"info": info, "summary": summary, "runs": [asdict(r) for r in results]}, indent=2))
    else:
        print_report(results, summary, info)
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
