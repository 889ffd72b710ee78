"""The queue as people see it (the dashboard, the metrics, the admin CLI), and the operator's cancel and retry."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reviewer_app.core.states import JobEvent, JobState
from reviewer_app.store.statements.dialects import Dialects, Statement, numbered
from reviewer_app.store.statements.jobs import JOB_COLUMNS, LIVE_STATES, TERMINAL_STATES, source_states

_STATE_VALUES = frozenset(st.value for st in JobState)

# The partial index holding every job of one state: a list of that state reads it, not the whole history.
# Running jobs are few and may be old; the others are read newest first along the primary key, which finds a page
# of queued jobs (the newest) or of failed ones (a few in a hundred) soon enough.
_STATE_INDEX = {"running": "jobs_running"}


def list_jobs_query(
    *, states: Sequence[str], repo: str | None, pr_number: int | None, before_id: int | None
) -> tuple[Statement, list[Any]] | None:
    """Jobs newest first, filtered (the last parameter, the limit, is the caller's); None when no state asked for is
    one this version knows. Running jobs are read through their partial index: SQLite is told so (without statistics
    it walks the primary key back through the history to find the few running ones); PostgreSQL's planner finds it."""
    where: list[str] = ["1 = 1"]
    params: list[Any] = []
    if before_id is not None:
        where.append("id < ?")
        params.append(before_id)
    index = None
    if states:
        known = sorted({str(st) for st in states} & _STATE_VALUES)
        if not known:
            return None
        index = _STATE_INDEX.get(known[0]) if len(known) == 1 else None
        if index is not None:  # written as a literal, so the partial index applies
            where.append(f"state = '{known[0]}'")
        else:
            where.append(f"state IN ({', '.join('?' * len(known))})")
            params.extend(known)
    if repo:
        where.append("repo_full_name = ?")
        params.append(repo)
    if pr_number is not None:
        where.append("pr_number = ?")
        params.append(pr_number)
    query = f"SELECT {JOB_COLUMNS} FROM jobs{{index}} WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?"
    if index is None:
        return query.format(index=""), params
    return Dialects(query.format(index=f" INDEXED BY {index}"), numbered(query.format(index=""))), params


STATE_COUNTS = "SELECT state, COUNT(*) FROM jobs GROUP BY state"
# The oldest job not yet finished: the first entry of jobs_queued_created, and the few running jobs (jobs_running).
OLDEST_PENDING = f"""
SELECT MIN(t) FROM (SELECT MIN(created_at) AS t FROM jobs WHERE state = '{JobState.QUEUED.value}'
                    UNION ALL SELECT MIN(created_at) FROM jobs WHERE state = '{JobState.RUNNING.value}') AS pending
"""
EXPIRED_LEASES = "SELECT COUNT(*) FROM jobs WHERE state = 'running' AND lease_expires_at < ?"
# Queued and running jobs per queue (migration 0016): the queued from jobs_claimable alone (it leads with the queue),
# the few running from jobs_running.
PENDING_BY_QUEUE = f"""
SELECT queue, '{JobState.QUEUED.value}' AS state, COUNT(*) AS n FROM jobs WHERE state = '{JobState.QUEUED.value}'
 GROUP BY queue
UNION ALL SELECT queue, '{JobState.RUNNING.value}', COUNT(*) FROM jobs WHERE state = '{JobState.RUNNING.value}'
 GROUP BY queue
"""
AWAITING_RECONCILIATION = (
    "SELECT COUNT(*) FROM jobs WHERE publish_intent_at IS NOT NULL AND review_id IS NULL"
    " AND state IN ('queued', 'running')"
)

# The queue now: pending jobs per state (their partial indexes), and finished jobs per state since a time (the
# jobs_finished index), so the count does not grow with the history the retention keeps.
_QUEUE_COUNTS = f"""
SELECT '{JobState.QUEUED.value}' AS state, COUNT(*) AS n FROM jobs WHERE state = '{JobState.QUEUED.value}'
UNION ALL SELECT '{JobState.RUNNING.value}', COUNT(*) FROM jobs WHERE state = '{JobState.RUNNING.value}'
UNION ALL SELECT state, COUNT(*) FROM jobs {{index}} WHERE finished_at >= ? AND state IN ({TERMINAL_STATES}) GROUP BY state
"""
# SQLite would walk jobs_by_state over the whole history (it groups by state): it is told to read the range.
QUEUE_COUNTS = Dialects(
    _QUEUE_COUNTS.format(index="INDEXED BY jobs_finished"), numbered(_QUEUE_COUNTS.format(index=""))
)

# Failures since a time, newest first (the jobs_failed index).
FAILED_SINCE = f"""
SELECT {JOB_COLUMNS} FROM jobs WHERE state = '{JobState.FAILED.value}' AND finished_at >= ?
 ORDER BY finished_at DESC LIMIT ?
"""

# A job's attempts, oldest first.
SELECT_ATTEMPTS = """
SELECT job_id, attempt, lease_owner, started_at, finished_at, outcome, error, model, input_tokens, output_tokens,
       cache_creation_tokens, cache_read_tokens FROM attempts WHERE job_id = ? ORDER BY id
"""

# -- the operator's writes (admin jobs cancel / retry)

# An operator's cancel of a job not finished yet.
OPERATOR_CANCEL = f"""
UPDATE jobs SET state = '{JobState.CANCELLED.value}', outcome = ?, cancel_reason = 'operator', finished_at = ?, updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE id = ? AND state IN ({source_states(JobEvent.CANCEL)})
"""

# An operator's retry of a finished job. A check run GitHub shows completed is forgotten (with any creation claim):
# GitHub does not reliably reopen a completed run, so the new attempt gets a new one (same external_id).
OPERATOR_RETRY = f"""
UPDATE jobs SET state = '{JobState.QUEUED.value}', attempts = 0, next_attempt_at = ?, updated_at = ?,
       finished_at = NULL, outcome = NULL, cancel_reason = NULL,
       check_run_id = CASE WHEN check_run_status = 'completed' THEN NULL ELSE check_run_id END,
       check_run_claim = CASE WHEN check_run_status = 'completed' THEN NULL ELSE check_run_claim END,
       check_run_claim_until = CASE WHEN check_run_status = 'completed' THEN NULL ELSE check_run_claim_until END,
       check_run_status = NULL
 WHERE id = ? AND state IN ({source_states(JobEvent.RETRY_BY_OPERATOR)})
   AND NOT EXISTS (SELECT 1 FROM jobs AS live WHERE live.revision_key = jobs.revision_key AND live.id <> jobs.id
                   AND live.state IN ({LIVE_STATES}))
"""

__all__ = [
    "list_jobs_query",
    "STATE_COUNTS",
    "OLDEST_PENDING",
    "EXPIRED_LEASES",
    "PENDING_BY_QUEUE",
    "AWAITING_RECONCILIATION",
    "QUEUE_COUNTS",
    "FAILED_SINCE",
    "SELECT_ATTEMPTS",
    "OPERATOR_CANCEL",
    "OPERATOR_RETRY",
]
