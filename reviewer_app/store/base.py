"""The Store protocol: every durable thing the app does to its jobs, independent of the database engine."""

from __future__ import annotations

import abc
import os
import secrets
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

import orjson

from reviewer_app.core.admission import CancelPR, Decision, Enqueue, Ignore
from reviewer_app.core.cancel_reasons import CancelReason
from reviewer_app.core.job_records import JobDetails, StoredAnswer, assemble
from reviewer_app.core.states import JobState


class StoreUnavailable(Exception):
    """The database refused or could not take the write (locked past its timeout, disk full, unreachable)."""


@dataclass(frozen=True)
class Job:
    id: int
    revision_key: str
    repo_id: int
    repo_full_name: str
    installation_id: int | None
    pr_number: int
    head_sha: str
    trigger: str
    priority: int
    state: JobState
    details: JobDetails
    attempts: int
    max_attempts: int
    next_attempt_at: float
    lease_owner: str | None
    lease_token: str | None
    lease_expires_at: float | None
    last_error: str | None
    superseded_by: int | None
    outcome: str | None
    check_run_id: int | None
    check_run_status: str | None
    review_id: int | None
    publish_intent_at: float | None
    answer: StoredAnswer | None
    event_at: float | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    updated_at: float
    check_run_claim: str | None = None  # who took the claim to create the check run (a run may exist unrecorded)
    cancel_reason: CancelReason | None = None  # why, when the job was cancelled
    pokes: int = 0  # automatic events for this revision admitted while the job ran (see SKIP_IF_LEASE_HELD_AND_UNPOKED)
    before_sha: str | None = None  # the head this job's head replaced, as a push named it (ordering, stale reads)

    @classmethod
    def from_row(cls, row: Any) -> Job:
        """A job from a row (sqlite3.Row or asyncpg.Record). Every claim builds one per job, so a row in the fields'
        order (statements.JOB_COLUMNS) is taken as it comes; any other is read by name, the columns an older query
        lacks taking their defaults."""
        values = list(row)
        names = tuple(row.keys())
        if names != JOB_FIELDS:
            by_name = dict(zip(names, values, strict=True))
            values = [by_name.get(n, _OPTIONAL[n]) if n in _OPTIONAL else by_name[n] for n in JOB_FIELDS]
        values[_STATE] = JobState(values[_STATE])
        values[_DETAILS] = JobDetails.from_json(values[_DETAILS])
        values[_ANSWER] = StoredAnswer.from_json(values[_ANSWER])
        values[_CANCEL_REASON] = CancelReason(values[_CANCEL_REASON]) if values[_CANCEL_REASON] else None
        values[_POKES] = values[_POKES] or 0
        return assemble(cls, dict(zip(JOB_FIELDS, values, strict=True)))


JOB_FIELDS = tuple(f.name for f in fields(Job))
_OPTIONAL = {
    "check_run_claim": None,
    "cancel_reason": None,
    "pokes": 0,
    "before_sha": None,
}  # columns later migrations added
_STATE, _DETAILS, _ANSWER, _CANCEL_REASON, _POKES = (
    JOB_FIELDS.index(n) for n in ("state", "details", "answer", "cancel_reason", "pokes")
)


@dataclass(frozen=True)
class Lease:
    """What a worker holds while it runs a job; every write it makes names this token."""

    job_id: int
    token: str
    owner: str
    attempt: int
    expires_at: float
    job: Job | None = field(default=None, compare=False, repr=False)  # the claimed row, when the store returns it


@dataclass(frozen=True)
class Attempt:
    job_id: int
    attempt: int
    lease_owner: str
    started_at: float
    finished_at: float | None
    outcome: str | None
    error: str | None
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0


@dataclass(frozen=True)
class Delivery:
    """One webhook delivery as it arrived: the key that makes a redelivery a no-op."""

    delivery_id: str
    event: str
    action: str | None


@dataclass(frozen=True)
class AdmitResult:
    outcome: str  # "enqueued", "duplicate-delivery", "duplicate-revision", "cancelled", "ignored"
    job_id: int | None = None
    superseded: tuple[int, ...] = ()
    cancelled: tuple[int, ...] = ()
    reason: str = ""
    installation_gone: int | None = None

    @property
    def created(self) -> bool:
        return self.outcome == "enqueued"


@dataclass(frozen=True)
class Usage:
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0


@dataclass(frozen=True)
class Finding:
    """One inline finding the app posted on a pull request (migration 0009): where it sat, by content, and its thread.
    ``before`` and ``after`` are the normalised lines around the commented one (core/findings.py)."""

    repo_id: int
    pr_number: int
    job_id: int
    review_id: int | None
    head_sha: str
    path: str
    line: int
    line_text: str
    before: tuple[str, ...]
    after: tuple[str, ...]
    severity: str
    title: str
    body_digest: str
    comment_id: int | None = None
    thread_id: str | None = None
    state: str = "open"  # or "resolved": the app resolved its thread (the code changed)
    id: int | None = None  # None until stored

    @classmethod
    def from_row(cls, row: Any) -> Finding:
        return cls(
            repo_id=row["repo_id"],
            pr_number=row["pr_number"],
            job_id=row["job_id"],
            review_id=row["review_id"],
            head_sha=row["head_sha"],
            path=row["path"],
            line=row["line"],
            line_text=row["line_text"],
            before=tuple(orjson.loads(row["before_lines"])),
            after=tuple(orjson.loads(row["after_lines"])),
            severity=row["severity"],
            title=row["title"],
            body_digest=row["body_digest"],
            comment_id=row["comment_id"],
            thread_id=row["thread_id"],
            state=row["state"],
            id=row["id"],
        )


@dataclass(frozen=True)
class BatchRequest:
    """One model request sent through Message Batches for a part of a job's review, and what the batch reported."""

    custom_id: str
    job_id: int
    part_key: str
    batch_id: str
    model: str
    state: str  # pending, succeeded, errored, expired, canceled, withdrawn
    result: str | None  # the model's Message as JSON, when succeeded
    error: str | None
    submitted_at: float
    ended_at: float | None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0


@dataclass
class QueueStats:
    by_state: dict[str, int] = field(default_factory=dict)
    oldest_pending_created_at: float | None = None
    expired_leases: int = 0
    awaiting_reconciliation: int = 0


@dataclass(frozen=True)
class WorkerInfo:
    """One process running against the database, as it registers itself (a row of the workers table)."""

    id: str  # its lease owner name (new_owner_id): the running jobs it holds have jobs.lease_owner = id
    host: str
    pid: int
    role: str  # "serve", "serve --no-worker" or "worker"
    version: str
    slots: int  # job slots (0: it runs no jobs)
    lease_seconds: float  # its lease: a heartbeat older than this means the process is gone
    started_at: float
    heartbeat_at: float
    jobs_running: int = 0


@dataclass(frozen=True)
class HeldJob:
    """A running job as its lease holder's entry shows it: the rescuer hands it back at ``lease_expires_at``."""

    job_id: int
    repo: str
    pr_number: int
    lease_expires_at: float | None


@dataclass(frozen=True)
class WorkerStatus:
    """A registered process as seen at ``now``: alive, or gone with the jobs it held."""

    info: WorkerInfo
    gone: bool
    held: tuple[HeldJob, ...] = ()

    @property
    def rescued_at(self) -> float | None:
        """When the last of the jobs it held is rescued (its lease expires), if it held any."""
        expiries = [h.lease_expires_at for h in self.held if h.lease_expires_at is not None]
        return max(expiries) if expiries else None


def is_gone(info: WorkerInfo, now: float) -> bool:
    """A process whose heartbeat is older than its lease: its leases are expiring unrenewed too."""
    return info.heartbeat_at + info.lease_seconds < now


# Columns a worker may set on its own job while it holds the lease (progress checkpoints).
PROGRESS_COLUMNS = frozenset(
    {"check_run_id", "check_run_status", "review_id", "publish_intent_at", "answer", "details", "outcome", "head_sha"}
)


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


def new_owner_id(prefix: str = "worker") -> str:
    """A name for this process as a lease owner: readable in the attempts table, unique across restarts."""
    return f"{prefix}-{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


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

    async def claim(self, *, owner: str, limit: int, now: float, lease_seconds: float) -> list[Lease]:
        """Atomically lease up to ``limit`` eligible queued jobs to ``owner``, counting the attempt."""
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

    async def next_wakeup(self, *, now: float) -> float | None:
        """When the earliest queued job becomes eligible, or None when nothing is queued."""
        ...

    async def jobs_needing_check_sync(self, *, limit: int = 50) -> list[Job]:
        """Jobs whose check run does not show their current phase yet."""
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

    async def pending_effects(self, *, limit: int = 50) -> list[dict[str, Any]]: ...
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
        """Hold ``duty`` for up to ``seconds`` unless another owner holds it unexpired."""
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
    "Ignore",
    "Job",
    "Lease",
    "PROGRESS_COLUMNS",
    "QueueStats",
    "Store",
    "StoreUnavailable",
    "Usage",
    "WorkerInfo",
    "WorkerStatus",
    "new_owner_id",
]
