"""The records the store speaks in: a job, a worker's lease on it, its attempts, a delivery and what admitting it did,
model usage, the queue's counts, findings and Message Batches requests."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import orjson

from reviewer_app.core.cancel_reasons import CancelReason
from reviewer_app.core.job_records import JobDetails, StoredAnswer, assemble
from reviewer_app.core.states import JobState


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


# What model tokens were spent on: the review itself (and answers in threads), or the verification of its findings,
# metered apart (the attempt's verify_* columns; a batched verification's request key starts with "verify-").
REVIEW = "review"
VERIFICATION = "verification"


@dataclass(frozen=True)
class Usage:
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0
    kind: str = REVIEW


@dataclass
class QueueStats:
    by_state: dict[str, int] = field(default_factory=dict)
    oldest_pending_created_at: float | None = None
    expired_leases: int = 0
    awaiting_reconciliation: int = 0
    # Queued and running jobs per queue (core/queues.py): {"reviews": {"queued": 3, "running": 2}, ...}.
    pending_by_queue: dict[str, dict[str, int]] = field(default_factory=dict)


# Columns a worker may set on its own job while it holds the lease (progress checkpoints).
PROGRESS_COLUMNS = frozenset(
    {
        "check_run_id",
        "check_run_status",
        "review_id",
        "publish_intent_at",
        "answer",
        "details",
        "outcome",
        "head_sha",
        "installation_id",  # learned by the gate when the event named none (review/installation.py)
    }
)


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
