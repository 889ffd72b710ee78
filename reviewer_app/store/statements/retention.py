"""Retention: the oldest finished jobs with their attempts and batch requests, old deliveries and finished effects,
deleted a batch at a time."""

from __future__ import annotations

from reviewer_app.store.statements.dialects import Dialects
from reviewer_app.store.statements.jobs import TERMINAL_STATES

# The oldest finished jobs. On SQLite the newest job always stays: a new row gets max(id) + 1, and a job id must
# never be reused (review markers and check runs name it); PostgreSQL's sequence never goes back, and its pruner
# skips rows another host's pruner holds.
PRUNABLE_JOBS = Dialects(
    f"SELECT id FROM jobs WHERE state IN ({TERMINAL_STATES}) AND finished_at < ?"
    " AND id < (SELECT MAX(id) FROM jobs) ORDER BY finished_at, id LIMIT ?",
    f"SELECT id FROM jobs WHERE state IN ({TERMINAL_STATES}) AND finished_at < $1"
    " ORDER BY finished_at, id LIMIT $2 FOR UPDATE SKIP LOCKED",
)

PRUNE_DELIVERIES = """
DELETE FROM deliveries WHERE delivery_id IN (SELECT delivery_id FROM deliveries WHERE received_at < ? LIMIT ?)
"""


def forget_pruned_superseders(n: int) -> str:
    """A job that stays may name a pruned one as its superseder; its outcome text still says which."""
    return f"UPDATE jobs SET superseded_by = NULL WHERE superseded_by IN ({', '.join('?' * n)})"


def delete_pruned_attempts(n: int) -> str:
    return f"DELETE FROM attempts WHERE job_id IN ({', '.join('?' * n)})"


def delete_pruned_batch_requests(n: int) -> str:
    return f"DELETE FROM batch_requests WHERE job_id IN ({', '.join('?' * n)})"


def delete_pruned_jobs(n: int) -> str:
    return f"DELETE FROM jobs WHERE id IN ({', '.join('?' * n)})"


# Effects the outbox finished with (sent, or given up on) before the cut-off, a batch at a time.
PRUNE_FINISHED_EFFECTS = """
DELETE FROM outbox WHERE id IN (SELECT id FROM outbox WHERE sent_at IS NOT NULL AND sent_at < ? LIMIT ?)
"""

__all__ = [
    "PRUNABLE_JOBS",
    "PRUNE_DELIVERIES",
    "forget_pruned_superseders",
    "delete_pruned_attempts",
    "delete_pruned_batch_requests",
    "delete_pruned_jobs",
    "PRUNE_FINISHED_EFFECTS",
]
