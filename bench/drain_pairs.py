"""Before/after pairs of the no-op drain: did a change make draining slower? `python bench/drain_pairs.py`.

Throughput on a shared 2-core machine moves by 2x between runs, so this script answers a narrower question than
`compare_queues.py`: given two commits of this repository, does the drain (claim -> run a no-op -> complete) of the
same N admitted jobs cost more time or CPU on one than on the other? For each round it runs both commits, in turns
(the order flips every round), each in a fresh process importing that commit's code from a clean `git archive`
export, on a fresh database (SQLite file; PostgreSQL database `drain_pairs`, dropped and created again). Between
admission and drain it waits for the database to settle (PostgreSQL: `CHECKPOINT` and `VACUUM ANALYZE jobs`), so
that background work on the fresh rows lands on neither commit's drain.

Per run it records the drain's wall time (jobs/s), this process's CPU (ms per job: the event loop, the SQLite writer
thread, the driver), the PostgreSQL backends' CPU serving this process (ms per job, from /proc of the backends
connected to `drain_pairs`), and the rest of the machine's CPU meanwhile (noise). CPU per job is the figure that
other work on the machine disturbs least; the table gives medians per commit and the after/before ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLK_TCK = os.sysconf("SC_CLK_TCK")
ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
BENCH_DB = "drain_pairs"


def proc_cpu(pid: int) -> float:
    """utime + stime of one process, in seconds (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def threads_cpu() -> dict[int, float]:
    """utime + stime of each thread of this process, in seconds."""
    out = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return out


def machine_busy() -> float:
    parts = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in parts[:8])
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


async def child(args: argparse.Namespace) -> dict[str, object]:
    """One run, in a process whose sys.path starts with the exported commit."""
    import asyncpg

    sys.path.insert(0, str(Path(os.environ["PYTHONPATH"].split(os.pathsep)[0]) / "bench"))
    import noop_jobs  # the commit's own bench helpers: the same store factory and job shape

    from reviewer_app.core.retry import RetryPolicy
    from reviewer_app.dispatch.dispatcher import Dispatcher
    from reviewer_app.runners import noop_runner

    try:
        from reviewer_app.store.base import new_owner_id
    except ImportError:  # before issue 15 it lived with the SQLite backend
        from reviewer_app.store.sqlite import new_owner_id

    store = noop_jobs.make_bench_store(args.database_url)
    await store.open()
    finished: set[int] = set()
    done = asyncio.Event()

    def on_finished(job_id: int) -> None:
        finished.add(job_id)
        if len(finished) >= args.jobs:
            done.set()

    dispatcher = Dispatcher(
        store,
        noop_runner(0),
        owner=new_owner_id("bench"),
        concurrency=args.slots,
        lease_seconds=60.0,
        renew_interval=20.0,
        scan_interval=1.0,
        retry_policy=RetryPolicy(max_attempts=3),
        clock=time.time,
        on_finished=on_finished,
    )
    work = [noop_jobs.enqueue(1, i + 1, "dp") for i in range(args.jobs)]
    for start in range(0, len(work), 64):
        chunk = work[start : start + 64]
        results = await asyncio.gather(*(store.admit(d, e, now=time.time(), max_attempts=3) for d, e in chunk))
        assert all(r.outcome == "enqueued" for r in results), {r.outcome for r in results}
    backends: list[int] = []
    if args.engine == "postgres":
        conn = await asyncpg.connect(args.database_url)
        try:
            await conn.execute("CHECKPOINT")
            await conn.execute("VACUUM ANALYZE jobs")
            me = await conn.fetchval("SELECT pg_backend_pid()")
        finally:
            await conn.close()
    await asyncio.sleep(args.settle)  # a pause of the benchmark, not synchronisation: the database settles
    if args.engine == "postgres":
        conn = await asyncpg.connect(args.database_url)
        try:
            # the pool's connections exist already (admission used them); the claim loop may open more: re-read after
            rows = await conn.fetch(
                "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid() AND pid <> $2",
                BENCH_DB,
                me,
            )
            backends = [r["pid"] for r in rows]
        finally:
            await conn.close()
    pg0 = {pid: proc_cpu(pid) for pid in backends}
    threads0 = threads_cpu()
    cpu0, busy0, t0 = sum(os.times()[:2]), machine_busy(), time.perf_counter()
    dispatcher.start()
    await asyncio.wait_for(done.wait(), timeout=600)
    seconds = time.perf_counter() - t0
    cpu = sum(os.times()[:2]) - cpu0
    busy = machine_busy() - busy0
    pg_cpu = sum(proc_cpu(pid) - before for pid, before in pg0.items())
    threads1 = threads_cpu()
    loop_cpu = threads1.get(os.getpid(), 0.0) - threads0.get(os.getpid(), 0.0)
    await dispatcher.stop(5.0)
    await store.close()
    return {
        "jobs_per_s": args.jobs / seconds,
        "cpu_ms_per_job": cpu / args.jobs * 1000,
        "pg_cpu_ms_per_job": pg_cpu / args.jobs * 1000,
        "loop_cpu_ms_per_job": loop_cpu / args.jobs * 1000,  # the event loop's thread; the rest is other threads
        "other_cpu_s": max(0.0, busy - cpu - pg_cpu),
    }


def export(rev: str, into: Path) -> str:
    sha = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, check=True, capture_output=True, text=True)
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True, capture_output=True)
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return sha.stdout.strip()


def fresh_database(engine: str, tmp: Path, n: int) -> str:
    if engine == "sqlite":
        return f"sqlite:///{tmp / f'run{n}.db'}"
    import asyncpg

    async def recreate() -> None:
        conn = await asyncpg.connect(ADMIN_DSN)
        try:
            await conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
            await conn.execute(f"CREATE DATABASE {BENCH_DB}")
        finally:
            await conn.close()

    asyncio.run(recreate())
    return f"postgresql://postgres@127.0.0.1:5432/{BENCH_DB}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", default="e96994f", help="the commit before the change (default e96994f)")
    p.add_argument("--after", default="HEAD", help="the commit after the change (default HEAD)")
    p.add_argument("--rounds", type=int, default=5, help="pairs per engine (default 5)")
    p.add_argument("--jobs", "-n", type=int, default=5000, help="jobs per run (default 5000)")
    p.add_argument("--slots", type=int, default=32, help="dispatcher worker slots (default 32)")
    p.add_argument("--engines", default="sqlite,postgres", help="comma-separated (default sqlite,postgres)")
    p.add_argument("--settle", type=float, default=3.0, help="seconds between admission and drain (default 3)")
    p.add_argument("--json", action="store_true", help="print every run as JSON as well")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--engine", help=argparse.SUPPRESS)
    p.add_argument("--database-url", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(child(args))))
        return 0

    runs: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="drain-pairs-") as tmpdir:
        tmp = Path(tmpdir)
        commits = {"before": export(args.before, tmp / "before"), "after": export(args.after, tmp / "after")}
        n = 0
        for rnd in range(args.rounds):
            for engine in args.engines.split(","):
                order = ("before", "after") if rnd % 2 == 0 else ("after", "before")
                for which in order:
                    n += 1
                    url = fresh_database(engine, tmp, n)
                    env = {**os.environ, "PYTHONPATH": str(tmp / which), "PYTHONHASHSEED": "0"}
                    cmd = [sys.executable, __file__, "--child", "--engine", engine, "--database-url", url]
                    cmd += ["--jobs", str(args.jobs), "--slots", str(args.slots), "--settle", str(args.settle)]
                    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp)
                    if out.returncode != 0:
                        sys.stderr.write(out.stderr)
                        raise SystemExit(f"{which} ({commits[which]}) on {engine} failed")
                    result = {"round": rnd + 1, "engine": engine, "which": which, **json.loads(out.stdout)}
                    runs.append(result)
                    print(
                        f"round {rnd + 1} {engine:8} {which:6} {result['jobs_per_s']:8.0f} jobs/s "
                        f"cpu {result['cpu_ms_per_job']:.3f} ms/job (loop {result['loop_cpu_ms_per_job']:.3f})  pg {result['pg_cpu_ms_per_job']:.3f} ms/job  "
                        f"other {result['other_cpu_s']:.1f} s",
                        flush=True,
                    )
    print(f"\nbefore = {commits['before']}, after = {commits['after']}, {args.jobs} jobs, {args.slots} slots")
    print("| engine | figure | before (median) | after (median) | after/before |")
    print("|---|---|---|---|---|")
    for engine in args.engines.split(","):
        for key, label in (
            ("jobs_per_s", "drain jobs/s"),
            ("cpu_ms_per_job", "app CPU ms/job"),
            ("loop_cpu_ms_per_job", "of it the event loop's thread"),
            ("pg_cpu_ms_per_job", "PostgreSQL CPU ms/job"),
        ):
            if engine == "sqlite" and key == "pg_cpu_ms_per_job":
                continue
            med = {
                w: statistics.median(r[key] for r in runs if r["engine"] == engine and r["which"] == w)
                for w in ("before", "after")
            }
            ratio = med["after"] / med["before"] if med["before"] else float("nan")
            print(f"| {engine} | {label} | {med['before']:.3f} | {med['after']:.3f} | {ratio:.2f} |")
    if args.json:
        print(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
