"""A process of this host that is known dead (the host restarted it, or its pid runs nothing) holds nothing: the
next beat of a live process here ends its leases and claims."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from dataclasses import replace

from reviewer_app.dispatch.registry import Registration, dead_on_this_host
from reviewer_app.store.workers import WorkerInfo

NOW = 1_800_000_000.0


def info(worker_id: str, *, host: str = "h1", pid: int = 100) -> WorkerInfo:
    return WorkerInfo(worker_id, host, pid, "serve", "0.1.0", 4, 120.0, NOW - 60, NOW)


def test_a_former_process_of_this_host_is_dead_a_live_one_or_another_hosts_is_not() -> None:
    me = info("me", pid=1)
    registered = [
        me,
        info("former-life", pid=1),  # the container restarted: its process is pid 1 again, and that is me
        info("killed", pid=200),  # kill -9: pid 200 runs nothing now
        info("neighbour", pid=300),  # a second worker on this machine, running
        info("pid-reused", pid=400),  # its pid runs another program now: proves nothing, its heartbeat decides
        info("elsewhere", host="h2", pid=200),  # another host's pid means nothing here
        info("sibling-in-process", pid=1),  # another service in this very process (tests), beating
        replace(info("ended-before", pid=500), lease_seconds=0),  # known dead and ended already: not again
    ]
    running = {300, 400}.__contains__
    dead = dead_on_this_host(me, registered, now=NOW + 1, beating_here={"me", "sibling-in-process"}, running=running)
    assert [w.id for w in dead] == ["former-life", "killed"]


class Clock:
    def __init__(self) -> None:
        self.t = NOW

    def __call__(self) -> float:
        return self.t


def registration(store, worker_id: str, clock: Clock) -> Registration:
    return Registration(store, worker_id=worker_id, role="serve", slots=4, lease_seconds=120, interval=40, clock=clock)


async def test_a_beat_ends_the_leases_of_a_process_killed_on_this_host_and_spares_a_live_one(store) -> None:
    clock = Clock()
    # A process of this host that was killed: its pid ran and is gone (reaped), its heartbeat is fresh.
    gone = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await gone.wait()
    host = socket.gethostname()
    await store.register_worker(WorkerInfo("killed", host, gone.pid, "serve", "0.1.0", 4, 120.0, NOW - 60, NOW))
    await store.register_worker(WorkerInfo("parent", host, os.getppid(), "serve", "0.1.0", 4, 120.0, NOW - 60, NOW))
    assert await store.take_duty_lease("duty:outbox", owner="killed", now=NOW, seconds=30)
    assert await store.take_duty_lease("duty:signals", owner="parent", now=NOW, seconds=30)

    clock.t = NOW + 1  # both leases have 29 s to go
    me = registration(store, "worker-me", clock)
    await me.beat()
    assert await store.take_duty_lease("duty:outbox", owner="worker-me", now=clock.t, seconds=30)
    assert not await store.take_duty_lease("duty:signals", owner="worker-me", now=clock.t, seconds=30)
    listed = {w.info.id: w.gone for w in await store.workers(now=clock.t)}
    assert listed == {"killed": True, "parent": False, "worker-me": False}
    await me.beat()  # the next beat names it no more
    assert await me.void_dead_on_this_host() == []


async def test_a_service_abandoned_in_this_process_is_dead_to_the_next_one(store) -> None:
    # As after kill -9 in the model-based test: the first service stops beating without its clean stop.
    clock = Clock()
    first = registration(store, "worker-first", clock)
    await first.beat()
    assert await store.take_duty_lease("duty:check-sync", owner="worker-first", now=NOW, seconds=30)
    second = registration(store, "worker-second", clock)
    await second.beat()  # both beat in this process: both alive
    assert not await store.take_duty_lease("duty:check-sync", owner="worker-second", now=NOW, seconds=30)
    beating = asyncio.create_task(first.run())
    await asyncio.sleep(0)
    beating.cancel()  # abandoned: its beats stop, nothing is released
    await asyncio.gather(beating, return_exceptions=True)
    await second.beat()
    assert await store.take_duty_lease("duty:check-sync", owner="worker-second", now=NOW, seconds=30)


async def test_a_clean_stop_frees_the_claims_and_duties_its_cut_short_work_left(store) -> None:
    # A sync pass stopped mid-creation of a check run leaves its claim; a clean stop frees it, and its duties, at once.
    from reviewer_app.core.admission import Enqueue, JobSpec
    from reviewer_app.store.base import Delivery

    clock = Clock()
    spec = JobSpec(repo_id=1, repo_full_name="o/r", installation_id=7, pr_number=1, head_sha="a" * 40)
    job = await store.admit(Delivery("d1", "pull_request", "opened"), Enqueue(spec), now=NOW, max_attempts=3)
    stopping = registration(store, "worker-stopping", clock)
    await stopping.beat()
    assert await store.claim_check_run_creation(job.job_id, owner="worker-stopping", now=NOW, seconds=60)
    assert await store.take_duty_lease("duty:check-sync", owner="worker-stopping", now=NOW, seconds=30)
    [lease] = await store.claim(owner="worker-stopping", limit=1, now=NOW, lease_seconds=120)
    await stopping.deregister()
    assert await store.claim_check_run_creation(job.job_id, owner="worker-next", now=NOW + 1, seconds=60)
    assert await store.take_duty_lease("duty:check-sync", owner="worker-next", now=NOW + 1, seconds=30)
    assert [w.info.id for w in await store.workers(now=NOW + 1)] == []
    # Its job keeps its lease: a write of it may still be in flight (the dispatcher hands it back, or it expires).
    assert await store.rescue_expired(now=NOW + 119) == [] and lease.job_id == job.job_id
