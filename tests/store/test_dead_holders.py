"""A holder known dead holds nothing: its duty leases, check-run creation claims, job leases and redelivery claims are
taken over at once, on every store (issue #38, points 1 to 3)."""

from __future__ import annotations

from reviewer_app.core.admission import Enqueue, JobSpec
from reviewer_app.core.states import JobState
from reviewer_app.store.base import Delivery
from reviewer_app.store.workers import WorkerInfo
from tests.helpers import sha

NOW = 1_800_000_000.0
BEAT_LEASE = 10.0  # the registration's lease: a heartbeat older than this and the process is gone


async def register(store, worker_id: str, *, host: str = "host-a", pid: int = 4242, beat_at: float = NOW) -> None:
    info = WorkerInfo(worker_id, host, pid, "serve", "0.1.0", 4, BEAT_LEASE, started_at=NOW - 60, heartbeat_at=beat_at)
    await store.register_worker(info)


async def admit(store, pr: int = 1) -> int:
    spec = JobSpec(repo_id=1, repo_full_name="o/r", installation_id=7, pr_number=pr, head_sha=sha(pr))
    result = await store.admit(Delivery(f"d{pr}", "pull_request", "opened"), Enqueue(spec), now=NOW, max_attempts=3)
    return result.job_id


async def test_a_duty_lease_of_a_process_whose_heartbeat_stopped_is_taken_before_it_expires(store) -> None:
    await register(store, "worker-a", beat_at=NOW)
    assert await store.take_duty_lease("duty:outbox", owner="worker-a", now=NOW, seconds=120)
    # A beats: its lease holds.
    assert not await store.take_duty_lease("duty:outbox", owner="worker-b", now=NOW + BEAT_LEASE / 2, seconds=120)
    # A stopped beating (kill -9): once its heartbeat is older than its lease, the duty is B's, long before NOW + 120.
    assert await store.take_duty_lease("duty:outbox", owner="worker-b", now=NOW + BEAT_LEASE + 1, seconds=120)
    assert not await store.take_duty_lease("duty:outbox", owner="worker-a", now=NOW + BEAT_LEASE + 2, seconds=120)


async def test_a_duty_lease_of_an_unregistered_holder_waits_for_its_expiry(store) -> None:
    # Nothing known about the holder (a one-shot CLI, a process not registered yet): its lease is its word.
    assert await store.take_duty_lease("duty:sweep", owner="cli", now=NOW, seconds=30)
    assert not await store.take_duty_lease("duty:sweep", owner="worker-b", now=NOW + 29, seconds=30)
    assert await store.take_duty_lease("duty:sweep", owner="worker-b", now=NOW + 30, seconds=30)


async def test_a_check_run_claim_of_a_process_whose_heartbeat_stopped_is_taken_before_it_expires(store) -> None:
    job_id = await admit(store)
    await register(store, "worker-a", beat_at=NOW)
    claim = store.claim_check_run_creation
    assert await claim(job_id, owner="worker-a", now=NOW, seconds=60)
    assert not await claim(job_id, owner="worker-b", now=NOW + BEAT_LEASE / 2, seconds=60)
    assert await claim(job_id, owner="worker-b", now=NOW + BEAT_LEASE + 1, seconds=60)  # not NOW + 60


async def test_voiding_a_dead_holder_ends_its_leases_and_claims_at_once(store) -> None:
    await register(store, "worker-a", beat_at=NOW)
    await register(store, "worker-b", host="host-b", beat_at=NOW)
    job_a, job_b, job_c = await admit(store, 1), await admit(store, 2), await admit(store, 3)
    [lease_a] = await store.claim(owner="worker-a", limit=1, now=NOW, lease_seconds=120)
    [lease_b] = await store.claim(owner="worker-b", limit=1, now=NOW, lease_seconds=120)
    assert await store.take_duty_lease("duty:check-sync", owner="worker-a", now=NOW, seconds=30)
    assert await store.take_duty_lease("duty:batches", owner="worker-b", now=NOW, seconds=30)
    assert await store.claim_check_run_creation(job_c, owner="worker-a", now=NOW, seconds=60)
    assert await store.claim_redelivery("guid-1", 11, owner="worker-a", now=NOW, stale_before=NOW - 300)

    # worker-a's heartbeat is fresh (it was killed a moment ago), and nothing of it has expired.
    assert await store.void_holder("worker-a", now=NOW + 1, jobs_at=NOW + 31) == 4
    assert await store.take_duty_lease("duty:check-sync", owner="worker-c", now=NOW + 1, seconds=30)
    assert await store.claim_check_run_creation(job_c, owner="worker-c", now=NOW + 1, seconds=60)
    assert await store.claim_redelivery("guid-1", 11, owner="worker-c", now=NOW + 1, stale_before=NOW + 1 - 300)
    listed = {w.info.id: (w.gone, [h.job_id for h in w.held]) for w in await store.workers(now=NOW + 2)}
    assert listed == {"worker-a": (True, [lease_a.job_id]), "worker-b": (False, [lease_b.job_id])}  # a listed gone
    # Its job, once nothing it sent can still be in flight (NOW + 31, not NOW + 120).
    assert await store.rescue_expired(now=NOW + 30) == []
    assert await store.rescue_expired(now=NOW + 31.5) == [lease_a.job_id]
    assert (await store.get_job(lease_a.job_id)).state == JobState.QUEUED
    # worker-b keeps all it holds.
    assert not await store.take_duty_lease("duty:batches", owner="worker-c", now=NOW + 1, seconds=30)
    assert (await store.get_job(lease_b.job_id)).state == JobState.RUNNING
    assert {job_a, job_b} == {lease_a.job_id, lease_b.job_id}
    # Voiding again changes nothing.
    assert await store.void_holder("worker-a", now=NOW + 32, jobs_at=NOW + 62) == 0
