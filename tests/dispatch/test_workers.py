"""The worker registry: processes register, beat, deregister, turn gone with the jobs they held, and are pruned."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reviewer_app.admin import Admin
from reviewer_app.admin_text import render_status
from reviewer_app.core.admission import Enqueue, JobSpec
from reviewer_app.dispatch.cleaner import DAY, Cleaner
from reviewer_app.dispatch.registry import Registration, app_version
from reviewer_app.metrics import Metrics
from reviewer_app.service import build_service
from reviewer_app.settings.config import load_config
from reviewer_app.store.base import Delivery
from tests.helpers import SECRET, encode, eventually, pr_payload, sha, webhook_headers
from tests.pg import create_schema, drop_schema, postgres_dsn
from tests.serve_process import ServeProcess, wait_until

NOW = 1_800_000_000.0


class Clock:
    def __init__(self, t: float = NOW) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


async def admit(store, pr: int, at: float) -> int:
    spec = JobSpec(repo_id=1, repo_full_name="o/r", installation_id=7, pr_number=pr, head_sha=sha(pr))
    r = await store.admit(Delivery(f"d{pr}", "pull_request", "opened"), Enqueue(spec), now=at, max_attempts=3)
    return r.job_id


def registration(store, clock: Clock, worker_id: str, *, role: str = "worker", running: int = 0) -> Registration:
    return Registration(
        store,
        worker_id=worker_id,
        role=role,
        slots=4,
        lease_seconds=60,
        interval=20,
        clock=clock,
        jobs_running=lambda: running,
    )


async def test_a_process_registers_beats_and_deregisters(store) -> None:
    clock = Clock()
    reg = registration(store, clock, "worker-a", running=2)
    await reg.beat()
    [w] = await store.workers(now=clock())
    assert (w.info.id, w.info.role, w.info.slots, w.info.jobs_running, w.gone) == ("worker-a", "worker", 4, 2, False)
    assert w.info.started_at == NOW and w.info.version == app_version()
    clock.t += 30
    await reg.beat()
    [w] = await store.workers(now=clock())
    assert w.info.heartbeat_at == NOW + 30 and w.info.started_at == NOW
    await reg.deregister()
    assert await store.workers(now=clock()) == []


async def test_a_silent_process_is_gone_after_its_lease_with_the_jobs_it_held(store) -> None:
    clock = Clock()
    job_id = await admit(store, 1, NOW)
    reg = registration(store, clock, "worker-b", running=1)
    [lease] = await store.claim(owner="worker-b", limit=1, now=NOW, lease_seconds=60)
    await reg.beat()
    alive = registration(store, clock, "web-c", role="serve --no-worker")
    clock.t = NOW + 59
    await alive.beat()
    by_id = {w.info.id: w for w in await store.workers(now=clock())}
    assert not by_id["worker-b"].gone  # within its lease
    clock.t = NOW + 61  # no beat since NOW: older than the 60 s lease
    by_id = {w.info.id: w for w in await store.workers(now=clock())}
    gone, web = by_id["worker-b"], by_id["web-c"]
    assert gone.gone and not web.gone
    assert [(h.job_id, h.repo, h.pr_number) for h in gone.held] == [(job_id, "o/r", 1)]
    assert gone.rescued_at == lease.expires_at == NOW + 60
    status = await Admin(store, clock=clock).status()
    shown = {w["id"]: w for w in status["workers"]}
    assert shown["worker-b"]["gone"] and shown["worker-b"]["held_jobs"][0]["id"] == job_id
    text = render_status(status)
    assert "processes: 1 alive, 1 gone" in text and f"job {job_id}  o/r#1  rescued" in text


async def test_retention_forgets_processes_gone_for_a_day_only(store) -> None:
    clock = Clock()
    await registration(store, clock, "old").beat()
    clock.t = NOW + DAY - 10
    await registration(store, clock, "recent").beat()
    clock.t = NOW + DAY + 1
    await Cleaner(store, retention_seconds=30 * DAY, clock=clock).run_once()
    assert [w.info.id for w in await store.workers(now=clock())] == ["recent"]


async def test_metrics_count_processes_alive_and_gone(store) -> None:
    clock = Clock()
    await admit(store, 1, NOW)
    await store.claim(owner="dead", limit=1, now=NOW, lease_seconds=60)
    await registration(store, clock, "dead").beat()
    clock.t = NOW + 100
    await registration(store, clock, "live").beat()
    text = (await Metrics(store, clock=clock).render()).decode()
    assert 'reviewer_processes{role="worker",status="alive"} 1.0' in text
    assert 'reviewer_processes{role="worker",status="gone"} 1.0' in text
    assert "reviewer_process_slots 4.0" in text
    assert "reviewer_jobs_held_by_gone_processes 1.0" in text


QUEUES_OF_SERVE = {
    "reviews": {"slots": 2, "running": 0},
    "answers": {"slots": 1, "running": 0},
    "housekeeping": {"slots": 5, "running": 0},
}


@pytest.mark.parametrize(
    ("worker", "receive", "role", "slots", "queues"),
    [(True, True, "serve", 3, QUEUES_OF_SERVE), (False, True, "serve --no-worker", 0, {})],
)
async def test_the_service_registers_its_role_and_its_slots_per_queue_and_deregisters_on_stop(
    tmp_path, worker: bool, receive: bool, role: str, slots: int, queues: dict
) -> None:
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'r.db'}",
        "GITHUB_WEBHOOK_SECRET": SECRET,
        "REVIEWER_RUNNER": "noop",
        "REVIEWER_CONCURRENCY": "2",
        "REVIEWER_ANSWER_CONCURRENCY": "1",
        "REVIEWER_HOUSEKEEPING_CONCURRENCY": "5",
        "REVIEWER_LEASE_SECONDS": "3",
    }
    svc = await build_service(load_config(env), worker=worker, receive=receive)
    svc.start_background()
    try:
        [w] = await eventually(lambda: svc.store.workers(now=time.time()))
        # Its job slots: the reviews' and the answers' together; each queue's apart, with how many are busy.
        assert (w.info.role, w.info.slots, w.info.queues, w.gone) == (role, slots, queues, False)
        beat = w.info.heartbeat_at
        await eventually(lambda: _beat_after(svc.store, beat), timeout=5)  # every 1 s: a third of the lease
    finally:
        await svc.stop()
    from reviewer_app.store.sqlite import SqliteStore

    again = SqliteStore(str(tmp_path / "r.db"))
    await again.open()
    try:
        assert await again.workers(now=time.time()) == []
    finally:
        await again.close()


async def _beat_after(store, t: float) -> bool:
    return any(w.info.heartbeat_at > t for w in await store.workers(now=time.time()))


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'reviewer.db'}"
        return
    dsn = postgres_dsn()
    schema = asyncio.run(create_schema(dsn))
    try:
        yield f"{dsn}{'&' if '?' in dsn else '?'}search_path={schema}"
    finally:
        asyncio.run(drop_schema(dsn, schema))


def test_a_killed_worker_process_is_shown_gone_with_its_job(database_url: str, tmp_path: Path) -> None:
    """A real `reviewer-app worker` takes a long job, is killed with SIGKILL, and `status --json` then shows it gone,
    holding that job until its lease expires."""
    env = {
        "DATABASE_URL": database_url,
        "GITHUB_WEBHOOK_SECRET": SECRET,
        "REVIEWER_RUNNER": "noop",
        "REVIEWER_NOOP_SECONDS": "60",
        "REVIEWER_LEASE_SECONDS": "2",
        "REVIEWER_SCAN_SECONDS": "0.2",
    }
    receiver = ServeProcess(env, tmp_path / "receiver.log", args=("--no-worker",)).start(timeout=60)
    worker = ServeProcess(env, tmp_path / "worker.log", command="worker", health=False).start(timeout=60)
    try:
        body = encode(pr_payload(head=sha(1)))
        status, answer = receiver.post("/api/github/webhooks", body, webhook_headers(body))
        assert status == 202, answer
        job_id = json.loads(answer)["job_id"]
        assert worker.proc is not None
        pid = worker.proc.pid

        def status_json() -> dict:
            out = subprocess.run(
                [sys.executable, "-m", "reviewer_app.cli.main", "status", "--json"],
                env=worker.env,
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            )
            return json.loads(out.stdout)

        def mine(s: dict) -> dict | None:
            return next((w for w in s["workers"] if w["pid"] == pid and w["role"] == "worker"), None)

        def running_here() -> dict | None:
            s = status_json()
            w = mine(s)
            return w if w and w["jobs_running"] == 1 and not w["gone"] else None

        wait_until(running_here, timeout=60)
        worker.proc.send_signal(signal.SIGKILL)
        worker.proc.wait(10)

        def shown_gone() -> dict | None:
            w = mine(status_json())
            return w if w and w["gone"] else None

        gone = wait_until(shown_gone, timeout=60)
        assert [h["id"] for h in gone["held_jobs"]] == [job_id]
        assert gone["rescued_at"] is not None  # the lease's expiry: the rescuer of any worker hands it back then
        roles = {w["role"] for w in status_json()["workers"] if not w["gone"]}
        assert roles == {"serve --no-worker"}  # the receiver is still alive and listed
    finally:
        receiver.kill()
        worker.kill()
