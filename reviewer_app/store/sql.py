"""Named SQL statements shared by the store backends; each name says the guard it applies."""

from __future__ import annotations

from reviewer_app.core.states import JobEvent, JobState, sources_of


def _states(event: JobEvent) -> str:
    return ", ".join(f"'{s.value}'" for s in sorted(sources_of(event)))


JOB_COLUMNS = (
    "id, revision_key, repo_id, repo_full_name, installation_id, pr_number, head_sha, trigger, priority, state,"
    " details, attempts, max_attempts, next_attempt_at, lease_owner, lease_token, lease_expires_at, last_error,"
    " superseded_by, outcome, check_run_id, check_run_status, review_id, publish_intent_at, answer, event_at,"
    " created_at, started_at, finished_at, updated_at"
)

# Supersede the PR's pending jobs for other heads whose event is not newer than the new job's, and its waiting draft
# jobs (trigger 'draft') whatever their head: the pull request was marked ready, the new job reviews that head. A
# running draft job of the same head is left to finish (its model call is paid for); the new job waits for it.
SUPERSEDABLE_STATES = _states(JobEvent.SUPERSEDE)

SUPERSEDE_OLDER_HEADS = f"""
UPDATE jobs SET state = '{JobState.SUPERSEDED.value}', superseded_by = ?, outcome = ?, finished_at = ?,
       updated_at = ?, lease_token = NULL, lease_expires_at = NULL
 WHERE repo_id = ? AND pr_number = ? AND (head_sha <> ? OR (trigger = 'draft' AND state = 'queued')) AND id <> ?
   AND state IN ({_states(JobEvent.SUPERSEDE)})
   AND (event_at IS NULL OR ? IS NULL OR event_at <= ?)
RETURNING id
"""

# Cancel every pending job of one PR (closed, uninstalled).
CANCEL_PR_PENDING = f"""
UPDATE jobs SET state = '{JobState.CANCELLED.value}', outcome = ?, finished_at = ?, updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE repo_id = ? AND pr_number = ? AND state IN ({_states(JobEvent.CANCEL)})
RETURNING id
"""

# Renew only while this attempt still holds the lease.
RENEW_IF_LEASE_HELD = f"""
UPDATE jobs SET lease_expires_at = ?, updated_at = ?
 WHERE id = ? AND lease_token = ? AND state = '{JobState.RUNNING.value}'
"""

# Leave `running` for a terminal state, only while this attempt holds the lease.
FINISH_IF_LEASE_HELD = f"""
UPDATE jobs SET state = ?, outcome = ?, last_error = COALESCE(?, last_error), finished_at = ?, updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE id = ? AND lease_token = ? AND state = '{JobState.RUNNING.value}'
"""

# Back to the queue at a later time; a deferral gives the attempt back.
REQUEUE_IF_LEASE_HELD = f"""
UPDATE jobs SET state = '{JobState.QUEUED.value}', next_attempt_at = ?, last_error = ?,
       attempts = attempts - ?, updated_at = ?, lease_token = NULL, lease_expires_at = NULL
 WHERE id = ? AND lease_token = ? AND state = '{JobState.RUNNING.value}'
"""

# Close the attempt's history row (its token is unique per attempt).
FINISH_ATTEMPT = """
UPDATE attempts SET finished_at = ?, outcome = ?, error = ?,
       model = COALESCE(?, model),
       input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,
       cache_creation_tokens = cache_creation_tokens + ?, cache_read_tokens = cache_read_tokens + ?
 WHERE lease_token = ? AND finished_at IS NULL
"""

ADD_ATTEMPT_USAGE = """
UPDATE attempts SET model = COALESCE(?, model),
       input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,
       cache_creation_tokens = cache_creation_tokens + ?, cache_read_tokens = cache_read_tokens + ?
 WHERE lease_token = ?
"""

INSERT_ATTEMPT = """
INSERT INTO attempts (job_id, attempt, lease_owner, lease_token, started_at) VALUES (?, ?, ?, ?, ?)
"""

# Expired leases: the rows to rescue, read inside the rescuing transaction.
SELECT_EXPIRED = f"""
SELECT id, lease_token, attempts, max_attempts FROM jobs
 WHERE state = '{JobState.RUNNING.value}' AND lease_expires_at < ?
"""

EXPIRE_TO_QUEUE = f"""
UPDATE jobs SET state = '{JobState.QUEUED.value}', next_attempt_at = ?, last_error = ?, updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE id = ? AND lease_token = ? AND state = '{JobState.RUNNING.value}'
"""

EXPIRE_TO_FAILED = f"""
UPDATE jobs SET state = '{JobState.FAILED.value}', last_error = ?, outcome = ?, finished_at = ?, updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE id = ? AND lease_token = ? AND state = '{JobState.RUNNING.value}'
"""

OPERATOR_CANCEL = f"""
UPDATE jobs SET state = '{JobState.CANCELLED.value}', outcome = ?, finished_at = ?, updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE id = ? AND state IN ({_states(JobEvent.CANCEL)})
"""

OPERATOR_RETRY = f"""
UPDATE jobs SET state = '{JobState.QUEUED.value}', attempts = 0, next_attempt_at = ?, updated_at = ?,
       finished_at = NULL, outcome = NULL, check_run_status = NULL
 WHERE id = ? AND state IN ({_states(JobEvent.RETRY_BY_OPERATOR)})
"""

# Jobs whose check run does not show their current phase yet (the key names the phase and the attempt). A running
# job's check run belongs to its worker, so hosts never race to create it.
CHECK_KEY = (
    "CASE WHEN state = 'queued' THEN 'queued:' || attempts"
    " WHEN state = 'running' THEN 'in_progress:' || attempts ELSE 'completed' END"
)
NEEDS_CHECK_SYNC = f"""
SELECT {JOB_COLUMNS} FROM jobs
 WHERE installation_id IS NOT NULL AND head_sha <> '' AND state <> 'running'
   AND COALESCE(check_run_status, '') <> {CHECK_KEY}
   AND installation_id NOT IN (SELECT id FROM installations WHERE active = 0)
 ORDER BY updated_at LIMIT ?
"""

INSERT_EFFECT = """
INSERT INTO outbox (kind, installation_id, repo_full_name, target, content, created_at) VALUES (?, ?, ?, ?, ?, ?)
"""

# Whether the outbox holds a comment (a help answer) for this pull request newer than the cut-off, sent or not.
COMMENTED_SINCE = """
SELECT EXISTS (SELECT 1 FROM outbox WHERE kind = 'comment' AND repo_full_name = ? AND target = ? AND created_at > ?)
"""

# Effects still to send, skipping installations that are gone.
PENDING_EFFECTS = """
SELECT id, kind, installation_id, repo_full_name, target, content, attempts FROM outbox
 WHERE sent_at IS NULL AND installation_id NOT IN (SELECT id FROM installations WHERE active = 0)
 ORDER BY id LIMIT ?
"""

UPSERT_INSTALLATION = """
INSERT INTO installations (id, account, active, reason, updated_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET account = excluded.account, active = excluded.active, reason = excluded.reason,
                               updated_at = excluded.updated_at
"""

CANCEL_INSTALLATION_PENDING = f"""
UPDATE jobs SET state = '{JobState.CANCELLED.value}', outcome = ?, finished_at = ?, updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE installation_id = ? AND state IN ({_states(JobEvent.CANCEL)})
RETURNING id
"""


# One creator of a job's check run at a time, across hosts: the worker starting the review and another host's
# check-sync pass can both find no check run for the job and would both create one (GitHub keeps both). The claim
# expires, so a creator that died between creating and recording is replaced; its successor looks for the run by
# external_id before creating. Parameters: owner, until, job id, now, owner.
CLAIM_CHECK_RUN_CREATION = """
UPDATE jobs SET check_run_claim = ?, check_run_claim_until = ?
 WHERE id = ? AND check_run_id IS NULL
   AND (check_run_claim_until IS NULL OR check_run_claim_until <= ? OR check_run_claim = ?)
RETURNING id
"""

SET_CHECK_RUN = """
UPDATE jobs SET check_run_id = COALESCE(?, check_run_id), check_run_status = ? WHERE id = ?
"""

CANCEL_REPO_PENDING = f"""
UPDATE jobs SET state = '{JobState.CANCELLED.value}', outcome = ?, finished_at = ?, updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE installation_id = ? AND repo_id = ? AND state IN ({_states(JobEvent.CANCEL)})
RETURNING id
"""

LAST_REVIEWED_HEAD = """
SELECT head_sha FROM jobs WHERE repo_id = ? AND pr_number = ? AND state = 'succeeded' AND review_id IS NOT NULL
 ORDER BY finished_at DESC, id DESC LIMIT 1
"""

# -- missed-webhook recovery (tables of migration 0003) ------------------------------------------------------

# Claim one GUID for a redelivery request: new, or left unfinished by a claimer that died or gave it back.
CLAIM_REDELIVERY_IF_UNCLAIMED = """
INSERT INTO redeliveries (guid, delivery_id, owner, claimed_at) VALUES (?, ?, ?, ?)
ON CONFLICT (guid) DO UPDATE SET delivery_id = excluded.delivery_id, owner = excluded.owner,
                                 claimed_at = excluded.claimed_at
 WHERE redeliveries.requested_at IS NULL AND redeliveries.claimed_at < ?
RETURNING guid
"""

# GitHub took the request (or refused it for good, with the error): never ask for this GUID again.
MARK_REDELIVERY_REQUESTED_IF_CLAIMED = """
UPDATE redeliveries SET requested_at = ?, error = ? WHERE guid = ? AND owner = ? AND requested_at IS NULL
"""

# The request failed for now: keep the error, and let the next pass (of any host) claim the GUID again.
RELEASE_REDELIVERY_IF_CLAIMED = """
UPDATE redeliveries SET claimed_at = 0, error = ? WHERE guid = ? AND owner = ? AND requested_at IS NULL
"""

# Rows about deliveries GitHub no longer keeps.
FORGET_REDELIVERIES = """
DELETE FROM redeliveries WHERE COALESCE(requested_at, claimed_at) < ?
"""

# A pass of a periodic duty: taken when free, expired, or already ours.
TAKE_DUTY_LEASE_IF_FREE = """
INSERT INTO duty_leases (duty, owner, expires_at) VALUES (?, ?, ?)
ON CONFLICT (duty) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
 WHERE duty_leases.expires_at <= ? OR duty_leases.owner = excluded.owner
RETURNING duty
"""

RELEASE_DUTY_LEASE_IF_HELD = """
UPDATE duty_leases SET expires_at = ? WHERE duty = ? AND owner = ?
"""

# Model tokens per repository and model since a time: what reviews cost.
USAGE_BY_REPO = """
SELECT j.repo_full_name AS repo, COALESCE(a.model, '') AS model, COUNT(DISTINCT j.id) AS jobs,
       SUM(a.input_tokens) AS input_tokens, SUM(a.output_tokens) AS output_tokens,
       SUM(a.cache_creation_tokens) AS cache_creation_tokens, SUM(a.cache_read_tokens) AS cache_read_tokens
  FROM attempts a JOIN jobs j ON j.id = a.job_id
 WHERE a.started_at >= ? AND (a.input_tokens > 0 OR a.output_tokens > 0)
 GROUP BY j.repo_full_name, COALESCE(a.model, '')
 ORDER BY SUM(a.input_tokens) + SUM(a.output_tokens) DESC
"""

# Retention: effects the outbox finished with (sent, or given up on) before the cut-off, a batch at a time.
PRUNE_FINISHED_EFFECTS = """
DELETE FROM outbox WHERE id IN (SELECT id FROM outbox WHERE sent_at IS NOT NULL AND sent_at < ? LIMIT ?)
"""
