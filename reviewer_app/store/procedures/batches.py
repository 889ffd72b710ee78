"""Message Batches: a batch's report on a request settled once (its job woken), and the requests of ended jobs
withdrawn."""

from __future__ import annotations

from reviewer_app.store import statements as s
from reviewer_app.store.procedures.leases import usage_params
from reviewer_app.store.procedures.steps import Count, Procedure, Row, Rows, Wake
from reviewer_app.store.records import Usage


def settle_batch_request(
    custom_id: str, *, state: str, result: str | None, error: str | None, usage: Usage | None, now: float
) -> Procedure[int | None]:
    """Record a batch's report on one request (once) and wake its job when the request was still pending; the job's
    id, or None when the request was reported before or is not ours."""
    tokens = usage_params(usage)[1:]
    yield Row(s.LOCK_JOB_OF_BATCH_REQUEST, (custom_id,))
    row = yield Row(s.SETTLE_BATCH_REQUEST_IF_OPEN, (state, result, error, now, *tokens, custom_id))
    if row is None:
        return None
    job_id, settled_state = row[0], row[1]
    if settled_state == state and (yield Count(s.WAKE_QUEUED_JOB, (now, now, job_id, now))) == 1:
        yield Wake()
    return int(job_id)


def withdraw_requests_of_ended_jobs() -> Procedure[list[str]]:
    """Withdraw the pending requests of jobs that ended while batched; the batches left with no pending request
    (nothing of theirs will be used: worth cancelling)."""
    touched = sorted({r[0] for r in (yield Rows(s.WITHDRAW_REQUESTS_OF_ENDED_JOBS))})
    idle: list[str] = []
    for batch_id in touched:
        if (yield Row(s.PENDING_REQUESTS_OF_BATCH, (batch_id,)))[0] == 0:
            idle.append(batch_id)
    return idle


__all__ = ["settle_batch_request", "withdraw_requests_of_ended_jobs"]
