"""No-op jobs per second through admit -> claim -> complete, in-process, with the real store and Dispatcher."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from reviewer_app.core.admission import Enqueue, JobSpec
from reviewer_app.core.job_records import JobDetails
from reviewer_app.core.retry import RetryPolicy
from reviewer_app.dispatch.dispatcher import Dispatcher
from reviewer_app.runners import noop_runner
from reviewer_app.settings.config import load_config
from reviewer_app.store.base import Delivery, Store, new_owner_id
from reviewer_app.store.factory import make_store


@dataclass
class Result:
    mode: str  # "concurrent": admit while draining; "drain": admit all, then time the drain
    run: int
    jobs: int
    concurrency: int
    seconds: float
    rate: float
    admit_seconds: float | None
    admit_rate: float | None
    latency_p50_ms: float | None  # created_at -> finished_at of each job (concurrent mode only)
    latency_p99_ms: float | None
    cpu_s: float  # this process, from the first admit
    other_cpu_s: float  # the rest of the machine meanwhile: noise from other work
    steal_s: float  # CPU the hypervisor gave to other guests meanwhile (VMs)
    succeeded: int
    verified: str
    extra: dict[str, Any] = field(default_factory=dict)


def make_bench_store(database_url: str, synchronous: str | None = None) -> Store:
    cfg = load_config({"DATABASE_URL": database_url, "GITHUB_WEBHOOK_SECRET": "bench"})
    if synchronous and cfg.sqlite_path:
        from reviewer_app.store.sqlite import SqliteStore

        return SqliteStore(cfg.sqlite_path, busy_timeout_ms=cfg.db_busy_timeout_ms, synchronous=synchronous)
    return make_store(cfg)


def enqueue(repo_id: int, number: int, tag: str) -> tuple[Delivery, Enqueue]:
    spec = JobSpec(
        repo_id=repo_id,
        repo_full_name="bench/noop",
        installation_id=1,
        pr_number=number,
        head_sha=f"{tag}{number:032x}"[-40:],
        details=JobDetails(action="opened", title="bench"),
    )
    return Delivery(delivery_id=f"{tag}-{number}", event="pull_request", action="opened"), Enqueue(spec)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")


def machine_cpu() -> tuple[float, float]:
    """(busy, steal) CPU seconds of the whole machine so far, from /proc/stat (Linux)."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:9]]
    except OSError:
        return float("nan"), float("nan")
    return (sum(ticks[:7]) - ticks[3] - ticks[4]) / CLK_TCK, ticks[7] / CLK_TCK


def code_version() -> str:
    """The commit the benchmark ran on, and whether reviewer_app/ had uncommitted changes."""
    try:
        head = subprocess.run(
            ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", ROOT, "status", "--porcelain", "--", "reviewer_app"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}{' + uncommitted changes in reviewer_app/' if dirty else ''}" if head else "unknown"


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))]


async def one_run(args: argparse.Namespace, mode: str, run: int, database_url: str) -> Result:
    store = make_bench_store(database_url, args.sqlite_synchronous)
    await store.open()
    tag = uuid.uuid4().hex[:8]
    repo_id = int(tag, 16) % 1_000_000_000 + 1  # this run's jobs only, even on a shared database
    finished: set[int] = set()
    ours: set[int] = set()
    done = asyncio.Event()

    def on_finished(job_id: int) -> None:
        finished.add(job_id)
        if len(finished) >= args.jobs and ours and finished >= ours:
            done.set()

    dispatcher = Dispatcher(
        store,
        noop_runner(0),
        owner=new_owner_id("bench"),
        concurrency=args.concurrency,
        lease_seconds=60.0,
        renew_interval=20.0,
        scan_interval=args.scan_seconds,
        retry_policy=RetryPolicy(max_attempts=3),
        clock=time.time,
        on_finished=on_finished,
    )
    work = [enqueue(repo_id, i + 1, tag) for i in range(args.jobs)]

    async def admit_all() -> float:
        t0 = time.perf_counter()
        for start in range(0, len(work), args.batch):
            chunk = work[start : start + args.batch]
            results = await asyncio.gather(*(store.admit(d, e, now=time.time(), max_attempts=3) for d, e in chunk))
            for r in results:
                if r.outcome != "enqueued":
                    raise RuntimeError(f"admit answered {r.outcome}: {r.reason}")
                ours.add(r.job_id)  # type: ignore[arg-type]
            dispatcher.wake()  # what the receiver's on_admitted does after a commit
        return time.perf_counter() - t0

    cpu0, (mcpu0, steal0) = sum(os.times()[:2]), machine_cpu()
    try:
        if mode == "drain":
            admit_seconds = await admit_all()
            t0 = time.perf_counter()
            drain_cpu0, (drain_mcpu0, drain_steal0) = sum(os.times()[:2]), machine_cpu()
            drain_loop_cpu0 = time.thread_time()  # this (main) thread runs the event loop
            dispatcher.start()
        else:
            t0 = time.perf_counter()
            dispatcher.start()
            admit_seconds = await admit_all()
        if len(finished) >= args.jobs and finished >= ours:
            done.set()
        await asyncio.wait_for(done.wait(), timeout=max(0.1, args.deadline - time.monotonic()))
        seconds = time.perf_counter() - t0
        cpu = sum(os.times()[:2]) - cpu0
        mcpu1, steal1 = machine_cpu()
        extra: dict[str, Any] = {}
        if mode == "drain":  # the drain alone, for comparisons with other queues (bench/compare_queues.py)
            drain_cpu = sum(os.times()[:2]) - drain_cpu0
            extra = {
                "drain_cpu_s": drain_cpu,
                "drain_loop_cpu_ms_per_job": (time.thread_time() - drain_loop_cpu0) / args.jobs * 1000,
                "drain_cpu_ms_per_job": drain_cpu / args.jobs * 1000,
                "drain_other_cpu_s": max(0.0, mcpu1 - drain_mcpu0 - drain_cpu),
                "drain_steal_s": steal1 - drain_steal0,
            }
    except BaseException:
        await dispatcher.stop(5.0)
        await store.close()  # the store's threads would keep the interpreter alive
        raise
    await dispatcher.stop(5.0)
    try:
        jobs = await store.list_jobs(repo=None, states=(), limit=args.jobs * 2)
        mine = [j for j in jobs if j.repo_id == repo_id]
        succeeded = sum(1 for j in mine if j.state.value == "succeeded")
        lat = [(j.finished_at - j.created_at) * 1000 for j in mine if j.finished_at is not None]
        attempts_extra = sum(1 for j in mine if j.attempts != 1)
    finally:
        await store.close()
    ok = succeeded == args.jobs and len(mine) == args.jobs and attempts_extra == 0
    verified = (
        f"{'OK' if ok else 'MISMATCH'}: {succeeded}/{args.jobs} jobs succeeded, "
        f"{attempts_extra} with an attempt count other than 1"
    )
    concurrent = mode == "concurrent"
    return Result(
        mode=mode,
        run=run,
        jobs=args.jobs,
        concurrency=args.concurrency,
        seconds=seconds,
        rate=args.jobs / seconds,
        admit_seconds=admit_seconds,
        admit_rate=args.jobs / admit_seconds,
        latency_p50_ms=percentile(lat, 50) if concurrent and lat else None,
        latency_p99_ms=percentile(lat, 99) if concurrent and lat else None,
        cpu_s=cpu,
        other_cpu_s=max(0.0, mcpu1 - mcpu0 - cpu),
        steal_s=steal1 - steal0,
        succeeded=succeeded,
        verified=verified,
        extra={"ok": ok, **extra},
    )


def fmt(x: float | None, spec: str) -> str:
    return "-".rjust(int(spec[1:].split(".")[0])) if x is None else format(x, spec)


def print_table(results: list[Result], summary: dict[str, Any], engine: str) -> None:
    head = (
        f"{'mode':<11} {'run':>3} {'jobs':>6} {'conc':>4} {'jobs/s':>8} {'secs':>6} {'admits/s':>9}"
        f" {'lat p50 ms':>10} {'lat p99 ms':>10} {'CPU s':>6} {'oth/steal':>9}"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        print(
            f"{r.mode:<11} {r.run:>3} {r.jobs:>6} {r.concurrency:>4} {r.rate:>8.0f} {r.seconds:>6.2f}"
            f" {fmt(r.admit_rate, '>9.0f')} {fmt(r.latency_p50_ms, '>10.1f')} {fmt(r.latency_p99_ms, '>10.1f')}"
            f" {r.cpu_s:>6.2f} {f'{r.other_cpu_s:.1f}/{r.steal_s:.1f}':>9}"
        )
    for r in results:
        print(f"  check {r.mode} run {r.run}: {r.verified}")
        if "drain_cpu_ms_per_job" in r.extra:
            print(
                f"  drain CPU per job: {r.extra['drain_cpu_ms_per_job']:.3f} ms, of which the event loop's thread"
                f" {r.extra['drain_loop_cpu_ms_per_job']:.3f} ms"
            )
        if r.other_cpu_s > 0.25 * r.seconds or r.steal_s > 0.25 * r.seconds:
            print(
                f"  warning: other processes used {r.other_cpu_s:.1f} CPU-s and the hypervisor stole {r.steal_s:.1f} s"
                f" during this {r.seconds:.1f} s run; its figures are disturbed, rerun on an idle machine"
            )
    print()
    for mode, m in summary["median"].items():
        print(
            f"median {mode:<10}: {m['rate']:.0f} no-op jobs/s on {engine}"
            f"  (target >= 2000: {'met' if m['rate'] >= 2000 else 'MISSED'})"
        )


async def main_async(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING)
    args.deadline = time.monotonic() + args.max_seconds
    modes = ["concurrent", "drain"] if args.mode == "both" else [args.mode]
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="reviewer-bench-") as workdir:
        for run in range(1, args.runs + 1):
            for mode in modes:
                url = args.database_url or f"sqlite:///{os.path.join(workdir, f'noop-{mode}-{run}.db')}"
                results.append(await one_run(args, mode, run, url))
    engine = (args.database_url or "sqlite").split(":", 1)[0]
    summary = {
        "engine": engine,
        "code": code_version(),
        "median": {
            mode: {
                k: statistics.median(getattr(r, k) for r in results if r.mode == mode)
                for k in ("rate", "seconds", "admit_rate")
            }
            for mode in modes
        },
    }
    ok = all(r.extra["ok"] for r in results)
    if args.json:
        print(json.dumps({"args": vars(args), "summary": summary, "runs": [asdict(r) for r in results]}, indent=2))
    else:
        print(
            f"code {code_version()}; load average {loadavg()}; {args.jobs} no-op jobs x {args.runs} run(s), dispatcher concurrency {args.concurrency},"
            f" admits in batches of {args.batch}, store {engine}"
        )
        print_table(results, summary, engine)
    return 0 if ok else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--jobs", "-n", type=int, default=5000, help="jobs per run (default 5000)")
    p.add_argument("--concurrency", "-c", type=int, default=32, help="dispatcher worker slots (default 32)")
    p.add_argument("--batch", type=int, default=64, help="admits awaited together with asyncio.gather (default 64)")
    p.add_argument(
        "--mode",
        choices=("both", "concurrent", "drain"),
        default="both",
        help="concurrent: admit while the dispatcher drains; drain: admit all first, time the drain",
    )
    p.add_argument("--runs", type=int, default=1, help="runs per mode; the summary is the median (default 1)")
    p.add_argument(
        "--database-url",
        default=None,
        help="store to use (default: a fresh sqlite:/// file per run in a temp dir); a postgresql:// URL "
        "uses make_store's PostgreSQL backend; use an otherwise idle database",
    )
    p.add_argument(
        "--sqlite-synchronous",
        choices=("FULL", "NORMAL", "OFF"),
        default=None,
        help="override SQLite's PRAGMA synchronous (default: the store's own, FULL); for comparison only",
    )
    p.add_argument("--scan-seconds", type=float, default=1.0, help="dispatcher rescue/scan interval (default 1)")
    p.add_argument(
        "--max-seconds", type=float, default=150, help="give up when the whole benchmark runs longer (default 150)"
    )
    p.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the table")
    args = p.parse_args()
    try:
        return asyncio.run(main_async(args))
    except TimeoutError:
        print(f"noop_jobs: gave up after --max-seconds={args.max_seconds:g}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
