"""A background duty: one pass at start, on wake-ups and every interval, and at most one host at a time."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from reviewer_app.store.base import Store

log = logging.getLogger(__name__)


class PeriodicDuty:
    """Runs ``one_pass`` in a loop. With a store and an owner, each pass holds the duty's lease in the database, so
    hosts sharing a PostgreSQL database never run the same pass at the same time (a pass skipped for that reason
    runs on the next wake-up or interval)."""

    def __init__(
        self,
        name: str,
        one_pass: Callable[[], Awaitable[int]],
        *,
        interval: float,
        clock: Callable[[], float],
        store: Store | None = None,
        owner: str | None = None,
        lease_seconds: float = 120.0,
    ) -> None:
        self.name = name
        self.one_pass = one_pass
        self.interval = interval
        self.clock = clock
        self.store = store
        self.owner = owner
        self.lease_seconds = lease_seconds
        self._wake = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def run_pass(self) -> int | None:
        """One pass; None when another host holds the duty right now."""
        if self.store is None or self.owner is None:
            return await self.one_pass()
        duty = f"duty:{self.name}"
        if not await self.store.take_duty_lease(duty, owner=self.owner, now=self.clock(), seconds=self.lease_seconds):
            return None
        try:
            return await self.one_pass()
        finally:
            await self.store.release_duty_lease(duty, owner=self.owner, now=self.clock())

    async def run(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self.run_pass()
            except Exception:  # noqa: BLE001 - the duty must outlive any one failure
                log.exception("%s pass failed", self.name)
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancel that lands as the wake-up
            # fires, and this loop would then never end (Service.stop waits for it).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval):
                    await self._wake.wait()
