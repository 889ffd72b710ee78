"""The rescuer: jobs whose lease expired (crash, kill -9, hung process) become claimable again."""

from __future__ import annotations

import logging

from reviewer_app.core.states import JobState
from reviewer_app.dispatch.context import Clock
from reviewer_app.metrics import Metrics
from reviewer_app.store.base import Store

log = logging.getLogger(__name__)


class Rescuer:
    def __init__(self, store: Store, *, clock: Clock, metrics: Metrics | None = None) -> None:
        self.store = store
        self.clock = clock
        self.metrics = metrics
        self.rescued_total = 0

    async def run_once(self) -> list[int]:
        rescued = await self.store.rescue_expired(now=self.clock())
        if rescued:
            self.rescued_total += len(rescued)
            log.warning("rescued %d job(s) whose lease expired: %s", len(rescued), rescued)
            if self.metrics is not None:
                self.metrics.leases_rescued.inc(len(rescued))
                for job_id in rescued:  # rare: only on a crash, and only these few rows
                    job = await self.store.get_job(job_id)
                    if job is not None and job.state == JobState.FAILED:
                        self.metrics.jobs_failed.inc()
        return rescued
