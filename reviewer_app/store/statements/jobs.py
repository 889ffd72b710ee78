"""The jobs table as every concern's statements name it: its columns, in ``Job``'s field order, and its states as SQL
lists."""

from __future__ import annotations

from reviewer_app.core.pr_work import LIVE_STATES as LIVE_STATES_TUPLE
from reviewer_app.core.pr_work import PENDING_STATES as PENDING_STATES_TUPLE
from reviewer_app.core.states import TERMINAL, JobEvent, sources_of


def source_states(event: JobEvent) -> str:
    """The states ``event`` may move a job out of (core/states.py's table), as an SQL list."""
    return ", ".join(f"'{s.value}'" for s in sorted(sources_of(event)))


LIVE_STATES = ", ".join(f"'{s}'" for s in LIVE_STATES_TUPLE)  # a job that answers for its revision key
PENDING_STATES = ", ".join(f"'{s}'" for s in PENDING_STATES_TUPLE)
TERMINAL_STATES = ", ".join(f"'{s.value}'" for s in sorted(TERMINAL))

JOB_COLUMNS = (
    "id, revision_key, repo_id, repo_full_name, installation_id, pr_number, head_sha, trigger, priority, state,"
    " details, attempts, max_attempts, next_attempt_at, lease_owner, lease_token, lease_expires_at, last_error,"
    " superseded_by, outcome, check_run_id, check_run_status, review_id, publish_intent_at, answer, event_at,"
    " created_at, started_at, finished_at, updated_at, check_run_claim, cancel_reason, pokes, before_sha"
)

__all__ = ["source_states", "LIVE_STATES", "PENDING_STATES", "TERMINAL_STATES", "JOB_COLUMNS"]
