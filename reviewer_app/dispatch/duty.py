"""A background duty: one pass at start, on wake-ups and every interval, and at most one host at a time."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from reviewer_app.store.base import Store, StoreUnavailable

log = logging.getLogger(__name__)

# Short and renewed every third: a pass that stalls (GitHub slow, a rate limit) keeps its lease as long as its process
# beats, and a process that died without releasing it (kill -9) holds it at most this long; less when the registry
# knows it dead (dispatch/registry.py: its host restarted, or its heartbeat stopped).
DUTY_LEASE_SECONDS = 30.0


async def run_under_duty_lease(
    store: Store,
    duty: str,
    one_pass: Callable[[], Awaitable[int]],
    *,
    owner: str,
    clock: Callable[[], float],
    seconds: float = DUTY_LEASE_SECONDS,
) -> int | None:
    """Run ``one_pass`` while ``owner`` holds the lease on ``duty``, renewed every third of ``seconds``; None when
    another host holds it, or took it over during the pass.

    A pass may run longer than the lease (a sweep of many repositories, GitHub slow or rate limiting), so the lease
    is renewed while it runs. When a renewal finds another owner (this host stalled past the expiry), or the
    database cannot be reached until the last renewal runs out, the pass is cancelled: the other host's pass does
    the rest, and the two never run side by side for longer than a renewal interval.
    """
    if not await store.take_duty_lease(duty, owner=owner, now=clock(), seconds=seconds):
        return None
    work = asyncio.ensure_future(one_pass())
    renewer = asyncio.ensure_future(_renew_until_lost(store, duty, owner=owner, clock=clock, seconds=seconds))
    try:
        await asyncio.wait({work, renewer}, return_when=asyncio.FIRST_COMPLETED)
        if work.done():
            return work.result()
        log.warning("%s: the duty's lease was lost during a pass; stopping the pass (another host carries on)", duty)
        return None
    finally:
        for task in (work, renewer):
            task.cancel()
        await asyncio.gather(work, renewer, return_exceptions=True)
        with contextlib.suppress(StoreUnavailable):
            await store.release_duty_lease(duty, owner=owner, now=clock())


async def _renew_until_lost(store: Store, duty: str, *, owner: str, clock: Callable[[], float], seconds: float) -> None:
    """Re-take the lease every third of ``seconds`` (its holder may); return once it is no longer ours."""
    expires = clock() + seconds
    while True:
        await asyncio.sleep(seconds / 3)
        now = clock()
        try:
            if not await store.take_duty_lease(duty, owner=owner, now=now, seconds=seconds):
                return
            expires = now + seconds
        except StoreUnavailable as exc:
            if clock() >= expires:
                return
            log.warning("%s: renewing the duty's lease failed, retrying: %s", duty, exc)


class Slots:
    """A queue's slots in this process: at most ``size`` holders at once. The housekeeping passes share one set, apart
    from the jobs' slots (core/queues.py), so a long sweep never holds a review or an answer back, nor they it."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.running = 0
        self._free = asyncio.Semaphore(size)

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        async with self._free:
            self.running += 1
            try:
                yield
            finally:
                self.running -= 1


class PeriodicDuty:
    """Runs ``one_pass`` in a loop. With a store and an owner, each pass holds the duty's lease in the database, so
    hosts sharing a PostgreSQL database never run the same pass at the same time (a pass skipped for that reason
    runs on the next wake-up, or after ``busy_retry`` seconds when that is sooner than the interval)."""

    def __init__(
        self,
        name: str,
        one_pass: Callable[[], Awaitable[int]],
        *,
        interval: float,
        clock: Callable[[], float],
        store: Store | None = None,
        owner: str | None = None,
        lease_seconds: float = DUTY_LEASE_SECONDS,
        busy_retry: float | None = None,
        slots: Slots | None = None,
    ) -> None:
        self.name = name
        self.slots = slots
        self.one_pass = one_pass
        self.interval = interval
        self.clock = clock
        self.store = store
        self.owner = owner
        self.lease_seconds = lease_seconds
        self.busy_retry = interval if busy_retry is None else min(interval, busy_retry)
        self._wake = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def run_pass(self) -> int | None:
        """One pass, in a housekeeping slot when the duty has ``slots`` (waited for before the duty's lease is taken);
        None when another host holds the duty right now."""
        if self.slots is None:
            return await self._leased_pass()
        async with self.slots.held():
            return await self._leased_pass()

    async def _leased_pass(self) -> int | None:
        if self.store is None or self.owner is None:
            return await self.one_pass()
        return await run_under_duty_lease(
            self.store,
            f"duty:{self.name}",
            self.one_pass,
            owner=self.owner,
            clock=self.clock,
            seconds=self.lease_seconds,
        )

    async def run(self) -> None:
        while True:
            self._wake.clear()
            delay = self.interval
            try:
                if await self.run_pass() is None:
                    delay = self.busy_retry
            except StoreUnavailable as exc:
                log.warning("%s: database unavailable, will try again: %s", self.name, exc)
            except Exception:  # noqa: BLE001 - the duty must outlive any one failure
                log.exception("%s pass failed", self.name)
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancel that lands as the wake-up
            # fires, and this loop would then never end (Service.stop waits for it).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()
