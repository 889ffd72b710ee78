"""What a runner gets for one attempt: the job, its lease, and fenced ways to record progress."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from reviewer_app.core.errors import LeaseLost
from reviewer_app.metrics import Metrics
from reviewer_app.store.base import Job, Lease, Store, Usage

Clock = Callable[[], float]
T = TypeVar("T")


@dataclass
class JobContext:
    job: Job
    lease: Lease
    store: Store
    clock: Clock
    lost: asyncio.Event = field(default_factory=asyncio.Event)
    metrics: Metrics | None = None
    # GitHub writes of this attempt that may have reached GitHub (see write_through): while one is unfinished, no
    # other attempt of the job may start, on any host.
    writing: set[asyncio.Future[Any]] = field(default_factory=set)

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

    async def write_through(self, write: Awaitable[T]) -> T:
        """A write that may reach GitHub, seen through even when the runner is cancelled (a lost lease, shutdown):
        shielded, and known to the dispatcher, which waits for it before it hands the job back."""
        task = asyncio.ensure_future(write)
        self.writing.add(task)
        task.add_done_callback(self.writing.discard)
        return await asyncio.shield(task)

    def ensure_held(self) -> None:
        if self.lost.is_set():
            raise LeaseLost(f"job {self.job.id}: lease lost (attempt {self.lease.attempt})")


Runner = Callable[[JobContext], Awaitable[str]]
"""A runner returns the job's outcome in words on success, or raises an error from reviewer_app.core.errors."""
