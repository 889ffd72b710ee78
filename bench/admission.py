"""Webhook admission throughput and latency of `reviewer-app serve --no-worker` against a bare aiohttp handler."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.helpers import pr_payload, sha, sign  # noqa: E402

WEBHOOK_PATH = "/api/github/webhooks"
SECRET = "bench-webhook-secret"
CLK_TCK = os.sysconf("SC_CLK_TCK")


# -- workload -------------------------------------------------------------------------------------------


def padding_for(target_bytes: int) -> int:
    """The pr_payload ``padding`` that makes the JSON body about ``target_bytes`` long."""
    base = len(json.dumps(pr_payload(padding=0)))
    per = len("lorem ipsum dolor sit amet ")
    return max(0, round((target_bytes - base) / per))


def build_workload(
    tag: str, n: int, *, padding: int, sync_every: int, number_base: int, installations: int = 100
) -> list[tuple[bytes, dict]]:
    """N signed pull_request deliveries, each a distinct revision (a real insert).

    Every ``sync_every``-th delivery is a ``synchronize`` of the previous PR with a new head (it supersedes the
    older job when it lands after it); the others open new PRs. PRs are spread over ``installations`` installation
    ids (each PR stays in one), so the per-installation daily review cap is checked but not reached. Bodies, signatures and headers are built here,
    before any timing, so the client does little work while measuring.
    """
    items = []
    number = number_base
    for i in range(n):
        if sync_every and i % sync_every == sync_every - 1 and i > 0:
            payload = pr_payload(
                action="synchronize",
                number=number,
                head=sha(f"{tag}-{i}"),
                updated_at="2026-12-01T10:05:00Z",
                padding=padding,
                installation_id=1000 + number % installations,
            )
        else:
            number += 1
            payload = pr_payload(
                action="opened",
                number=number,
                head=sha(f"{tag}-{i}"),
                padding=padding,
                installation_id=1000 + number % installations,
            )
        body = json.dumps(payload).encode()
        headers = {
            "Content-Type": "application/json",
            "X-GitHub-Event": "pull_request",
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "User-Agent": "GitHub-Hookshot/bench",
            "X-Hub-Signature-256": sign(body, SECRET),
        }
        items.append((body, headers))
    return items


# -- servers --------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stat_cpu_seconds(stat_path: str) -> float:
    """User + system CPU time from a /proc stat file (Linux)."""
    try:
        fields = Path(stat_path).read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def cpu_seconds(pid: int) -> float:
    """CPU time of a whole process, all its threads."""
    return _stat_cpu_seconds(f"/proc/{pid}/stat")


def main_thread_cpu_seconds(pid: int) -> float:
    """CPU time of a process's main thread (the event loop)."""
    return _stat_cpu_seconds(f"/proc/{pid}/task/{pid}/stat")


def machine_cpu() -> tuple[float, float]:
    """(busy, steal) CPU seconds of the whole machine so far: busy is user+nice+system+irq+softirq, from /proc/stat."""
    try:
        ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except OSError:
        return float("nan"), float("nan")
    return (sum(ticks[:7]) - ticks[3] - ticks[4]) / CLK_TCK, ticks[7] / CLK_TCK


def code_version() -> str:
    """The commit the benchmark ran on, and whether reviewer_app/ had uncommitted changes."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "reviewer_app"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}{' + uncommitted changes in reviewer_app/' if dirty else ''}" if head else "unknown"


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def self_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


@dataclass
class Server:
    name: str
    argv: list[str]
    env: dict[str, str]
    port: int
    db_path: str | None = None
    proc: subprocess.Popen | None = None
    log_path: str = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{WEBHOOK_PATH}"

    def spawn(self, workdir: str) -> None:
        self.log_path = os.path.join(workdir, f"{self.name}.log")
        with open(self.log_path, "wb") as log:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(
                self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    async def wait_ready(self, within: float = 20.0) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + within
        async with aiohttp.ClientSession() as s:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: {self.tail()}")
                try:
                    async with s.get(f"http://127.0.0.1:{self.port}/healthz") as r:
                        if r.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} did not answer /healthz within {within} s: {self.tail()}")
                await asyncio.sleep(0.05)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)

    def tail(self, n: int = 2000) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")[-n:]
        except OSError:
            return ""


def reviewer_app_argv() -> list[str]:
    script = Path(sys.executable).with_name("reviewer-app")
    if script.exists():
        return [str(script), "serve", "--no-worker"]
    found = shutil.which("reviewer-app")
    return (
        [found, "serve", "--no-worker"]
        if found
        else [sys.executable, "-m", "reviewer_app.cli.main", "serve", "--no-worker"]
    )


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REVIEWER_", "GITHUB_", "ANTHROPIC_"))}
    env.pop("DATABASE_URL", None)
    return env


def make_admission_server(workdir: str, argv: list[str] | None = None) -> Server:
    port = free_port()
    db = os.path.join(workdir, "bench.db")
    env = clean_env() | {
        "GITHUB_WEBHOOK_SECRET": SECRET,
        "DATABASE_URL": f"sqlite:///{db}",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "LOG_LEVEL": "WARNING",
    }
    return Server("admission", argv or reviewer_app_argv(), env, port, db_path=db)


def make_bare_server() -> Server:
    port = free_port()
    argv = [sys.executable, str(Path(__file__).with_name("bare_server.py")), "--host", "127.0.0.1", "--port", str(port)]
    return Server("bare", argv, clean_env(), port)


def count_rows(db_path: str) -> tuple[int, int]:
    """(jobs, deliveries) in the database, read through a separate read-only connection."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=10)
    try:
        jobs = conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
        deliveries = conn.execute("SELECT COUNT(*) FROM deliveries").fetchone()[0]
    finally:
        conn.close()
    return jobs, deliveries


# -- client ---------------------------------------------------------------------------------------------


@dataclass
class RunResult:
    target: str
    run: int
    requests: int
    concurrency: int
    seconds: float
    rate: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    statuses: dict[str, int]
    server_cpu_s: float
    server_cpu_ms_per_req: float
    client_cpu_s: float
    other_cpu_s: float  # CPU the rest of the machine used meanwhile: noise from other work
    steal_s: float  # CPU time the hypervisor gave to other guests meanwhile (VMs): noise too
    loop_cpu_ms_per_req: float = float("nan")  # the server's main thread (event loop) alone
    verified: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


async def post_all(
    session: aiohttp.ClientSession, url: str, items: list[tuple[bytes, dict]], concurrency: int, deadline: float
) -> tuple[float, list[float], list[int], list[bytes]]:
    n = len(items)
    lat = [0.0] * n
    status = [0] * n
    bodies: list[bytes] = [b""] * n
    indexes = iter(range(n))

    async def worker() -> None:
        for i in indexes:  # one shared iterator: each worker takes the next request
            if time.monotonic() > deadline:
                raise TimeoutError("benchmark time budget exceeded")
            body, headers = items[i]
            t0 = time.perf_counter()
            async with session.post(url, data=body, headers=headers) as resp:
                bodies[i] = await resp.read()
                status[i] = resp.status
            lat[i] = time.perf_counter() - t0

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - t0, lat, status, bodies


async def run_target(
    server: Server,
    run: int,
    items: list[tuple[bytes, dict]],
    warmup: list[tuple[bytes, dict]],
    concurrency: int,
    deadline: float,
    profile: str | None = None,
) -> RunResult:
    assert server.proc is not None
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        if warmup:  # also opens the C keep-alive connections the timed part reuses
            _, _, wstatus, _ = await post_all(session, server.url, warmup, concurrency, deadline)
            bad = [s for s in wstatus if s != 202]
            if bad:
                raise RuntimeError(f"{server.name}: warm-up got non-202 answers {bad[:5]}: {server.tail()}")
        before = count_rows(server.db_path) if server.db_path else None
        spy = start_py_spy(server.proc.pid, profile) if profile else None
        try:
            cpu0, ccpu0, (mcpu0, steal0) = cpu_seconds(server.proc.pid), self_cpu_seconds(), machine_cpu()
            loop0 = main_thread_cpu_seconds(server.proc.pid)
            seconds, lat, status, bodies = await post_all(session, server.url, items, concurrency, deadline)
            cpu1, ccpu1, (mcpu1, steal1) = cpu_seconds(server.proc.pid), self_cpu_seconds(), machine_cpu()
            loop1 = main_thread_cpu_seconds(server.proc.pid)
        finally:
            if spy is not None:
                stop_py_spy(spy)
    lat_ms = sorted(x * 1000 for x in lat)
    statuses: dict[str, int] = {}
    for s in status:
        statuses[str(s)] = statuses.get(str(s), 0) + 1
    n = len(items)
    result = RunResult(
        target=server.name,
        run=run,
        requests=n,
        concurrency=concurrency,
        seconds=seconds,
        rate=n / seconds,
        p50_ms=percentile(lat_ms, 50),
        p90_ms=percentile(lat_ms, 90),
        p99_ms=percentile(lat_ms, 99),
        max_ms=lat_ms[-1],
        statuses=statuses,
        server_cpu_s=cpu1 - cpu0,
        server_cpu_ms_per_req=(cpu1 - cpu0) / n * 1000,
        client_cpu_s=ccpu1 - ccpu0,
        other_cpu_s=max(0.0, (mcpu1 - mcpu0) - (cpu1 - cpu0) - (ccpu1 - ccpu0)),
        steal_s=steal1 - steal0,
        loop_cpu_ms_per_req=(loop1 - loop0) / n * 1000,
    )
    if server.db_path and before is not None:
        after = count_rows(server.db_path)
        jobs, deliveries = after[0] - before[0], after[1] - before[1]
        answers = [json.loads(b) for b in bodies]
        enqueued = sum(1 for a in answers if a.get("outcome") == "enqueued")
        job_ids = {a.get("job_id") for a in answers if a.get("outcome") == "enqueued"}
        superseded = sum(len(a.get("superseded", [])) for a in answers)
        ok = jobs == n and deliveries == n and enqueued == n and len(job_ids) == n
        result.verified = (
            f"{'OK' if ok else 'MISMATCH'}: +{jobs} jobs, +{deliveries} deliveries, {enqueued} 'enqueued' answers"
            f" with {len(job_ids)} distinct job ids (expected {n})"
        )
        result.extra = {
            "jobs_added": jobs,
            "deliveries_added": deliveries,
            "enqueued_answers": enqueued,
            "distinct_job_ids": len(job_ids),
            "superseded_reported": superseded,
            "ok": ok,
        }
    return result


def start_py_spy(pid: int, out: str) -> subprocess.Popen:
    """Sample the server with py-spy (pip install py-spy) while the timed requests run."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    fmt = "speedscope" if out.endswith(".json") else ("raw" if out.endswith(".txt") else "flamegraph")
    spy = subprocess.Popen(
        [
            exe,
            "record",
            "--pid",
            str(pid),
            "--rate",
            "250",
            "--format",
            fmt,
            "--output",
            out,
            "--nonblocking",
            "--threads",
            *(["--gil"] if os.environ.get("BENCH_PY_SPY_GIL") else []),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    time.sleep(0.5)  # let it attach before the timed part starts
    return spy


def stop_py_spy(spy: subprocess.Popen) -> None:
    spy.send_signal(signal.SIGINT)
    try:
        spy.wait(timeout=30)
    except subprocess.TimeoutExpired:
        spy.kill()
        spy.wait()


# -- report ---------------------------------------------------------------------------------------------


def print_table(results: list[RunResult], summary: dict[str, Any]) -> None:
    head = f"{'target':<10} {'run':>3} {'req':>6} {'conc':>4} {'req/s':>8} {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7} {'max ms':>7} {'srv CPU ms/req':>14} {'loop ms/req':>11} {'CPU s srv/cli/oth/steal':>23}  statuses"
    print(head)
    print("-" * len(head))
    for r in results:
        print(
            f"{r.target:<10} {r.run:>3} {r.requests:>6} {r.concurrency:>4} {r.rate:>8.0f} {r.p50_ms:>7.2f} {r.p90_ms:>7.2f}"
            f" {r.p99_ms:>7.2f} {r.max_ms:>7.2f} {r.server_cpu_ms_per_req:>14.3f} {r.loop_cpu_ms_per_req:>11.3f}"
            f" {f'{r.server_cpu_s:.1f}/{r.client_cpu_s:.1f}/{r.other_cpu_s:.1f}/{r.steal_s:.1f}':>23}  {r.statuses}"
        )
    for r in results:
        if r.verified:
            print(f"  db check run {r.run}: {r.verified}")
    for r in results:
        if r.other_cpu_s > 0.25 * r.seconds or r.steal_s > 0.25 * r.seconds:
            print(
                f"  warning: {r.target} run {r.run}: other processes used {r.other_cpu_s:.1f} CPU-s and the hypervisor"
                f" stole {r.steal_s:.1f} s during its {r.seconds:.1f} s; its figures are disturbed, rerun on an idle machine"
            )
    print()
    for name in ("admission", "bare"):
        m = summary.get(name)
        if m:
            print(
                f"median {name:<9}: {m['rate']:.0f} req/s, p50 {m['p50_ms']:.2f} ms, p99 {m['p99_ms']:.2f} ms,"
                f" max {m['max_ms']:.2f} ms"
            )
    if "ratio" in summary:
        print(
            f"admission / bare rate: {summary['ratio']:.2f}  (target >= 0.60: {'met' if summary['ratio'] >= 0.6 else 'MISSED'})"
        )
    if "db_verified" in summary:
        print(
            f"database: {summary['db_total_jobs']} jobs after all runs, expected {summary['db_total_expected']}"
            f" (timed + warm-up): {'OK' if summary['db_verified'] else 'MISMATCH'}"
        )
    if "admission" in summary:
        p99 = summary["admission"]["p99_ms"]
        print(f"admission p99: {p99:.2f} ms  (target < 50 ms: {'met' if p99 < 50 else 'MISSED'})")


def medians(results: list[RunResult], target: str) -> dict[str, float] | None:
    rs = [r for r in results if r.target == target]
    if not rs:
        return None
    return {
        k: statistics.median(getattr(r, k) for r in rs)
        for k in ("rate", "p50_ms", "p90_ms", "p99_ms", "max_ms", "server_cpu_ms_per_req")
    }


async def main_async(args: argparse.Namespace) -> int:
    deadline = time.monotonic() + args.max_seconds
    padding = padding_for(args.payload_kb * 1024)
    sample = build_workload("sample", 1, padding=padding, sync_every=0, number_base=0)[0][0]
    targets = ["admission", "bare"] if args.target == "both" else [args.target]
    results: list[RunResult] = []
    with tempfile.TemporaryDirectory(prefix="reviewer-bench-") as workdir:
        argv = shlex.split(args.admission_cmd) if args.admission_cmd else None
        servers = {"admission": make_admission_server(workdir, argv), "bare": make_bare_server()}
        try:
            for name in targets:
                servers[name].spawn(workdir)
                await servers[name].wait_ready()
            if not args.json:
                print(
                    f"code {code_version()}; load average {loadavg()}; payload {len(sample)} bytes (padding={padding}), {args.requests} requests x {args.runs} run(s),"
                    f" {args.concurrency} connections, warm-up {args.warmup}; reviewer-app: {' '.join(servers['admission'].argv)}"
                )
            for run in range(1, args.runs + 1):
                for name in targets:  # alternate the targets so drift affects both alike
                    tag = f"{name}-r{run}-{uuid.uuid4().hex[:8]}"
                    base = run * 10_000_000 + (5_000_000 if name == "bare" else 0)
                    warmup = build_workload(
                        tag + "-w",
                        args.warmup,
                        padding=padding,
                        sync_every=args.sync_every,
                        number_base=base + 1_000_000,
                        installations=args.installations,
                    )
                    items = build_workload(
                        tag,
                        args.requests,
                        padding=padding,
                        sync_every=args.sync_every,
                        number_base=base,
                        installations=args.installations,
                    )
                    profile = args.py_spy if (args.py_spy and name == "admission" and run == 1) else None
                    results.append(
                        await run_target(servers[name], run, items, warmup, args.concurrency, deadline, profile)
                    )
                    if servers[name].proc.poll() is not None:  # type: ignore[union-attr]
                        raise RuntimeError(f"{name} died: {servers[name].tail()}")
        finally:
            for s in servers.values():
                s.stop()
        # Counted again after the server has exited: every 202 was a commit that outlived the process.
        total_jobs = count_rows(servers["admission"].db_path)[0] if "admission" in targets else None  # type: ignore[arg-type]
        summary: dict[str, Any] = {
            "payload_bytes": len(sample),
            "padding": padding,
            "loadavg_at_end": loadavg(),
            "code": code_version(),
        }
        for name in targets:
            summary[name] = medians(results, name)
        if len(targets) == 2:
            summary["ratio"] = summary["admission"]["rate"] / summary["bare"]["rate"]
        if "admission" in targets:
            expected_total = args.runs * (args.requests + args.warmup)
            summary["db_total_jobs"] = total_jobs
            summary["db_total_expected"] = expected_total
            summary["db_verified"] = total_jobs == expected_total and all(
                r.extra.get("ok") for r in results if r.target == "admission"
            )
    if args.json:
        print(json.dumps({"args": vars(args), "summary": summary, "runs": [asdict(r) for r in results]}, indent=2))
    else:
        print_table(results, summary)
    return 0 if summary.get("db_verified", True) else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--requests", "-n", type=int, default=3000, help="timed requests per run and target (default 3000)")
    p.add_argument("--concurrency", "-c", type=int, default=32, help="concurrent client connections (default 32)")
    p.add_argument("--warmup", type=int, default=300, help="untimed requests before each timed run (default 300)")
    p.add_argument("--runs", type=int, default=1, help="timed runs per target; the summary is the median (default 1)")
    p.add_argument("--payload-kb", type=float, default=30, help="approximate JSON body size in KiB (default 30)")
    p.add_argument(
        "--sync-every",
        type=int,
        default=20,
        help="every k-th delivery is a synchronize of the previous PR (supersedes); 0: all distinct PRs (default 20)",
    )
    p.add_argument(
        "--installations",
        type=int,
        default=100,
        help="installation ids the PRs are spread over (default 100); keep runs*(requests+warmup)/installations"
        " under REVIEWER_MAX_REVIEWS_PER_DAY (default 500) or the guard refuses jobs",
    )
    p.add_argument("--target", choices=("both", "admission", "bare"), default="both")
    p.add_argument(
        "--max-seconds", type=float, default=150, help="abort if the whole benchmark runs longer (default 150)"
    )
    p.add_argument(
        "--admission-cmd",
        metavar="CMD",
        help="command line that starts the app instead of `reviewer-app serve --no-worker` (to compare a patched"
        " build); it gets the same environment (HOST, PORT, DATABASE_URL, ...)",
    )
    p.add_argument(
        "--py-spy",
        metavar="FILE",
        help="profile the admission server during run 1 with py-spy into FILE"
        " (.svg flamegraph, .json speedscope, .txt collapsed stacks); needs `pip install py-spy`",
    )
    p.add_argument("--json", action="store_true", help="print machine-readable JSON instead of the table")
    args = p.parse_args()
    try:
        return asyncio.run(main_async(args))
    except TimeoutError:
        print(f"admission: gave up after --max-seconds={args.max_seconds:g}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
