"""The dispatcher: slots, leases, renewal, fencing, retries, shutdown, with runners that misbehave."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable

from reviewer_app.core.admission import Enqueue, JobSpec
from reviewer_app.core.errors import PermanentError, RateLimited, TransientError
from reviewer_app.core.queues import REVIEWS
from reviewer_app.core.retry import RetryPolicy
from reviewer_app.core.states import JobState
from reviewer_app.dispatch.context import JobContext
from reviewer_app.dispatch.dispatcher import Dispatcher
from reviewer_app.store.base import Delivery
from reviewer_app.store.sqlite import SqliteStore
from tests.helpers import eventually, sha

_n = 0


async def admit(store, pr: int = 1, head: int = 1, max_attempts: int = 5) -> int:
    global _n
    _n += 1
    spec = JobSpec(repo_id=1, repo_full_name="o/r", installation_id=7, pr_number=pr, head_sha=sha(head))
    r = await store.admit(
        Delivery(f"d{_n}", "pull_request", "opened"), Enqueue(spec), now=time.time(), max_attempts=max_attempts
    )
    return r.job_id


def dispatcher(
    store,
    runner,
    *,
    concurrency: int = 2,
    lease: float = 5.0,
    renew: float = 1.0,
    base: float = 0.01,
    max_attempts: int = 5,
    job_timeout: float = 60.0,
    owner: str = "w",
    scan: float = 0.05,
    clock: Callable[[], float] = time.time,
) -> Dispatcher:
    return Dispatcher(
        store,
        runner,
        owner=owner,
        concurrency=concurrency,
        lease_seconds=lease,
        renew_interval=renew,
        scan_interval=scan,
        retry_policy=RetryPolicy(max_attempts=max_attempts, base_seconds=base, max_seconds=1.0, jitter=0.0),
        job_timeout=job_timeout,
        clock=clock,
    )


async def state_of(store, job_id: int) -> JobState:
    return (await store.get_job(job_id)).state


class Gate:
    """A runner that blocks each job until released, counting runs."""

    def __init__(self) -> None:
        self.runs: Counter[int] = Counter()
        self.release = asyncio.Event()
        self.started: list[int] = []

    async def __call__(self, ctx: JobContext) -> str:
        self.runs[ctx.job.id] += 1
        self.started.append(ctx.job.id)
        await self.release.wait()
        return "done"


async def test_busy_slots_delay_work_but_never_drop_it(sqlite_store) -> None:
    gate = Gate()
    d = dispatcher(sqlite_store, gate, concurrency=2)
    d.start()
    ids = [await admit(sqlite_store, pr=i) for i in range(6)]
    d.wake()
    await eventually(lambda: asyncio.sleep(0, len(gate.started) == 2))
    assert len(d.tasks) == 2
    states = Counter([await state_of(sqlite_store, i) for i in ids])
    assert states == {JobState.RUNNING: 2, JobState.QUEUED: 4}
    gate.release.set()

    async def all_done() -> bool:
        return all([await state_of(sqlite_store, i) == JobState.SUCCEEDED for i in ids])

    await eventually(all_done)
    assert gate.runs == Counter({i: 1 for i in ids})
    await d.stop(1)


async def test_abandoned_lease_runs_again_exactly_once_more(sqlite_store) -> None:
    job_id = await admit(sqlite_store)
    [ghost] = await sqlite_store.claim(owner="crashed", limit=1, now=time.time(), lease_seconds=0.3)
    gate = Gate()
    gate.release.set()
    d = dispatcher(sqlite_store, gate)
    d.start()
    await eventually(lambda: _is(sqlite_store, job_id, JobState.SUCCEEDED))
    assert gate.runs[job_id] == 1
    attempts = await sqlite_store.attempts_of(job_id)
    assert [(a.lease_owner, a.outcome) for a in attempts] == [("crashed", "lease_expired"), ("w", "succeeded")]
    await d.stop(1)


async def _is(store, job_id: int, state: JobState) -> bool:
    return await state_of(store, job_id) == state


async def test_stale_worker_cannot_overwrite_the_newer_attempt(sqlite_store) -> None:
    job_id = await admit(sqlite_store)
    stale_may_finish = asyncio.Event()
    stale_started = asyncio.Event()

    async def stale_runner(ctx: JobContext) -> str:
        stale_started.set()
        await stale_may_finish.wait()
        return "stale result"

    async def fresh_runner(ctx: JobContext) -> str:
        return "fresh result"

    # The stale worker never renews in time (hung event loop, paused VM): its lease runs out.
    stale = dispatcher(sqlite_store, stale_runner, lease=0.3, renew=30, owner="stale")
    await stale.run_once()
    await stale_started.wait()
    fresh = dispatcher(sqlite_store, fresh_runner, owner="fresh")
    fresh.start()
    await eventually(lambda: _is(sqlite_store, job_id, JobState.SUCCEEDED))
    stale_may_finish.set()
    await eventually(lambda: asyncio.sleep(0, not stale.tasks))
    job = await sqlite_store.get_job(job_id)
    assert job.outcome == "fresh result" and job.lease_owner == "fresh"
    assert stale.stale_writes_refused == 1
    outcomes = [(a.lease_owner, a.outcome) for a in await sqlite_store.attempts_of(job_id)]
    assert outcomes == [("stale", "lease_expired"), ("fresh", "succeeded")]
    await fresh.stop(1)


async def test_transient_failures_retry_with_growing_delays(sqlite_store) -> None:
    job_id = await admit(sqlite_store)
    calls: list[float] = []

    async def flaky(ctx: JobContext) -> str:
        calls.append(time.time())
        if len(calls) <= 3:
            raise TransientError("GitHub answered 502")
        return "reviewed"

    d = dispatcher(sqlite_store, flaky, base=0.1)
    d.start()
    await eventually(lambda: _is(sqlite_store, job_id, JobState.SUCCEEDED))
    gaps = [b - a for a, b in zip(calls, calls[1:], strict=False)]
    assert gaps[0] >= 0.1 and gaps[1] >= 0.2 and gaps[2] >= 0.4
    attempts = await sqlite_store.attempts_of(job_id)
    assert [a.outcome for a in attempts] == ["retry", "retry", "retry", "succeeded"]
    assert attempts[0].error == "GitHub answered 502"
    await d.stop(1)


async def test_permanent_failure_ends_failed_at_once(sqlite_store) -> None:
    job_id = await admit(sqlite_store)

    async def gone(ctx: JobContext) -> str:
        raise PermanentError("pull request not found (deleted?)")

    d = dispatcher(sqlite_store, gone)
    d.start()
    await eventually(lambda: _is(sqlite_store, job_id, JobState.FAILED))
    job = await sqlite_store.get_job(job_id)
    assert job.attempts == 1 and job.last_error == "pull request not found (deleted?)"
    await d.stop(1)


async def test_exhausted_attempts_end_failed_with_the_last_error(sqlite_store) -> None:
    job_id = await admit(sqlite_store, max_attempts=3)
    calls = 0

    async def always_failing(ctx: JobContext) -> str:
        nonlocal calls
        calls += 1
        raise ValueError("bug")  # an unexpected error is retried like a transient one

    d = dispatcher(sqlite_store, always_failing, max_attempts=3)
    d.start()
    await eventually(lambda: _is(sqlite_store, job_id, JobState.FAILED))
    job = await sqlite_store.get_job(job_id)
    assert calls == 3 and job.attempts == 3 and "ValueError" in job.last_error and "3 attempts" in job.last_error
    await d.stop(1)


async def test_rate_limit_waits_without_burning_attempts(sqlite_store) -> None:
    job_id = await admit(sqlite_store, max_attempts=2)
    calls: list[float] = []

    async def limited(ctx: JobContext) -> str:
        calls.append(time.time())
        if len(calls) <= 3:
            raise RateLimited("secondary rate limit", retry_at=time.time() + 0.2)
        return "reviewed"

    d = dispatcher(sqlite_store, limited, max_attempts=2)
    d.start()
    await eventually(lambda: _is(sqlite_store, job_id, JobState.SUCCEEDED))
    assert len(calls) == 4 and all(b - a >= 0.19 for a, b in zip(calls, calls[1:], strict=False))
    assert (await sqlite_store.get_job(job_id)).attempts == 1
    await d.stop(1)


async def test_hung_runner_times_out_and_is_retried(sqlite_store) -> None:
    job_id = await admit(sqlite_store)
    calls = 0

    async def hangs_once(ctx: JobContext) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            await asyncio.Event().wait()
        return "reviewed"

    d = dispatcher(sqlite_store, hangs_once, job_timeout=0.3)
    d.start()
    await eventually(lambda: _is(sqlite_store, job_id, JobState.SUCCEEDED))
    [first, second] = await sqlite_store.attempts_of(job_id)
    assert first.outcome == "retry" and "timed out" in first.error and second.outcome == "succeeded"
    await d.stop(1)


async def test_every_hung_runner_times_out_while_quick_ones_finish(sqlite_store) -> None:
    # One watchdog timer serves all running jobs: jobs that finish early must not stop it from catching the later
    # ones, started at different times, each at its own deadline.
    hung = [await admit(sqlite_store, pr=i) for i in range(3)]
    quick = [await admit(sqlite_store, pr=10 + i) for i in range(3)]
    started: Counter[int] = Counter()

    async def runner(ctx: JobContext) -> str:
        started[ctx.job.id] += 1
        if ctx.job.id in hung and ctx.attempt == 1:
            await asyncio.Event().wait()
        return "done"

    d = dispatcher(sqlite_store, runner, concurrency=2, job_timeout=0.3)
    d.start()

    async def all_done() -> bool:
        return all([await _is(sqlite_store, i, JobState.SUCCEEDED) for i in hung + quick])

    await eventually(all_done)
    for job_id in hung:
        first, second = await sqlite_store.attempts_of(job_id)
        assert first.outcome == "retry" and "timed out after 0.3 s" in first.error and second.outcome == "succeeded"
    assert all(started[i] == 1 for i in quick)
    await d.stop(1)


async def test_lease_lost_mid_run_stops_the_runner(sqlite_store) -> None:
    job_id = await admit(sqlite_store, head=1)
    cancelled = asyncio.Event()
    started = asyncio.Event()

    async def long_review(ctx: JobContext) -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    d = dispatcher(sqlite_store, long_review, lease=2, renew=0.05)
    d.start()
    await started.wait()
    await admit(sqlite_store, head=2)  # a newer push supersedes the running job
    await asyncio.wait_for(cancelled.wait(), 5)
    job = await sqlite_store.get_job(job_id)
    assert job.state == JobState.SUPERSEDED
    await d.stop(1)


async def test_one_renewer_keeps_every_running_lease_alive_past_its_first_expiry(sqlite_store) -> None:
    gate = Gate()
    d = dispatcher(sqlite_store, gate, concurrency=3, lease=0.5, renew=0.1)
    ids = [await admit(sqlite_store, pr=i) for i in range(3)]
    d.start()
    await eventually(lambda: asyncio.sleep(0, len(gate.started) == 3))
    first = {i: (await sqlite_store.get_job(i)).lease_expires_at for i in ids}

    async def renewed_well_past_the_first_lease() -> bool:
        jobs = [await sqlite_store.get_job(i) for i in ids]
        return all(j.lease_expires_at is not None and j.lease_expires_at > first[j.id] + 1.0 for j in jobs)

    await eventually(renewed_well_past_the_first_lease)
    assert await d.rescuer.run_once() == []  # nothing expired although each ran for more than two leases
    gate.release.set()

    async def all_done() -> bool:
        return all([await _is(sqlite_store, i, JobState.SUCCEEDED) for i in ids])

    await eventually(all_done)
    assert gate.runs == Counter({i: 1 for i in ids})
    await d.stop(1)
    assert d._renewer is None or d._renewer.done()


async def test_shutdown_hands_running_work_back_without_burning_the_attempt(sqlite_store) -> None:
    job_id = await admit(sqlite_store)
    gate = Gate()
    d = dispatcher(sqlite_store, gate)
    d.start()
    await eventually(lambda: asyncio.sleep(0, bool(gate.started)))
    await d.stop(grace=0.1)
    job = await sqlite_store.get_job(job_id)
    assert job.state == JobState.QUEUED and job.attempts == 0 and job.lease_token is None
    assert job.last_error == "interrupted by shutdown"


async def test_restart_runs_what_was_pending(tmp_path) -> None:
    path = str(tmp_path / "r.db")
    first = SqliteStore(path)
    await first.open()
    ids = [await admit(first, pr=i) for i in range(3)]
    await first.close()

    second = SqliteStore(path)
    await second.open()
    gate = Gate()
    gate.release.set()
    d = dispatcher(second, gate)
    d.start()

    async def all_done() -> bool:
        return all([await _is(second, i, JobState.SUCCEEDED) for i in ids])

    await eventually(all_done)
    await d.stop(1)
    await second.close()


async def test_admission_wakes_the_dispatcher_without_waiting_for_a_scan(sqlite_store) -> None:
    gate = Gate()
    gate.release.set()
    d = dispatcher(sqlite_store, gate)
    d.scan_interval = 30  # only a wake-up can start the job quickly
    d.start()
    await asyncio.sleep(0)
    job_id = await admit(sqlite_store)
    d.wake()
    await eventually(lambda: _is(sqlite_store, job_id, JobState.SUCCEEDED), timeout=3)
    await d.stop(1)


class SlowOutcomes(SqliteStore):
    """The real SQLite store whose completion writes wait until released (a disk that is slow to commit)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.commit_outcomes = asyncio.Event()
        self.completions_waiting = 0

    async def complete_if_lease_held(self, lease, **kw):  # type: ignore[no-untyped-def]
        self.completions_waiting += 1
        await self.commit_outcomes.wait()
        return await super().complete_if_lease_held(lease, **kw)


async def test_a_slot_frees_when_its_runner_finishes_not_when_the_outcome_is_written(tmp_path) -> None:
    # The next claim must not wait for the previous job's outcome to commit: with one slot, the second job starts
    # while the first one's completion is still being written (so both can share one group commit).
    store = SlowOutcomes(str(tmp_path / "slow.db"))
    await store.open()
    try:
        started: list[int] = []

        async def quick(ctx: JobContext) -> str:
            started.append(ctx.job.id)
            return "done"

        first, second = await admit(store, pr=1), await admit(store, pr=2)
        d = dispatcher(store, quick, concurrency=1)
        d.start()
        await eventually(lambda: asyncio.sleep(0, started == [first, second] and store.completions_waiting == 2))
        assert await state_of(store, first) == JobState.RUNNING  # its outcome is not written yet
        store.commit_outcomes.set()

        async def both_done() -> bool:
            return [await state_of(store, first), await state_of(store, second)] == [JobState.SUCCEEDED] * 2

        await eventually(both_done)
        await d.stop(1)
    finally:
        await store.close()


async def test_the_service_stops_a_runner_after_the_configured_job_timeout(tmp_path) -> None:
    from reviewer_app.service import build_service
    from reviewer_app.settings.config import load_config

    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path}/t.db",
        "GITHUB_WEBHOOK_SECRET": "x",
        "REVIEWER_RUNNER": "noop",
        "REVIEWER_NOOP_SECONDS": "60",
        "REVIEWER_JOB_TIMEOUT_SECONDS": "0.3",
        "REVIEWER_MAX_ATTEMPTS": "1",
        "REVIEWER_SCAN_SECONDS": "0.05",
    }
    svc = await build_service(load_config(env))
    try:
        job_id = await admit(svc.store, max_attempts=1)
        svc.start_background()
        await eventually(lambda: _is(svc.store, job_id, JobState.FAILED))
        job = await svc.store.get_job(job_id)
        assert "timed out after 0.3 s" in (job.last_error or "")
    finally:
        await svc.stop()


async def test_a_retry_runs_when_due_not_at_the_next_periodic_scan(store) -> None:
    # On both stores (on PostgreSQL the claim and the retry write use different connections). The periodic scan is
    # 30 s here: the retry (due 0.05 s later) must still run at once, because recording it
    # wakes the dispatcher, which then sleeps only until the retry is due.
    job_id = await admit(store)
    attempts: list[int] = []

    async def flaky(ctx: JobContext) -> str:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise TransientError("502 from GitHub")
        return "done"

    d = Dispatcher(
        store,
        flaky,
        owner="w",
        concurrency=1,
        lease_seconds=5,
        renew_interval=1,
        scan_interval=30,
        retry_policy=RetryPolicy(max_attempts=3, base_seconds=0.05, max_seconds=0.05, jitter=0.0),
        clock=time.time,
    )
    d.start()
    d.wake()
    await eventually(lambda: _is(store, job_id, JobState.SUCCEEDED), timeout=5)
    assert attempts == [1, 2]
    await d.stop(1)


def count_claims(store) -> list[float]:
    """Wrap the real store's claim: the monotonic time of every claim of the reviews' queue a dispatcher makes from
    now on (each round claims every queue with a free slot, one statement each)."""
    calls: list[float] = []
    claim = store.claim

    async def counting(**kw):
        if kw.get("queue") == REVIEWS:
            calls.append(time.monotonic())
        return await claim(**kw)

    store.claim = counting
    return calls


async def test_a_paused_queue_is_claimed_from_once_per_scan_interval_not_in_a_loop(store) -> None:
    # Paused, a due job stays queued and the store keeps saying it is due now: the dispatcher used to claim again at
    # once, thousands of times a second, on every host.
    job_id = await admit(store)
    await store.set_setting("queue_paused", "1")
    claims = count_claims(store)
    scan = 0.2
    d = dispatcher(store, Gate(), scan=scan)
    started = time.monotonic()
    d.start()
    try:
        await eventually(lambda: asyncio.sleep(0, len(claims) >= 4))
        elapsed = time.monotonic() - started
        assert len(claims) <= elapsed / scan + 2, f"{len(claims)} claims in {elapsed:.2f} s"
        assert await state_of(store, job_id) == JobState.QUEUED
    finally:
        await d.stop(1)


async def test_a_resumed_queue_starts_its_job_at_once_not_at_the_next_scan(store) -> None:
    job_id = await admit(store)
    await store.set_setting("queue_paused", "1")
    claims = count_claims(store)
    gate = Gate()
    d = dispatcher(store, gate, scan=30)
    await store.subscribe_wakeups(d.wake)  # as the service does: on PostgreSQL, NOTIFY from any host
    d.start()
    try:
        await eventually(lambda: asyncio.sleep(0, bool(claims)))
        await store.set_setting("queue_paused", "0")
        await eventually(lambda: asyncio.sleep(0, gate.started == [job_id]), timeout=10)
        assert len(claims) <= 3, f"{len(claims)} claims"
    finally:
        gate.release.set()
        await d.stop(1)


async def test_an_expired_lease_is_rescued_and_claimed_when_it_expires_without_spinning(store) -> None:
    # The periodic rescue is 30 s away; the store says the expired lease is due: rescue it then, once.
    job_id = await admit(store)
    [ghost] = await store.claim(owner="crashed", limit=1, now=time.time(), lease_seconds=0.3)
    claims = count_claims(store)
    gate = Gate()
    d = dispatcher(store, gate, scan=30)
    d.start()
    try:
        await eventually(lambda: asyncio.sleep(0, gate.started == [job_id]), timeout=10)
        assert len(claims) <= 5, f"{len(claims)} claims"
        assert d.rescuer.rescued_total == 1 and ghost.job_id == job_id
        gate.release.set()
        await eventually(lambda: _is(store, job_id, JobState.SUCCEEDED))
    finally:
        gate.release.set()
        await d.stop(1)


async def test_a_forward_clock_jump_longer_than_the_lease_does_not_rescue_a_job_running_here(sqlite_store) -> None:
    # A paused VM resumes with its clock a minute on: the dispatcher's scan ran the rescuer before the renewer's next
    # round, and the healthy job running here was rescued and run again.
    gate = Gate()
    offset = [0.0]
    d = dispatcher(sqlite_store, gate, concurrency=1, renew=2.0, clock=lambda: time.time() + offset[0])
    job_id = await admit(sqlite_store, pr=1)
    d.start()
    await eventually(lambda: asyncio.sleep(0, gate.started == [job_id]))
    before = (await sqlite_store.get_job(job_id)).lease_expires_at
    offset[0] = 60.0  # past the lease, before the renewer's next round

    async def renewed_after_the_jump() -> bool:
        job = await sqlite_store.get_job(job_id)
        return job.lease_expires_at is not None and job.lease_expires_at > before + 50

    await eventually(renewed_after_the_jump)
    assert d.rescuer.rescued_total == 0
    gate.release.set()
    await eventually(lambda: _is(sqlite_store, job_id, JobState.SUCCEEDED))
    assert gate.runs == Counter({job_id: 1})
    assert (await sqlite_store.get_job(job_id)).attempts == 1
    await d.stop(1)


async def test_shutdown_hands_a_job_back_only_after_its_github_write_in_flight(sqlite_store) -> None:
    # The grace ran out while the review POST was in flight (shielded): the job was handed back due at once, and a
    # host sharing the store claimed it and published again before the first POST had landed.
    landed: list[float] = []
    writing, release = asyncio.Event(), asyncio.Event()

    async def post() -> str:
        writing.set()
        await release.wait()
        landed.append(time.time())
        return "posted"

    async def runner(ctx: JobContext) -> str:
        return await ctx.write_through(post())

    d = dispatcher(sqlite_store, runner)
    job_id = await admit(sqlite_store, pr=1)
    d.start()
    await eventually(lambda: asyncio.sleep(0, writing.is_set()))
    stopping = asyncio.create_task(d.stop(0.05))
    # The grace runs out and the runner is cancelled while the write is still in flight...
    await eventually(lambda: asyncio.sleep(0, any(t.cancelling() for t in d.tasks.values())))
    assert (await sqlite_store.get_job(job_id)).state == JobState.RUNNING  # ...and the job is not handed back yet
    release.set()
    await stopping
    assert len(landed) == 1  # the write finished before the job went back
    job = await sqlite_store.get_job(job_id)
    assert job.state == JobState.QUEUED and job.next_attempt_at >= landed[0] and job.attempts == 0  # none spent


async def test_a_hand_back_keeps_renewing_the_lease_until_its_write_has_landed(sqlite_store) -> None:
    # The red multi-host test: the slot was freed (and the lease dropped from the renewer's set) before the hand-back
    # waited for the review POST, so the lease ran out during that wait and another host rescued the job and
    # published again. The clock is the test's: the lease must still be held a lease and more after the grace.
    now = [time.time() + 1.0]  # admitted just before: due
    writing, release = asyncio.Event(), asyncio.Event()

    async def runner(ctx: JobContext) -> str:
        async def post() -> str:
            writing.set()
            await release.wait()
            return "posted"

        return await ctx.write_through(post())

    d = dispatcher(sqlite_store, runner, lease=5.0, renew=0.01, clock=lambda: now[0])
    job_id = await admit(sqlite_store, pr=1)
    d.start()
    await eventually(lambda: asyncio.sleep(0, writing.is_set()))
    stopping = asyncio.create_task(d.stop(0.01))
    await eventually(lambda: asyncio.sleep(0, any(t.cancelling() for t in d.tasks.values())))
    first_expiry = (await sqlite_store.get_job(job_id)).lease_expires_at
    now[0] += 4.0  # most of a lease passes while the POST is in flight...

    async def renewed_past(t: float) -> bool:
        return ((await sqlite_store.get_job(job_id)).lease_expires_at or 0) > t

    await eventually(lambda: renewed_past(first_expiry + 3.0))
    now[0] += 4.0  # ...and more: past the first expiry, the lease is still this host's
    await eventually(lambda: renewed_past(first_expiry + 7.0))
    assert await sqlite_store.rescue_expired(now=now[0]) == []  # nothing for another host to take
    release.set()
    await stopping
    job = await sqlite_store.get_job(job_id)
    assert job.state == JobState.QUEUED and job.attempts == 0


async def test_a_write_still_unfinished_after_the_settle_time_makes_the_job_due_a_lease_later(sqlite_store) -> None:
    release = asyncio.Event()

    async def runner(ctx: JobContext) -> str:
        return await ctx.write_through(release.wait())

    d = dispatcher(sqlite_store, runner, lease=30.0)
    d.write_settle_seconds = 0.1
    job_id = await admit(sqlite_store, pr=1)
    d.start()
    await eventually(lambda: asyncio.sleep(0, bool(d.tasks)))
    stopped_at = time.time()
    await d.stop(0.05)
    job = await sqlite_store.get_job(job_id)
    assert job.state == JobState.QUEUED and job.next_attempt_at >= stopped_at + 30
    release.set()
