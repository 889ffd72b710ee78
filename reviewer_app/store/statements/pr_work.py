"""A pull request's review work applied (core/pr_work.py decides, these statements apply): its pending jobs read,
superseded, followed to a newer head, cancelled on a close, taught by a duplicate event, and resumed after a pause."""

from __future__ import annotations

from reviewer_app.core.states import JobEvent, JobState
from reviewer_app.store.statements.dialects import Dialects, numbered
from reviewer_app.store.statements.jobs import LIVE_STATES, PENDING_STATES, source_states

# The pull request's queued and running jobs, what core.pr_work.plan_enqueue decides over.
PENDING_JOBS_OF_PR = f"""
SELECT id, head_sha, trigger, state, event_at, before_sha FROM jobs
 WHERE repo_id = ? AND pr_number = ? AND state IN ({PENDING_STATES}) ORDER BY id
"""

# One pending job made pointless (a newer head), or moved on (a request following the PR to its newest head).
SUPERSEDE_IF_PENDING = f"""
UPDATE jobs SET state = '{JobState.SUPERSEDED.value}', superseded_by = ?, outcome = ?, finished_at = ?,
       updated_at = ?, lease_token = NULL, lease_expires_at = NULL
 WHERE id = ? AND state IN ({source_states(JobEvent.SUPERSEDE)})
RETURNING id
"""

# Close the open attempt of a job superseded at admission.
FINISH_SUPERSEDED_ATTEMPT = """
UPDATE attempts SET finished_at = ?, outcome = 'superseded' WHERE finished_at IS NULL AND job_id = ?
"""

# A requested review that follows the PR: a queued copy of the request (same revision key, details and attempts
# allowance) with no head yet; the worker reviews the head it finds. Its predecessor is superseded first, so the
# live revision key stays unique.
INSERT_FOLLOWING_REQUEST = """
INSERT INTO jobs (revision_key, repo_id, repo_full_name, installation_id, pr_number, head_sha, trigger, priority,
                  state, details, attempts, max_attempts, next_attempt_at, created_at, updated_at, event_at)
SELECT revision_key, repo_id, repo_full_name, installation_id, pr_number, '', trigger, priority,
       'queued', details, 0, max_attempts, ?, ?, ?, event_at FROM jobs WHERE id = ?
RETURNING id
"""

SET_SUPERSEDED_BY = "UPDATE jobs SET superseded_by = ? WHERE id = ?"

# An automatic event for a running job's own revision was admitted (a duplicate): the job's skip, if it decided on
# the pull request as it was before, no longer stands (SKIP_IF_LEASE_HELD_AND_UNPOKED).
POKE_IF_RUNNING = f"UPDATE jobs SET pokes = pokes + 1 WHERE id = ? AND state = '{JobState.RUNNING.value}'"

# Cancel every pending job of one PR (closed, uninstalled).
CANCEL_PR_PENDING = f"""
UPDATE jobs SET state = '{JobState.CANCELLED.value}', outcome = ?, cancel_reason = ?, finished_at = ?, updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE repo_id = ? AND pr_number = ? AND state IN ({source_states(JobEvent.CANCEL)})
   AND COALESCE(event_at, created_at) <= ?
RETURNING id
"""
# CANCEL_PR_PENDING's last parameter is the close's time: a job admitted by an event GitHub timed strictly later (a
# reopen, a push) is newer knowledge and stays; a tie (one-second stamps) and a request (no event time) are
# cancelled, as a close always did. For a close of unknown time, a time that cancels everything pending:
CLOSED_AT_UNKNOWN = 1e18

# A pending job found again by an event for its revision (a reopen answered duplicate-revision): it was current as
# late as that event, so a close older than the event does not cancel it. Parameters: event time, job, event time.
RAISE_EVENT_AT_IF_PENDING = f"""
UPDATE jobs SET event_at = ? WHERE id = ? AND state IN ({source_states(JobEvent.CANCEL)})
   AND (event_at IS NULL OR event_at < ?)
"""

# A webhook for a head the sweep admitted first (the sweep runs at start-up too): someone is watching after all,
# so the queued job is no longer "found by the sweep" and asks interactively (core/batching.py). Parameters: the
# webhook's action, job.
_UNSWEEP_IF_QUEUED = f"""
UPDATE jobs SET details = {{set_action}} WHERE id = ? AND state = '{JobState.QUEUED.value}'
   AND {{action}} = 'sweep'
"""
UNSWEEP_IF_QUEUED = Dialects(
    _UNSWEEP_IF_QUEUED.format(
        set_action="json_set(details, '$.action', ?)", action="json_extract(details, '$.action')"
    ),
    numbered(
        _UNSWEEP_IF_QUEUED.format(
            set_action="(details::jsonb || jsonb_build_object('action', ?::text))::text",
            action="(details::jsonb ->> 'action')",
        )
    ),
)

# A push that names the head it replaced, for a head that has a job (a force-push back to it): the job learns that
# its head came after that one, whatever state it is in (a worker reading the head later asks), where it knew
# nothing of its own `before` or this push is newer than what it knew. Parameters: before, job, event time.
LEARN_BEFORE = """
UPDATE jobs SET before_sha = ? WHERE id = ? AND (before_sha IS NULL OR event_at IS NULL OR event_at < ?)
"""

# `/review resume`: the head skipped while paused is queued again, when the pull request's newest job with a head
# is that skip and its revision has no live job. A copy of the skipped job, queued. Parameters: now (due, created,
# updated), repository, PR, the paused skip's outcome.
RESUME_PAUSED_HEAD = f"""
INSERT INTO jobs (revision_key, repo_id, repo_full_name, installation_id, pr_number, head_sha, trigger, priority,
                  state, details, attempts, max_attempts, next_attempt_at, event_at, created_at, updated_at,
                  before_sha)
SELECT j.revision_key, j.repo_id, j.repo_full_name, j.installation_id, j.pr_number, j.head_sha, j.trigger, j.priority,
       '{JobState.QUEUED.value}', j.details, 0, j.max_attempts, ?, j.event_at, ?, ?, j.before_sha
  FROM jobs j
 WHERE j.id = (SELECT id FROM jobs WHERE repo_id = ? AND pr_number = ? AND head_sha <> '' ORDER BY id DESC LIMIT 1)
   AND j.outcome = ?
   AND NOT EXISTS (SELECT 1 FROM jobs l WHERE l.revision_key = j.revision_key AND l.state IN ({LIVE_STATES}))
RETURNING id
"""

__all__ = [
    "PENDING_JOBS_OF_PR",
    "SUPERSEDE_IF_PENDING",
    "FINISH_SUPERSEDED_ATTEMPT",
    "INSERT_FOLLOWING_REQUEST",
    "SET_SUPERSEDED_BY",
    "POKE_IF_RUNNING",
    "CANCEL_PR_PENDING",
    "CLOSED_AT_UNKNOWN",
    "RAISE_EVENT_AT_IF_PENDING",
    "UNSWEEP_IF_QUEUED",
    "LEARN_BEFORE",
    "RESUME_PAUSED_HEAD",
]
