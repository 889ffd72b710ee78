"""What a runner gets for one attempt: the job, its lease, and fenced ways to record progress."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from reviewer_app.core.errors import LeaseLost
from reviewer_app.metrics import Metrics
from reviewer_app.store.base import Job, Lease, Store, Usage

Clock = Callable[[], float]


@dataclass
class JobContext:
    job: Job
    lease: Lease
    store: Store
    clock: Clock
    lost: asyncio.Event = field(default_factory=asyncio.Event)
    metrics: Metrics | None = None

    @property
    def attempt(self) -> int:
        return self.lease.attempt

    async def checkpoint(self, **fields: Any) -> None:
        """Save progress on the job, fenced by the lease; raises LeaseLost when another attempt owns it now."""
        self.ensure_held()
        if not await self.store.save_progress_if_lease_held(self.lease, now=self.clock(), **fields):
            self.lost.set()
            raise LeaseLost(f"job {self.job.id}: lease lost (attempt {self.lease.attempt})")

    async def record_usage(self, usage: Usage) -> None:
        """Record model tokens on this attempt right away: what was paid for stays on record even after a crash."""
        if self.metrics is not None:
            self.metrics.usage(usage)  # paid for whether or not the lease is still held
        await self.store.record_usage_if_lease_held(self.lease, usage)

    def ensure_held(self) -> None:
        if self.lost.is_set():
            raise LeaseLost(f"job {self.job.id}: lease lost (attempt {self.lease.attempt})")


Runner = Callable[[JobContext], Awaitable[str]]
"""A runner returns the job's outcome in words on success, or raises an error from reviewer_app.core.errors."""
