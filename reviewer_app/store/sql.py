"""Named SQL statements shared by the store backends; each name says the guard it applies."""

from __future__ import annotations

from reviewer_app.core.pr_work import LIVE_STATES as LIVE_STATES_TUPLE
from reviewer_app.core.pr_work import PENDING_STATES as PENDING_STATES_TUPLE
from reviewer_app.core.states import JobEvent, JobState, sources_of


def _states(event: JobEvent) -> str:
    return ", ".join(f"'{s.value}'" for s in sorted(sources_of(event)))


LIVE_STATES = ", ".join(f"'{s}'" for s in LIVE_STATES_TUPLE)  # a job that answers for its revision key
PENDING_STATES = ", ".join(f"'{s}'" for s in PENDING_STATES_TUPLE)

JOB_COLUMNS = (
    "id, revision_key, repo_id, repo_full_name, installation_id, pr_number, head_sha, trigger, priority, state,"
    " details, attempts, max_attempts, next_attempt_at, lease_owner, lease_token, lease_expires_at, last_error,"
    " superseded_by, outcome, check_run_id, check_run_status, review_id, publish_intent_at, answer, event_at,"
    " created_at, started_at, finished_at, updated_at, check_run_claim"
)

# -- admission: the PR's review work (core/pr_work.py decides, these statements apply) -------------------------

# The pull request's queued and running jobs, what core.pr_work.plan_enqueue decides over.
PENDING_JOBS_OF_PR = f"""
SELECT id, head_sha, trigger, state, event_at, before_sha FROM jobs
 WHERE repo_id = ? AND pr_number = ? AND state IN ({PENDING_STATES}) ORDER BY id
"""

# One pending job made pointless (a newer head), or moved on (a request following the PR to its newest head).
SUPERSEDE_IF_PENDING = f"""
UPDATE jobs SET state = '{JobState.SUPERSEDED.value}', superseded_by = ?, outcome = ?, finished_at = ?,
       updated_at = ?, lease_token = NULL, lease_expires_at = NULL
 WHERE id = ? AND state IN ({_states(JobEvent.SUPERSEDE)})
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
                  state, details, attempts, max_attempts, next_attempt_at, created_at, updated_at)
SELECT revision_key, repo_id, repo_full_name, installation_id, pr_number, '', trigger, priority,
       'queued', details, 0, max_attempts, ?, ?, ? FROM jobs WHERE id = ?
RETURNING id
"""

SET_SUPERSEDED_BY = "UPDATE jobs SET superseded_by = ? WHERE id = ?"

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

# A job that counts against the daily review limit: pending or finished, and a superseded or cancelled one that was
# claimed (its model call may have begun; a push right after a review starts must not make it free), unless the
# worker skipped it before asking the model.
SPENT_JOB = """(state NOT IN ('superseded', 'cancelled') OR (attempts > 0
  AND COALESCE(outcome, '') NOT LIKE 'skipped: %' AND COALESCE(outcome, '') NOT LIKE 'covered: %'))"""

# An outside author's automatic reviews of one installation since a time that count against the daily limit (the
# author is in the job's details; SQLite's JSON spelling, PostgreSQL's is in postgres_sql). Parameters: installation,
# since, author.
AUTHOR_SPENT_SINCE = f"""
SELECT COUNT(*) FROM jobs WHERE installation_id = ? AND created_at > ? AND {SPENT_JOB}
   AND json_extract(details, '$.author') = ?
"""

# One requester's requested reviews of a pull request since a time (the hourly allowance is each requester's, so
# a read-only commenter, refused later by the worker, cannot use up a maintainer's). Parameters: repository, PR,
# since, requester.
REQUESTS_BY_SINCE = """
SELECT COUNT(*) FROM jobs WHERE repo_id = ? AND pr_number = ? AND priority = 0 AND created_at > ?
   AND json_extract(details, '$.requested_by') = ?
"""

# An operator's retry of a finished job. A check run GitHub shows completed is forgotten (with any creation claim):
# GitHub does not reliably reopen a completed run, so the new attempt gets a new one (same external_id).
OPERATOR_RETRY = f"""
UPDATE jobs SET state = '{JobState.QUEUED.value}', attempts = 0, next_attempt_at = ?, updated_at = ?,
       finished_at = NULL, outcome = NULL,
       check_run_id = CASE WHEN check_run_status = 'completed' THEN NULL ELSE check_run_id END,
       check_run_claim = CASE WHEN check_run_status = 'completed' THEN NULL ELSE check_run_claim END,
       check_run_claim_until = CASE WHEN check_run_status = 'completed' THEN NULL ELSE check_run_claim_until END,
       check_run_status = NULL
 WHERE id = ? AND state IN ({_states(JobEvent.RETRY_BY_OPERATOR)})
   AND NOT EXISTS (SELECT 1 FROM jobs AS live WHERE live.revision_key = jobs.revision_key AND live.id <> jobs.id
                   AND live.state IN ({LIVE_STATES}))
"""

# Jobs whose check run does not show their current phase yet (the key names the phase and the attempt). A running
# job's check run belongs to its worker, so hosts never race to create it (a sync that was already creating it when
# the worker claimed the job shows it in progress itself: CheckRuns.sync_job).
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
SELECT id, kind, installation_id, repo_full_name, target, content, created_at, attempts FROM outbox
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

# Record what a job's check run shows (its id, and the key of the phase shown), only while the job is still as the
# writer read it: the same state and attempt, and no other check run recorded. A writer that read the job before it
# changed would otherwise record a phase GitHub does not show (a stale sync pass writing `completed` over a run
# another host just put in progress), and no pass would ever look at it again. Parameters: check run id (None: no
# run), key, job id, state read, attempts read, check run id again.
SET_CHECK_RUN_IF_UNCHANGED = """
UPDATE jobs SET check_run_id = COALESCE(check_run_id, ?), check_run_status = ?
 WHERE id = ? AND state = ? AND attempts = ? AND (check_run_id IS NULL OR check_run_id = ?)
"""

# After a check-run write that could not be recorded as above: GitHub may now show an older phase than the job's
# (the writer's PATCH may have landed after a newer one), so the key is cleared and the sync shows the job's phase
# again. The run itself is recorded if the job has none yet (its creator must not lose it).
FORGET_CHECK_RUN_STATUS = """
UPDATE jobs SET check_run_id = COALESCE(check_run_id, ?), check_run_status = NULL WHERE id = ?
"""

CANCEL_REPO_PENDING = f"""
UPDATE jobs SET state = '{JobState.CANCELLED.value}', outcome = ?, finished_at = ?, updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE installation_id = ? AND repo_id = ? AND state IN ({_states(JobEvent.CANCEL)})
RETURNING id
"""

# The head of the PR's newest published review (a job superseded right after it posted counts too).
LAST_REVIEWED_HEAD = """
SELECT head_sha FROM jobs WHERE repo_id = ? AND pr_number = ? AND review_id IS NOT NULL
 ORDER BY COALESCE(finished_at, updated_at) DESC, id DESC LIMIT 1
"""

# A review is on GitHub: record it whatever became of the lease (it is a fact about GitHub, not a claim on the job).
RECORD_PUBLISHED_REVIEW = "UPDATE jobs SET review_id = ? WHERE id = ? AND review_id IS NULL"

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
