"""Queues per kind of work in the dispatcher and the duties: a question runs while every review slot is busy, each
queue fills only its own slots, and the housekeeping passes share slots of their own."""

from __future__ import annotations

import asyncio
import time

from reviewer_app.core.admission import Enqueue, JobSpec
from reviewer_app.core.states import JobState
from reviewer_app.dispatch.context import JobContext
from reviewer_app.dispatch.duty import PeriodicDuty, Slots
from reviewer_app.store.base import Delivery
from tests.dispatch.test_dispatcher import admit, dispatcher, state_of
from tests.helpers import eventually

_n = 0


async def admit_question(store, comment: int) -> int:
    """An answer job, as admission makes one for a question (trigger "reply:<comment id>", no head)."""
    global _n
    _n += 1
    spec = JobSpec(
        repo_id=1,
        repo_full_name="o/r",
        installation_id=7,
        pr_number=comment,
        head_sha="",
        trigger=f"reply:{comment}",
        priority=5,
    )
    r = await store.admit(
        Delivery(f"q{_n}", "issue_comment", "created"), Enqueue(spec), now=time.time(), max_attempts=5
    )
    return r.job_id


class HeldReviews:
    """A runner that holds every review until released and answers questions at once."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started: list[int] = []

    async def __call__(self, ctx: JobContext) -> str:
        self.started.append(ctx.job.id)
        if not ctx.job.trigger.startswith("reply:"):
            await self.release.wait()
        return "done"


async def test_a_question_is_answered_while_every_review_slot_is_busy(store) -> None:
    runner = HeldReviews()
    reviews = [await admit(store, pr=n, head=n) for n in range(1, 5)]  # more reviews than slots
    d = dispatcher(store, runner, concurrency=2)
    d.start()
    try:
        await eventually(lambda: asyncio.sleep(0, len(runner.started) == 2))
        assert d.loads()["reviews"] == {"slots": 2, "running": 2}
        question = await admit_question(store, 77)
        d.wake()
        await eventually(lambda: _is(store, question, JobState.SUCCEEDED))
        # Meanwhile the reviews hold their slots, and the two waiting reviews still wait for one.
        assert [await state_of(store, j) for j in reviews].count(JobState.RUNNING) == 2
        assert [await state_of(store, j) for j in reviews].count(JobState.QUEUED) == 2
        runner.release.set()
        for job_id in reviews:
            await eventually(lambda job_id=job_id: _is(store, job_id, JobState.SUCCEEDED))
    finally:
        runner.release.set()
        await d.stop(grace=1)


async def test_each_queue_fills_only_its_own_slots(store) -> None:
    gate = asyncio.Event()

    async def held(ctx: JobContext) -> str:
        await gate.wait()
        return "done"

    for n in range(1, 4):
        await admit(store, pr=n, head=n)
        await admit_question(store, 100 + n)
    d = dispatcher(store, held, concurrency=1)  # one review slot; the answers' default of one slot
    try:
        leases = await d.run_once()
        assert sorted(le.job.trigger for le in leases) == ["auto", "reply:101"]
        assert d.loads() == {"reviews": {"slots": 1, "running": 1}, "answers": {"slots": 1, "running": 1}}
        assert await d.run_once() == []  # both queues full: nothing more is claimed, however much is due
    finally:
        gate.set()
        await d.stop(grace=1)


async def _is(store, job_id: int, state: JobState) -> bool:
    return await state_of(store, job_id) == state


async def test_housekeeping_passes_share_their_own_slots(store) -> None:
    slots = Slots(2)
    release = asyncio.Event()
    running: list[str] = []

    def one_pass(name: str):
        async def run() -> int:
            running.append(name)
            await release.wait()
            return 1

        return run

    duties = [
        PeriodicDuty(name, one_pass(name), interval=3600, clock=time.time, store=store, owner="h", slots=slots)
        for name in ("sweep", "batches", "outbox")
    ]
    passes = [asyncio.create_task(d.run_pass()) for d in duties]
    try:
        await eventually(lambda: asyncio.sleep(0, len(running) == 2))
        assert running == ["sweep", "batches"] and slots.running == 2
        # The third pass waits for a slot before it takes its duty's lease: another host may take the duty meanwhile.
        assert await store.take_duty_lease("duty:outbox", owner="other-host", now=time.time(), seconds=60)
        release.set()
        assert await asyncio.gather(*passes) == [1, 1, None]  # the outbox pass found its duty taken, and ran not
        assert running == ["sweep", "batches"] and slots.running == 0
    finally:
        release.set()
        await asyncio.gather(*passes, return_exceptions=True)
