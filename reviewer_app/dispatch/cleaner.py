"""The cleaner: finished jobs (with their attempts) and deliveries past the retention period are pruned, and so
are processes of the worker registry gone for a day."""

from __future__ import annotations

import logging

from reviewer_app.dispatch.context import Clock
from reviewer_app.store.base import Store

log = logging.getLogger(__name__)

DAY = 86400.0
GONE_WORKERS_KEPT = DAY  # a process gone without a word stays listed (as gone) this long after its last heartbeat


class Cleaner:
    """Deletes in small transactions, so admission and claims never wait behind one long delete. The service runs
    ``run_once`` as a periodic duty every ``interval`` seconds, on every host (pruning twice is harmless)."""

    def __init__(
        self, store: Store, *, retention_seconds: float, clock: Clock, interval: float = 3600.0, batch: int = 500
    ) -> None:
        self.store = store
        self.retention_seconds = retention_seconds
        self.clock = clock
        self.interval = interval
        self.batch = batch
        self.pruned_total = 0

    async def run_once(self) -> int:
        """Prune everything older than the retention period, one batch per transaction; the rows removed."""
        before = self.clock() - self.retention_seconds
        removed = 0
        while True:
            n = await self.store.prune(before, self.batch)
            removed += n
            if n < self.batch:  # each table gave fewer than a batch: nothing older is left
                break
        forgotten = await self.store.prune_workers(self.clock() - GONE_WORKERS_KEPT)
        if forgotten:
            log.info("forgot %d process(es) of the worker registry gone for over a day", forgotten)
        if removed:
            self.pruned_total += removed
            log.info(
                "pruned %d finished job(s) and deliveries older than %.1f days", removed, self.retention_seconds / DAY
            )
        return removed
