"""The Store protocol: every durable thing the app does to its jobs, independent of the database engine.

The app imports the store's records from here too: they are defined in records.py (jobs, leases, attempts,
deliveries, usage, findings, batch requests) and workers.py (the worker registry)."""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

from reviewer_app.core.admission import CancelPR, Decision, Enqueue, Ignore
from reviewer_app.core.learnings import Learning, LearningDraft, LearningLimitReached
from reviewer_app.core.outcomes import Event, Fate
from reviewer_app.core.queues import JOB_QUEUES, REVIEWS
from reviewer_app.core.states import JobState
from reviewer_app.store.outcomes import FateEvent, ReviewRun
from reviewer_app.store.records import (
    JOB_FIELDS,
    PROGRESS_COLUMNS,
    REVIEW,
    VERIFICATION,
    AdmitResult,
    Attempt,
    BatchRequest,
    Delivery,
    Finding,
    Job,
    Lease,
    QueueStats,
    Usage,
)
from reviewer_app.store.workers import HeldJob, WorkerInfo, WorkerStatus, is_gone, new_owner_id


class StoreUnavailable(Exception):
    """The database refused or could not take the write (locked past its timeout, disk full, unreachable)."""


class FencedFinishes(abc.ABC):
    """The four terminal writes of a worker, each one fenced finish; each store writes ``_finish`` in its engine's
    terms (one statement per engine)."""

    @abc.abstractmethod
    async def _finish(
        self, lease: Lease, state: JobState, *, now: float, outcome: str, error: str | None, usage: Usage | None
    ) -> bool:
        """Finish the attempt in ``state`` if ``lease`` still holds it; False (nothing written) otherwise."""

    async def complete_if_lease_held(
        self, lease: Lease, *, now: float, outcome: str, usage: Usage | None = None
    ) -> bool:
        return await self._finish(lease, JobState.SUCCEEDED, now=now, outcome=outcome, error=None, usage=usage)

    async def fail_if_lease_held(self, lease: Lease, *, now: float, error: str, usage: Usage | None = None) -> bool:
        return await self._finish(lease, JobState.FAILED, now=now, outcome=f"failed: {error}", error=error, usage=usage)

    async def cancel_if_lease_held(self, lease: Lease, *, now: float, outcome: str, usage: Usage | None = None) -> bool:
        return await self._finish(lease, JobState.CANCELLED, now=now, outcome=outcome, error=None, usage=usage)

    async def supersede_if_lease_held(
        self, lease: Lease, *, now: float, outcome: str, usage: Usage | None = None
    ) -> bool:
        return await self._finish(lease, JobState.SUPERSEDED, now=now, outcome=outcome, error=None, usage=usage)


class Store(Protocol):
    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def ping(self) -> None:
        """Return when the database answers; raise StoreUnavailable when it does not."""
        ...

    async def migrations_pending(self) -> list[str]:
        """Names of the migrations this code knows that the database has not applied."""
        ...

    async def subscribe_wakeups(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` whenever work becomes claimable (on PostgreSQL: committed by any host)."""
        ...

    async def prune(self, before: float, batch: int) -> int:
        """Delete up to ``batch`` terminal jobs finished before ``before`` (with their attempts) and up to ``batch``
        deliveries received before it, in one transaction; the number of jobs and deliveries deleted."""
        ...

    async def admit(self, delivery: Delivery, decision: Decision, *, now: float, max_attempts: int) -> AdmitResult:
        """Apply an admission decision in one transaction; return only after it is committed."""
        ...

    async def claim(
        self, *, owner: str, limit: int, now: float, lease_seconds: float, queue: str = REVIEWS
    ) -> list[Lease]:
        """Atomically lease up to ``limit`` eligible queued jobs of ``queue`` to ``owner``, counting the attempt
        (core/queues.py: reviews and answers are claimed apart, each queue by its own free slots)."""
        ...

    async def renew_lease(self, lease: Lease, *, now: float, lease_seconds: float) -> float | None:
        """Extend a held lease; the new expiry, or None when the lease is lost."""
        ...

    async def renew_leases(self, leases: Sequence[Lease], *, now: float, lease_seconds: float) -> set[str]:
        """Extend every lease still held to ``now + lease_seconds`` in one transaction (each fenced by its own
        token); the tokens that were still held. A worker renews all its jobs with this, once per interval."""
        ...

    async def complete_if_lease_held(self, lease: Lease, *, now: float, outcome: str, usage: Usage | None) -> bool: ...
    async def retry_if_lease_held(
        self, lease: Lease, *, now: float, at: float, error: str, counts_attempt: bool, usage: Usage | None
    ) -> bool: ...
    async def fail_if_lease_held(self, lease: Lease, *, now: float, error: str, usage: Usage | None) -> bool: ...
    async def supersede_if_lease_held(self, lease: Lease, *, now: float, outcome: str, usage: Usage | None) -> bool: ...
    async def cancel_if_lease_held(self, lease: Lease, *, now: float, outcome: str, usage: Usage | None) -> bool: ...
    async def save_progress_if_lease_held(self, lease: Lease, *, now: float, **fields: Any) -> bool: ...
    async def record_usage_if_lease_held(self, lease: Lease, usage: Usage) -> bool: ...

    async def rescue_expired(self, *, now: float) -> list[int]:
        """Make jobs whose lease expired claimable again (or failed, when no attempt is left)."""
        ...

    async def next_wakeup(self, *, now: float, queues: Sequence[str] = JOB_QUEUES) -> float | None:
        """When the earliest queued job of ``queues`` becomes eligible or the earliest lease (of any queue) expires,
        or None when there is neither."""
        ...

    async def jobs_needing_check_sync(self, *, limit: int = 50, skip: Sequence[int] = ()) -> list[Job]:
        """Jobs whose check run does not show their current phase yet, but those of the installations in ``skip``."""
        ...

    async def claim_check_run_creation(self, job_id: int, *, owner: str, now: float, seconds: float) -> bool:
        """Become the one creator of the job's check run for ``seconds`` (True), unless the job has one already or
        another owner's claim is still running (False)."""
        ...

    async def set_check_run_if_unchanged(
        self, job_id: int, *, state: JobState, attempts: int, check_run_id: int | None, key: str
    ) -> bool:
        """Record that the job's check run ``check_run_id`` (None: it has none) shows the phase ``key``, if the job is
        still in the ``state`` and ``attempts`` the writer read and has no other check run; False (nothing written)
        otherwise. A worker records its own check run with a lease-fenced progress write instead."""
        ...

    async def forget_check_run_status(self, job_id: int, *, check_run_id: int | None) -> None:
        """What the job's check run shows is not known (a write could not be recorded, and may have landed after a
        newer one): clear the key, so the sync shows the job's phase again; record ``check_run_id`` if it has none."""
        ...

    async def pending_effects(self, *, limit: int = 50, skip: Sequence[int] = ()) -> list[dict[str, Any]]:
        """Effects still to send, oldest first, but those of the installations in ``skip``."""
        ...

    async def mark_effect(self, effect_id: int, *, now: float, error: str | None, done: bool) -> None: ...
    async def installation_active(self, installation_id: int) -> bool: ...
    async def usage_by_repo(self, *, since: float) -> list[dict[str, Any]]:
        """Model tokens per repository, model and way of asking since ``since``: one dict per (repo, model, batched)
        with ``repo``, ``model``, ``batched`` (bool: through Message Batches, else interactive), ``jobs``,
        ``input_tokens``, ``output_tokens``, ``cache_creation_tokens`` and ``cache_read_tokens``; most tokens first."""
        ...

    async def record_batch_requests(
        self, job_id: int, *, batch_id: str, model: str, parts: Sequence[tuple[str, str]], now: float
    ) -> None:
        """The job's ``parts`` ((custom_id, part_key) pairs) were sent in Message Batch ``batch_id``."""
        ...

    async def batch_requests_of(self, job_id: int) -> list[BatchRequest]:
        """Every request the job sent through Message Batches, oldest first."""
        ...

    async def open_batches(self, *, limit: int = 1000) -> list[str]:
        """Batches with a request whose result was not reported yet."""
        ...

    async def open_requests_of_batch(self, batch_id: str) -> list[str]:
        """The custom_ids of ``batch_id`` whose result was not reported yet."""
        ...

    async def settle_batch_request(
        self, custom_id: str, *, state: str, result: str | None, error: str | None, usage: Usage | None, now: float
    ) -> int | None:
        """Record the batch's report on a request (the first report wins) and wake its job if it waited on it; the
        job id, or None when nothing was recorded."""
        ...

    async def withdraw_requests_of_ended_jobs(self) -> list[str]:
        """Withdraw pending requests whose job ended; the batches that have no pending request left."""
        ...

    async def last_reviewed_head(self, repo_id: int, pr_number: int) -> str | None:
        """The head of the PR's latest published review, for incremental reviews."""
        ...

    async def pull_of_head(self, repo_id: int, head_sha: str) -> int | None:
        """The PR number of the latest job for this head of the repository (a fork's check suite names none)."""
        ...

    async def skip_if_unpoked(self, lease: Lease, *, pokes: int, now: float, outcome: str) -> bool:
        """End the job cancelled with ``outcome`` (a skip) if ``lease`` holds it and its pokes are still ``pokes``;
        False (nothing written) otherwise."""
        ...

    async def record_published_review(self, job_id: int, review_id: int) -> None:
        """The job's review is on GitHub: record its id whatever became of the lease (never fenced)."""
        ...

    # -- what the app posted on a pull request (findings), for the reviews of its later revisions
    async def record_findings(self, findings: Sequence[Finding], *, now: float) -> None:
        """Keep the findings a review posted; one already kept (same job, place and text) is left as it is."""
        ...

    async def open_findings(self, repo_id: int, pr_number: int) -> list[Finding]:
        """The PR's findings whose threads the app has not resolved, oldest first."""
        ...

    async def link_findings(self, links: Sequence[tuple[int, int | None, str | None]]) -> None:
        """(finding id, review comment id, review thread node id): fill in what was not known yet."""
        ...

    async def resolve_findings(self, ids: Sequence[int], *, now: float) -> None:
        """The app resolved these findings' threads on GitHub."""
        ...

    async def resolved_findings(self, repo_id: int, pr_number: int) -> int:
        """How many of the PR's threads the app resolved."""
        ...

    # -- what became of the findings (store/outcomes.py; the rule is core/outcomes.py)
    async def settle_findings(self, events: Sequence[FateEvent]) -> list[tuple[int, str]]:
        """Apply each event to its finding's fate in one transaction; (finding id, new fate) of those it changed."""
        ...

    async def settle_finding_of_comment(
        self, repo_id: int, comment_id: int, event: Event, *, at: float, source: str
    ) -> list[tuple[int, str]]: ...
    async def settle_open_at_close(self, repo_id: int, pr_number: int, fate: Fate, *, at: float, source: str) -> int:
        """The pull request was merged or closed: its findings still open get ``fate``; how many."""
        ...

    async def record_review_run(self, run: ReviewRun) -> None: ...
    async def outcome_findings(self, *, since: float, repo_id: int | None = None) -> list[dict[str, Any]]: ...
    async def review_runs(self, *, since: float, repo_id: int | None = None) -> list[ReviewRun]: ...
    async def job_usage(self, job_id: int) -> list[dict[str, Any]]: ...
    async def fate_counts(self) -> dict[str, int]: ...

    # -- what the repository's team taught the app (learnings) and its feedback on findings (store/learnings.py)
    async def add_learning(self, draft: LearningDraft, *, limit: int) -> Learning:
        """Keep a learning once per (repo, path glob, text), returning the one kept already; raises
        LearningLimitReached past the repository's ``limit``."""
        ...

    async def list_learnings(self, repo: str) -> list[Learning]: ...
    async def get_learning(self, repo: str, learning_id: int) -> Learning | None: ...
    async def remove_learning(self, repo: str, learning_id: int) -> bool: ...
    async def activate_learning(self, repo: str, learning_id: int) -> Learning | None:
        """A pending learning confirmed by a person with write access; None when none of that id is pending."""
        ...

    async def set_learning_ack(self, repo: str, source_url: str, comment_id: int) -> None: ...
    async def pending_learnings_with_ack(self, repo: str, *, limit: int) -> list[Learning]: ...
    async def mark_learnings_applied(self, ids: Sequence[int], at: datetime) -> None: ...
    async def learning_repos(self) -> list[tuple[str, str | None]]: ...
    async def repo_id_of_name(self, full_name: str) -> int | None: ...
    async def record_finding_feedback(
        self, repo: str, finding_key: str, signal: str, author: str, source_url: str | None, at: datetime
    ) -> None: ...
    async def finding_feedback_counts(self, repo: str) -> dict[str, tuple[int, int]]: ...
    async def recent_findings(self, repo_id: int, *, limit: int) -> list[Finding]:
        """The repository's newest findings (any pull request), newest first: what feedback keys name."""
        ...

    async def set_setting(self, key: str, value: str) -> None: ...
    async def get_setting(self, key: str) -> str | None: ...
    async def claim_once(self, key: str, value: str = "claimed") -> bool:
        """Set ``key`` to ``value`` unless it is set; whether this call set it (the first claimer, on any host)."""
        ...

    # -- missed-webhook recovery: every step is a guarded statement, so every host may run the duties at once.
    async def deliveries_to_recover(self, guids: Sequence[str]) -> set[str]:
        """Those of ``guids`` (X-GitHub-Delivery) neither admitted here nor already asked for again."""
        ...

    async def claim_redelivery(
        self, guid: str, delivery_id: int, *, owner: str, now: float, stale_before: float
    ) -> bool:
        """Claim the right to ask GitHub for ``guid`` once: False if it was admitted, asked for, or claimed
        by another owner since ``stale_before``."""
        ...

    async def mark_redelivery_requested(self, guid: str, *, owner: str, now: float, error: str | None) -> None:
        """Never ask for ``guid`` again (GitHub took the request, or refused it for good with ``error``)."""
        ...

    async def release_redelivery(self, guid: str, *, owner: str, error: str) -> None:
        """Give the claim back after a failure that may pass: a later pass asks again."""
        ...

    async def forget_redeliveries(self, before: float) -> int:
        """Drop what we asked for before ``before`` (GitHub no longer lists those deliveries)."""
        ...

    async def take_duty_lease(self, duty: str, *, owner: str, now: float, seconds: float) -> bool:
        """Hold ``duty`` for up to ``seconds`` unless another owner holds it unexpired (a holder that is gone from the
        worker registry, its heartbeat older than its lease, holds nothing)."""
        ...

    async def release_duty_lease(self, duty: str, *, owner: str, now: float) -> None: ...
    # -- the worker registry
    async def register_worker(self, info: WorkerInfo) -> None:
        """Register a process, or refresh its heartbeat and jobs running (the same write on every beat)."""
        ...

    async def deregister_worker(self, worker_id: str) -> None: ...
    async def workers(self, *, now: float) -> list[WorkerStatus]:
        """Every registered process, alive or gone, with the running jobs each holds."""
        ...

    async def prune_workers(self, before: float) -> int:
        """Forget processes whose last heartbeat is older than ``before``; the number forgotten."""
        ...

    async def void_holder(self, worker_id: str, *, now: float, jobs_at: float | None) -> int:
        """``worker_id`` is known dead, or stopping: end its duty leases, check-run creation claims and redelivery
        claims at ``now`` (so they are taken over at once) and its running jobs' leases at ``jobs_at`` (if sooner than
        they would; None: leave them), and list it gone; how many leases and claims were ended."""
        ...

    async def get_job(self, job_id: int) -> Job | None: ...
    async def list_jobs(
        self,
        *,
        states: Sequence[str] = (),
        repo: str | None = None,
        pr_number: int | None = None,
        limit: int = 100,
        before_id: int | None = None,
    ) -> list[Job]:
        """Jobs newest first (ids below ``before_id``: the next page)."""
        ...

    async def queue_now(self, *, now: float, finished_since: float) -> QueueStats:
        """``stats``, but of the finished jobs only those finished since ``finished_since`` are counted (a few
        indexed reads, however long the history the retention keeps)."""
        ...

    async def failed_since(self, since: float, *, limit: int) -> list[Job]:
        """Jobs that failed since ``since``, the newest failure first."""
        ...

    async def spend_by_day(self, *, since: float, until: float) -> list[dict[str, Any]]:
        """Model tokens per UTC day (``day``: days since the epoch), repository and model of the attempts started
        from ``since`` to before ``until``."""
        ...

    async def attempts_of(self, job_id: int) -> list[Attempt]: ...
    async def stats(self, *, now: float) -> QueueStats: ...
    async def cancel_job(self, job_id: int, *, now: float, reason: str) -> bool: ...
    async def retry_job(self, job_id: int, *, now: float) -> bool: ...


__all__ = [
    "AdmitResult",
    "Attempt",
    "BatchRequest",
    "CancelPR",
    "Decision",
    "Delivery",
    "Enqueue",
    "FateEvent",
    "FencedFinishes",
    "Finding",
    "HeldJob",
    "Ignore",
    "JOB_FIELDS",
    "Job",
    "Learning",
    "LearningDraft",
    "LearningLimitReached",
    "Lease",
    "PROGRESS_COLUMNS",
    "QueueStats",
    "REVIEW",
    "ReviewRun",
    "Store",
    "StoreUnavailable",
    "Usage",
    "VERIFICATION",
    "WorkerInfo",
    "WorkerStatus",
    "is_gone",
    "new_owner_id",
]
