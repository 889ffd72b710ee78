"""Periodic duties: one host at a time per pass, for as long as the pass runs, and a pass that lost its lease stops."""

from __future__ import annotations

import asyncio

from reviewer_app.dispatch.duty import PeriodicDuty
from tests.helpers import eventually

NOW = 1_800_000_000.0
LEASE = 0.3  # renewed every 0.1 s of real time; the duty's clock is the test's


class SlowPass:
    """A pass that runs until the test lets it finish, noting how far it got."""

    def __init__(self) -> None:
        self.steps: list[str] = []
        self.finish = asyncio.Event()

    async def __call__(self) -> int:
        self.steps.append("started")
        await self.finish.wait()
        self.steps.append("finished")
        return 1


def record_takes(store) -> list[tuple[str, float, bool]]:
    """Wrap the real store's take_duty_lease: (owner, now, taken) of every call from now on."""
    takes: list[tuple[str, float, bool]] = []
    take = store.take_duty_lease

    async def recording(duty: str, *, owner: str, now: float, seconds: float) -> bool:
        taken = await take(duty, owner=owner, now=now, seconds=seconds)
        takes.append((owner, now, taken))
        return taken

    store.take_duty_lease = recording
    return takes


async def test_a_pass_longer_than_the_lease_keeps_it_until_it_ends(store) -> None:
    clock = [NOW]
    takes = record_takes(store)
    slow = SlowPass()
    duty = PeriodicDuty(
        "sweep", slow, interval=3600, clock=lambda: clock[0], store=store, owner="host-a", lease_seconds=LEASE
    )
    running = asyncio.create_task(duty.run_pass())
    try:
        await eventually(lambda: asyncio.sleep(0, slow.steps == ["started"]))
        clock[0] = NOW + 60  # the pass has now run far longer than the lease it took at NOW
        await eventually(lambda: asyncio.sleep(0, ("host-a", NOW + 60, True) in takes))
        assert not await store.take_duty_lease("duty:sweep", owner="host-b", now=NOW + 60 + LEASE / 2, seconds=LEASE)
        slow.finish.set()
        assert await running == 1
    finally:
        slow.finish.set()
        await asyncio.gather(running, return_exceptions=True)
    # Released after the pass: the next host need not wait for the expiry.
    assert await store.take_duty_lease("duty:sweep", owner="host-b", now=NOW + 60 + LEASE / 2, seconds=LEASE)


async def test_a_pass_whose_lease_another_host_took_stops_there(store) -> None:
    slow = SlowPass()
    duty = PeriodicDuty(
        "outbox", slow, interval=3600, clock=lambda: NOW, store=store, owner="host-a", lease_seconds=LEASE
    )
    running = asyncio.create_task(duty.run_pass())
    try:
        await eventually(lambda: asyncio.sleep(0, slow.steps == ["started"]))
        # host-a stalled past its lease (a paused VM, a blocked loop), and host-b took the duty over.
        assert await store.take_duty_lease("duty:outbox", owner="host-b", now=NOW + 60, seconds=120)
        await eventually(lambda: asyncio.sleep(0, running.done()))
        assert running.result() is None and slow.steps == ["started"]  # stopped, not finished
        assert not await store.take_duty_lease("duty:outbox", owner="host-c", now=NOW + 61, seconds=LEASE)
    finally:
        slow.finish.set()
        await asyncio.gather(running, return_exceptions=True)
