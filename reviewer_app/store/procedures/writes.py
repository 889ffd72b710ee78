"""One-statement writes, and the few that read before they write: settings and once-only claims, the operator's
retry, a redelivery's claim, a dead process's leases ended, and retention."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reviewer_app.store import statements as s
from reviewer_app.store.procedures.steps import Count, Many, Procedure, Row, Rows, Wake


def changes(stmt: s.Statement, params: Sequence[Any]) -> Procedure[int]:
    """One statement; the rows it changed."""
    return (yield Count(stmt, params))


def many(stmt: s.Statement, params: Sequence[Sequence[Any]]) -> Procedure[None]:
    """One statement per parameter tuple, in one transaction."""
    yield Many(stmt, params)


def returns_row(stmt: s.Statement, params: Sequence[Any]) -> Procedure[bool]:
    """One guarded statement with ``RETURNING``: whether its guard let it write."""
    return (yield Row(stmt, params)) is not None


def claim_once(key: str, value: str) -> Procedure[bool]:
    """Whether this caller is the first to claim ``key`` (any host): one write of a kind happens once."""
    return (yield Count(s.CLAIM_COMMAND_IF_NEW, (key, value))) == 1


def set_setting(key: str, value: str) -> Procedure[None]:
    yield Count(s.UPSERT_SETTING, (key, value))
    yield Wake()  # a resumed queue has claimable work at once


def operator_retry(job_id: int, *, now: float) -> Procedure[bool]:
    retried = (yield Count(s.OPERATOR_RETRY, (now, now, job_id))) == 1
    if retried:
        yield Wake()
    return retried


def claim_redelivery(guid: str, delivery_id: int, *, owner: str, now: float, stale_before: float) -> Procedure[bool]:
    if (yield Row(s.SELECT_DELIVERY_ID, (guid,))) is not None:
        return False
    return (yield Row(s.CLAIM_REDELIVERY_IF_UNCLAIMED, (guid, delivery_id, owner, now, stale_before))) is not None


def void_holder(owner: str, *, now: float, jobs_at: float | None) -> Procedure[int]:
    """A process known dead holds nothing: its leases and claims end at ``now`` (its running jobs' leases at
    ``jobs_at``, when nothing it sent can still be in flight; None: as they are), and it is listed gone; how many were
    ended."""
    voided = yield Count(s.VOID_DUTY_LEASES_OF, (now, owner, now))
    voided += yield Count(s.VOID_CHECK_RUN_CLAIMS_OF, (now, owner, now))
    jobs = 0 if jobs_at is None else (yield Count(s.VOID_JOB_LEASES_OF, (jobs_at, owner, jobs_at)))
    voided += jobs + (yield Count(s.VOID_REDELIVERY_CLAIMS_OF, (owner,)))
    yield Count(s.END_REGISTRATION_LEASE, (owner,))
    if jobs:
        yield Wake()  # the dispatchers look again: the earliest lease to expire moved closer
    return voided


def prune(before: float, batch: int) -> Procedure[int]:
    """Up to ``batch`` terminal jobs finished before ``before`` (with their attempts), deliveries received before it
    and effects sent before it; the number deleted."""
    ids = [r[0] for r in (yield Rows(s.PRUNABLE_JOBS, (before, batch)))]
    removed = 0
    if ids:
        yield Count(s.forget_pruned_superseders(len(ids)), ids)
        yield Count(s.delete_pruned_attempts(len(ids)), ids)
        yield Count(s.delete_pruned_batch_requests(len(ids)), ids)
        removed += yield Count(s.delete_pruned_jobs(len(ids)), ids)
    removed += yield Count(s.PRUNE_DELIVERIES, (before, batch))
    return removed + (yield Count(s.PRUNE_FINISHED_EFFECTS, (before, batch)))


__all__ = [
    "changes",
    "many",
    "returns_row",
    "claim_once",
    "set_setting",
    "operator_retry",
    "claim_redelivery",
    "void_holder",
    "prune",
]
