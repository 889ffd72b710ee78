"""A worker's side of a job, each write fenced by its lease: claim, renew, finish (alone or together), retry,
progress checkpoints, a skip, usage; and the rescue of expired leases."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from reviewer_app.core.cancel_reasons import cancel_reason
from reviewer_app.core.states import JobState
from reviewer_app.store import statements as s
from reviewer_app.store.procedures.steps import Count, Many, Procedure, Rows, Wake
from reviewer_app.store.records import PROGRESS_COLUMNS, VERIFICATION, Job, Lease, Usage


def usage_params(u: Usage | None) -> tuple[str | None, int, int, int, int]:
    if u is None:
        return (None, 0, 0, 0, 0)
    return (u.model or None, u.input_tokens, u.output_tokens, u.cache_creation_tokens, u.cache_read_tokens)


def claim(*, owner: str, limit: int, now: float, lease_seconds: float, queue: str) -> Procedure[list[Any]]:
    """The claimed rows of ``queue``, whole (a worker starts without reading its job again), in id order. The caller makes leases
    of them after the commit: on SQLite that keeps the parsing out of the writer thread, the drain's serial part."""
    rows = yield Rows(s.CLAIM_QUEUED, (owner, now + lease_seconds, now, limit, queue))
    rows = sorted(rows, key=lambda r: r["id"])
    if rows:
        yield Many(s.RECORD_CLAIMED_ATTEMPTS, [(r["id"], r["attempts"], owner, r["lease_token"], now) for r in rows])
    return rows


def lease_of(row: Any, owner: str) -> Lease:
    """A claimed row as the worker's lease, the job with it."""
    return Lease(row["id"], row["lease_token"], owner, row["attempts"], row["lease_expires_at"], Job.from_row(row))


def renew_leases(leases: Sequence[Lease], *, now: float, lease_seconds: float) -> Procedure[set[str]]:
    held = json.dumps([{"id": le.job_id, "token": le.token} for le in leases])
    rows = yield Rows(s.RENEW_MANY_IF_LEASE_HELD, (now + lease_seconds, now, held))
    return {r[0] for r in rows}


def renew_lease(lease: Lease, *, now: float, expires: float) -> Procedure[bool]:
    return (yield Count(s.RENEW_IF_LEASE_HELD, (expires, now, lease.job_id, lease.token))) == 1


@dataclass(frozen=True, slots=True)
class Finish:
    """One fenced finish: the job leaves `running` for ``state`` only while ``lease`` still holds it."""

    lease: Lease
    state: str
    outcome: str
    error: str | None
    now: float
    usage: tuple[str | None, int, int, int, int]

    @property
    def cancel_reason(self) -> str | None:
        return cancel_reason(self.outcome).value if self.state == JobState.CANCELLED else None


def finish(item: Finish) -> Procedure[bool]:
    """One fenced finish, on any dialect: the job leaves `running` only while the lease holds; the attempt's history
    row is closed with the state, or with 'lease_lost'. True if the lease still held the job."""
    lease = item.lease
    done = (
        yield Count(
            s.FINISH_IF_LEASE_HELD,
            (item.state, item.outcome, item.cancel_reason, item.error, item.now, item.now, lease.job_id, lease.token),
        )
    ) == 1
    yield Count(
        s.FINISH_ATTEMPT, (item.now, item.state if done else "lease_lost", item.error, *item.usage, lease.token)
    )
    return done


def finish_together(batch: Sequence[Finish]) -> Procedure[set[str]]:
    """Every finish of ``batch`` together: one statement on PostgreSQL (one round trip for all), two on SQLite (the
    jobs, then their attempts); each job leaves `running` only under its own token. The tokens that held their job.
    On SQLite a single finish, or a batch naming one job twice (a stale lease beside the current one), goes one at a
    time."""
    batch = sorted(batch, key=lambda f: f.lease.job_id)  # rows locked in id order on every host
    rows = [
        (f.lease.job_id, f.lease.token, f.state, f.outcome, f.error, f.now, *f.usage, f.cancel_reason) for f in batch
    ]
    tokens = yield Rows(s.FINISH_JOBS_AND_ATTEMPTS, [list(c) for c in zip(*rows, strict=True)])
    if tokens is not None:
        return {r[0] for r in tokens}
    if len(batch) == 1 or len({f.lease.job_id for f in batch}) < len(batch):
        held: set[str] = set()
        for f in batch:
            if (yield from finish(f)):
                held.add(f.lease.token)
        return held
    finished = yield Rows(s.FINISH_JOBS_FROM_JSON, (orjson.dumps(rows).decode(),))
    ids = {r[0] for r in finished}
    closed = [
        (f.lease.token, f.now, f.state if f.lease.job_id in ids else "lease_lost", f.error, *f.usage) for f in batch
    ]
    yield Count(s.CLOSE_ATTEMPTS_FROM_JSON, (orjson.dumps(closed).decode(),))
    return {f.lease.token for f in batch if f.lease.job_id in ids}


def retry(
    lease: Lease, *, now: float, at: float, error: str, counts_attempt: bool, usage: Usage | None
) -> Procedure[bool]:
    held = (
        yield Count(s.REQUEUE_IF_LEASE_HELD, (at, error, 0 if counts_attempt else 1, now, lease.job_id, lease.token))
    ) == 1
    outcome = ("retry" if counts_attempt else "deferred") if held else "lease_lost"
    if held and at > now and (yield Count(s.WAKE_IF_SETTLED_DURING_ATTEMPT, (now, lease.job_id, lease.token, now))):
        at = now  # its batch answered while it was deciding to wait for it
    yield Count(s.FINISH_ATTEMPT, (now, outcome, error, *usage_params(usage), lease.token))
    if held and at <= now:
        yield Wake(other_hosts=True)  # handed back for another host to take now (shutdown)
    return held


def progress_update(lease: Lease, *, now: float, fields: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
    """The progress checkpoint as one statement (the columns a worker may set), written only while this attempt
    holds the lease; an unknown column is refused before anything runs."""
    unknown = set(fields) - PROGRESS_COLUMNS
    if unknown:
        raise ValueError(f"not a progress column: {sorted(unknown)}")
    cols = sorted(fields)
    values = [fields[c].to_json() if c in ("answer", "details") else fields[c] for c in cols]
    assignments = ", ".join(f"{c} = ?" for c in cols)
    query = f"UPDATE jobs SET {assignments}, updated_at = ? WHERE id = ? AND lease_token = ? AND state = 'running'"
    return query, (*values, now, lease.job_id, lease.token)


def skip_if_unpoked(lease: Lease, *, pokes: int, now: float, outcome: str) -> Procedure[bool]:
    """End an automatic job skipped, only while ``lease`` holds it and no event for its revision came since it read
    ``pokes``; its attempt is closed with it."""
    why = cancel_reason(outcome).value
    done = (
        yield Count(s.SKIP_IF_LEASE_HELD_AND_UNPOKED, (outcome, why, now, now, lease.job_id, lease.token, pokes))
    ) == 1
    if done:
        yield Count(s.FINISH_ATTEMPT, (now, JobState.CANCELLED.value, None, *usage_params(None), lease.token))
    return done


def record_usage(lease: Lease, usage: Usage) -> Procedure[bool]:
    """Tokens on the attempt: a verification's in its own columns, everything else in the attempt's."""
    statement = s.ADD_ATTEMPT_VERIFY_USAGE if usage.kind == VERIFICATION else s.ADD_ATTEMPT_USAGE
    return (yield Count(statement, (*usage_params(usage), lease.token))) == 1


def rescue_expired(*, now: float) -> Procedure[list[int]]:
    """Jobs whose lease expired back to the queue, or failed when no attempt is left."""
    rescued: list[int] = []
    requeued = False
    for job_id, token, attempts, max_attempts in (yield Rows(s.SELECT_EXPIRED_FOR_RESCUE, (now,))):
        error = f"lease expired during attempt {attempts} (worker crashed, was killed or hung)"
        if attempts >= max_attempts:
            changed = yield Count(s.EXPIRE_TO_FAILED, (error, f"failed: {error}", now, now, job_id, token))
        else:
            changed = yield Count(s.EXPIRE_TO_QUEUE, (now, error, now, job_id, token))
            requeued = True
        if changed == 1:
            rescued.append(job_id)
            yield Count(s.FINISH_ATTEMPT, (now, "lease_expired", error, None, 0, 0, 0, 0, token))
    if requeued:
        yield Wake(other_hosts=True)
    return rescued


__all__ = [
    "usage_params",
    "claim",
    "lease_of",
    "renew_leases",
    "renew_lease",
    "Finish",
    "finish",
    "finish_together",
    "retry",
    "progress_update",
    "skip_if_unpoked",
    "record_usage",
    "rescue_expired",
]
