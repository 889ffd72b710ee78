"""Prometheus metrics of one app: counters the code feeds as things happen, queue gauges read at scrape time."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from reviewer_app.core.outcomes import FATES
from reviewer_app.core.queues import queue_rows
from reviewer_app.core.states import JobState
from reviewer_app.store.base import QueueStats, Store, StoreUnavailable, Usage, WorkerStatus

# Reviews take seconds to minutes; queue waits range from instant to a long backlog.
REVIEW_BUCKETS = (1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0)
WAIT_BUCKETS = (0.1, 0.5, 1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 900.0, 1800.0, 3600.0)


class QueueCollector(Collector):
    """Gauges of the queue as the database sees it; ``refresh`` reads them, ``collect`` only reports them.

    Prometheus collectors are synchronous and the store is not, so a scrape first awaits ``refresh`` and then
    renders. When the database does not answer, the scrape still succeeds with ``reviewer_database_up 0`` and
    the process's own counters: an outage is exactly when they are wanted.
    """

    def __init__(self, store: Store, clock: Callable[[], float]) -> None:
        self.store = store
        self.clock = clock
        self._stats: QueueStats | None = None
        self._now = 0.0
        self._paused = False
        self._workers: list[WorkerStatus] = []
        self._fates: dict[str, int] = {}
        self._refreshed = False

    async def refresh(self) -> None:
        now = self.clock()
        self._refreshed = True
        try:
            stats = await self.store.stats(now=now)
            paused = await self.store.get_setting("queue_paused") == "1"
            workers = await self.store.workers(now=now)
            fates = await self.store.fate_counts()
        except StoreUnavailable:
            self._stats = None
            return
        self._stats, self._now, self._paused, self._workers = stats, now, paused, workers
        self._fates = fates

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        stats = self._stats
        if self._refreshed:
            yield GaugeMetricFamily(
                "reviewer_database_up", "1 when the database answered this scrape.", value=0 if stats is None else 1
            )
        if stats is None:
            return
        jobs = GaugeMetricFamily("reviewer_jobs", "Jobs in the database by state.", labels=["state"])
        for state in JobState:
            jobs.add_metric([state.value], stats.by_state.get(state.value, 0))
        yield jobs
        oldest = stats.oldest_pending_created_at
        yield GaugeMetricFamily(
            "reviewer_oldest_pending_job_age_seconds",
            "Age of the oldest queued or running job (0 when none is pending).",
            value=max(0.0, self._now - oldest) if oldest is not None else 0.0,
        )
        yield GaugeMetricFamily(
            "reviewer_expired_leases",
            "Running jobs whose lease has expired and that no rescuer has handed back yet.",
            value=stats.expired_leases,
        )
        yield GaugeMetricFamily(
            "reviewer_publications_awaiting_reconciliation",
            "Pending jobs that recorded the intent to publish but no review id: the next attempt reconciles them.",
            value=stats.awaiting_reconciliation,
        )
        yield GaugeMetricFamily(
            "reviewer_queue_paused", "1 while the queue is paused by an operator.", value=1 if self._paused else 0
        )
        processes = GaugeMetricFamily(
            "reviewer_processes",
            "Processes in the worker registry by role and status (gone: no heartbeat for longer than the lease).",
            labels=["role", "status"],
        )
        slots = GaugeMetricFamily("reviewer_process_slots", "Job slots of the processes alive now.")
        counted: dict[tuple[str, str], int] = {}
        for w in self._workers:
            key = (w.info.role, "gone" if w.gone else "alive")
            counted[key] = counted.get(key, 0) + 1
        for (role, status), n in sorted(counted.items()):
            processes.add_metric([role, status], n)
        slots.add_metric([], sum(w.info.slots for w in self._workers if not w.gone))
        yield processes
        yield slots
        yield from self._queues(stats)
        # A gauge, not a counter: a fate may be revised (a 👎 read after the merge but given before it turns an open
        # at merge into a dismissal), so a fate's total can go down, which a Prometheus counter must never do.
        fates = GaugeMetricFamily(
            "reviewer_findings_by_fate",
            "Published findings by fate (fixed, dismissed, open_at_merge, open_at_close, open), over the database.",
            labels=["fate"],
        )
        for fate in FATES:
            fates.add_metric([fate], self._fates.get(fate, 0))
        yield fates
        yield GaugeMetricFamily(
            "reviewer_jobs_held_by_gone_processes",
            "Running jobs whose lease holder is gone: the rescuer hands each back when its lease expires.",
            value=sum(len(w.held) for w in self._workers if w.gone),
        )

    def _queues(self, stats: QueueStats) -> Iterator[Metric]:
        """Each queue (core/queues.py): its jobs by state, and the slots and busy slots of the processes alive."""
        jobs = GaugeMetricFamily(
            "reviewer_queue_jobs", "Queued and running jobs per queue (reviews, answers).", labels=["queue", "state"]
        )
        slots = GaugeMetricFamily(
            "reviewer_queue_slots", "Slots per queue of the processes alive now.", labels=["queue"]
        )
        busy = GaugeMetricFamily(
            "reviewer_queue_slots_busy",
            "Busy slots per queue of the processes alive now, as of their last heartbeat.",
            labels=["queue"],
        )
        alive = [w.info.queues for w in self._workers if not w.gone]
        for row in queue_rows(stats.pending_by_queue, alive):
            if row.queued is not None:
                jobs.add_metric([row.queue, JobState.QUEUED.value], row.queued)
                jobs.add_metric([row.queue, JobState.RUNNING.value], row.running)
            slots.add_metric([row.queue], row.slots)
            busy.add_metric([row.queue], sum(q.get(row.queue, {}).get("running", 0) for q in alive))
        yield jobs
        yield slots
        yield busy


class Metrics:
    """Every metric of one app instance, on its own registry (tests build many apps in one process)."""

    def __init__(self, store: Store | None = None, *, clock: Callable[[], float] = time.time) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.queue = QueueCollector(store, clock) if store is not None else None
        if self.queue is not None:
            r.register(self.queue)
        self.leases_rescued = Counter(
            "reviewer_leases_rescued", "Expired leases the rescuer found and handed back (or failed).", registry=r
        )
        self.jobs_failed = Counter(
            "reviewer_jobs_failed",
            "Jobs this process moved to failed: a permanent error, or every attempt used up.",
            registry=r,
        )
        self.review_duration = Histogram(
            "reviewer_review_duration_seconds",
            "Run time of one attempt, by how the runner ended.",
            ["result"],
            buckets=REVIEW_BUCKETS,
            registry=r,
        )
        self.queue_wait = Histogram(
            "reviewer_queue_wait_seconds",
            "From admission to the job's first claim (started_at - created_at).",
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.webhooks = Counter(
            "reviewer_webhooks", "Webhook deliveries by event and outcome.", ["event", "outcome"], registry=r
        )
        self.github_requests = Counter(
            "reviewer_github_requests",
            "GitHub API requests by HTTP status ('error': no answer).",
            ["status"],
            registry=r,
        )
        self.model_tokens = Counter(
            "reviewer_model_tokens", "Model tokens paid for, by kind and model.", ["kind", "model"], registry=r
        )

    # -- hooks the rest of the app calls --------------------------------------------------------------------

    def github_response(self, status: int | None) -> None:
        self.github_requests.labels("error" if status is None else str(status)).inc()

    def usage(self, usage: Usage) -> None:
        model = usage.model or "unknown"
        for kind, n in (
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cache_creation", usage.cache_creation_tokens),
            ("cache_read", usage.cache_read_tokens),
        ):
            if n:
                self.model_tokens.labels(kind, model).inc(n)

    async def render(self) -> bytes:
        """The Prometheus text exposition, with the queue gauges read from the store just now."""
        if self.queue is not None:
            await self.queue.refresh()
        return generate_latest(self.registry)
