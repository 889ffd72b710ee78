"""The rescuer: jobs whose lease expired (crash, kill -9, hung process) become claimable again."""

from __future__ import annotations

import logging

from reviewer_app.dispatch.context import Clock
from reviewer_app.store.base import Store

log = logging.getLogger(__name__)


class Rescuer:
    def __init__(self, store: Store, *, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        self.rescued_total = 0

    async def run_once(self) -> list[int]:
        rescued = await self.store.rescue_expired(now=self.clock())
        if rescued:
            self.rescued_total += len(rescued)
            log.warning("rescued %d job(s) whose lease expired: %s", len(rescued), rescued)
        return rescued
