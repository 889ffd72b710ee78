"""Claims and leases: queued jobs leased to a worker, the lease renewed, the job finished, requeued or skipped only while
its attempt holds the lease (alone or a batch at a time), and expired leases rescued."""

from __future__ import annotations

from reviewer_app.core.states import JobState
from reviewer_app.store.statements.dialects import Dialects, numbered
from reviewer_app.store.statements.jobs import JOB_COLUMNS

# An attempt's history row, one per claim (written by the claim itself on PostgreSQL: RECORD_CLAIMED_ATTEMPTS).
INSERT_ATTEMPT = """
INSERT INTO attempts (job_id, attempt, lease_owner, lease_token, started_at) VALUES (?, ?, ?, ?, ?)
"""

# Claim: lease up to ?4 eligible queued jobs of the queue ?5 (not while the queue is paused) with a random token per
# row; the claimed rows come back whole, so a worker starts without reading its job again. Parameters: owner, lease
# expiry, now, limit, queue (core/queues.py: each kind of work has slots of its own, claimed apart). PostgreSQL skips rows another claimer has locked and writes the attempt rows in the same statement.
# SQLite is told its index: without statistics its planner may search another index on state and sort every queued
# job to take the first few (an index on (state, id) once made the claim O(backlog); tests/store/test_query_plans.py).
CLAIM_QUEUED = Dialects(
    f"""
UPDATE jobs SET state = '{JobState.RUNNING.value}', lease_owner = ?1, lease_token = lower(hex(randomblob(16))),
       lease_expires_at = ?2, attempts = attempts + 1, started_at = COALESCE(started_at, ?3), updated_at = ?3
 WHERE id IN (SELECT id FROM jobs INDEXED BY jobs_claimable
               WHERE state = '{JobState.QUEUED.value}' AND queue = ?5 AND next_attempt_at <= ?3
                AND NOT EXISTS (SELECT 1 FROM settings WHERE key = 'queue_paused' AND value = '1')
              ORDER BY priority, next_attempt_at, id LIMIT ?4)
RETURNING {JOB_COLUMNS}
""",
    f"""
WITH claimed AS (
    UPDATE jobs SET state = '{JobState.RUNNING.value}', lease_owner = $1,
           lease_token = replace(gen_random_uuid()::text, '-', ''), lease_expires_at = $2,
           attempts = attempts + 1, started_at = COALESCE(started_at, $3), updated_at = $3
     WHERE id IN (SELECT id FROM jobs
                   WHERE state = '{JobState.QUEUED.value}' AND queue = $5 AND next_attempt_at <= $3
                     AND NOT EXISTS (SELECT 1 FROM settings WHERE key = 'queue_paused' AND value = '1')
                   ORDER BY priority, next_attempt_at, id
                   LIMIT $4 FOR UPDATE SKIP LOCKED)
    RETURNING {JOB_COLUMNS}
), recorded AS (
    INSERT INTO attempts (job_id, attempt, lease_owner, lease_token, started_at)
    SELECT id, attempts, $1, lease_token, $3 FROM claimed
)
SELECT {JOB_COLUMNS} FROM claimed ORDER BY id
""",
)
# The claimed attempts' history rows (PostgreSQL's claim wrote them already).
RECORD_CLAIMED_ATTEMPTS = Dialects(INSERT_ATTEMPT, None)

# Renew only while this attempt still holds the lease.
RENEW_IF_LEASE_HELD = f"""
UPDATE jobs SET lease_expires_at = ?, updated_at = ?
 WHERE id = ? AND lease_token = ? AND state = '{JobState.RUNNING.value}'
"""

# Renew every lease still held, each fenced by its own token. Parameters: expiry, now, JSON [{"id", "token"}].
RENEW_MANY_IF_LEASE_HELD = Dialects(
    f"""
UPDATE jobs SET lease_expires_at = ?1, updated_at = ?2
  FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.token') AS token FROM json_each(?3)) AS held
 WHERE jobs.id = held.id AND jobs.lease_token = held.token AND jobs.state = '{JobState.RUNNING.value}'
RETURNING jobs.lease_token
""",
    f"""
UPDATE jobs SET lease_expires_at = $1, updated_at = $2
  FROM json_to_recordset($3::json) AS held(id bigint, token text)
 WHERE jobs.id = held.id AND jobs.lease_token = held.token AND jobs.state = '{JobState.RUNNING.value}'
RETURNING jobs.lease_token
""",
)

# Leave `running` for a terminal state, only while this attempt holds the lease.
FINISH_IF_LEASE_HELD = f"""
UPDATE jobs SET state = ?, outcome = ?, cancel_reason = ?, last_error = COALESCE(?, last_error), finished_at = ?,
       updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
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

# FINISH_IF_LEASE_HELD and FINISH_ATTEMPT for a batch of finishes in one PostgreSQL statement (one round trip and
# one commit for all): each job leaves `running` only while its attempt's token still holds the lease; that
# attempt's history row is closed with the state, or with 'lease_lost'. Returns the tokens whose job it finished.
FINISH_JOBS_AND_ATTEMPTS = Dialects(
    None,
    f"""
WITH input AS (
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::double precision[],
                         $7::text[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::text[])
        AS i(job_id, token, state, outcome, error, at, model, input_tokens, output_tokens, cache_creation_tokens,
             cache_read_tokens, cancel_reason)
), finished AS (
    UPDATE jobs SET state = i.state, outcome = i.outcome, cancel_reason = i.cancel_reason,
           last_error = COALESCE(i.error, jobs.last_error),
           finished_at = i.at, updated_at = i.at, lease_token = NULL, lease_expires_at = NULL
      FROM input i
     WHERE jobs.id = i.job_id AND jobs.lease_token = i.token AND jobs.state = '{JobState.RUNNING.value}'
    RETURNING i.token
), closed AS (
    UPDATE attempts SET finished_at = i.at,
           outcome = CASE WHEN i.token IN (SELECT token FROM finished) THEN i.state ELSE 'lease_lost' END,
           error = i.error, model = COALESCE(i.model, attempts.model),
           input_tokens = attempts.input_tokens + i.input_tokens,
           output_tokens = attempts.output_tokens + i.output_tokens,
           cache_creation_tokens = attempts.cache_creation_tokens + i.cache_creation_tokens,
           cache_read_tokens = attempts.cache_read_tokens + i.cache_read_tokens
      FROM input i
     WHERE attempts.lease_token = i.token AND attempts.finished_at IS NULL
)
SELECT token FROM finished
""",
)

# The same on SQLite, in two statements over a JSON array (it has no data-modifying CTEs): the jobs first, each by
# its id and only under its token, RETURNING the ids finished; then every attempt of the batch closed with the state
# or 'lease_lost', as the first statement decided. Rows as procedures.finish_together builds them.
FINISH_JOBS_FROM_JSON = Dialects(
    f"""
UPDATE jobs SET state = i.state, outcome = i.outcome, cancel_reason = i.cancel_reason,
       last_error = COALESCE(i.error, jobs.last_error), finished_at = i.at, updated_at = i.at,
       lease_token = NULL, lease_expires_at = NULL
  FROM (SELECT json_extract(value, '$[0]') AS job_id, json_extract(value, '$[1]') AS token,
               json_extract(value, '$[2]') AS state, json_extract(value, '$[3]') AS outcome,
               json_extract(value, '$[4]') AS error, json_extract(value, '$[5]') AS at,
               json_extract(value, '$[11]') AS cancel_reason
          FROM json_each(?)) AS i
 WHERE jobs.id = i.job_id AND jobs.lease_token = i.token AND jobs.state = '{JobState.RUNNING.value}'
RETURNING jobs.id
""",
    None,
)
CLOSE_ATTEMPTS_FROM_JSON = Dialects(
    """
UPDATE attempts SET finished_at = i.at, outcome = i.outcome, error = i.error, model = COALESCE(i.model, attempts.model),
       input_tokens = attempts.input_tokens + i.input_tokens, output_tokens = attempts.output_tokens + i.output_tokens,
       cache_creation_tokens = attempts.cache_creation_tokens + i.cache_creation_tokens,
       cache_read_tokens = attempts.cache_read_tokens + i.cache_read_tokens
  FROM (SELECT json_extract(value, '$[0]') AS token, json_extract(value, '$[1]') AS at,
               json_extract(value, '$[2]') AS outcome, json_extract(value, '$[3]') AS error,
               json_extract(value, '$[4]') AS model, json_extract(value, '$[5]') AS input_tokens,
               json_extract(value, '$[6]') AS output_tokens, json_extract(value, '$[7]') AS cache_creation_tokens,
               json_extract(value, '$[8]') AS cache_read_tokens
          FROM json_each(?)) AS i
 WHERE attempts.lease_token = i.token AND attempts.finished_at IS NULL
""",
    None,
)

# Back to the queue at a later time; a deferral gives the attempt back.
REQUEUE_IF_LEASE_HELD = f"""
UPDATE jobs SET state = '{JobState.QUEUED.value}', next_attempt_at = ?, last_error = ?,
       attempts = attempts - ?, updated_at = ?, lease_token = NULL, lease_expires_at = NULL
 WHERE id = ? AND lease_token = ? AND state = '{JobState.RUNNING.value}'
"""

ADD_ATTEMPT_USAGE = """
UPDATE attempts SET model = COALESCE(?, model),
       input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,
       cache_creation_tokens = cache_creation_tokens + ?, cache_read_tokens = cache_read_tokens + ?
 WHERE lease_token = ?
"""

# The verification pass's tokens, apart from the review's (migration 0014).
ADD_ATTEMPT_VERIFY_USAGE = """
UPDATE attempts SET verify_model = COALESCE(?, verify_model),
       verify_input_tokens = verify_input_tokens + ?, verify_output_tokens = verify_output_tokens + ?,
       verify_cache_creation_tokens = verify_cache_creation_tokens + ?,
       verify_cache_read_tokens = verify_cache_read_tokens + ?
 WHERE lease_token = ?
"""

# End an automatic job skipped (cancelled, its outcome says why) only while this attempt holds the lease and no
# event for its revision arrived since the attempt read the job.
SKIP_IF_LEASE_HELD_AND_UNPOKED = f"""
UPDATE jobs SET state = '{JobState.CANCELLED.value}', outcome = ?, cancel_reason = ?, finished_at = ?, updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE id = ? AND lease_token = ? AND state = '{JobState.RUNNING.value}' AND pokes = ?
"""

# Expired leases: the rows to rescue, read inside the rescuing transaction.
SELECT_EXPIRED = f"""
SELECT id, lease_token, attempts, max_attempts FROM jobs
 WHERE state = '{JobState.RUNNING.value}' AND lease_expires_at < ?
"""

# Expired leases, read inside the rescuing transaction; PostgreSQL locks them in id order and skips a row another
# rescuer is already handling.
SELECT_EXPIRED_FOR_RESCUE = Dialects(SELECT_EXPIRED, numbered(SELECT_EXPIRED) + " ORDER BY id FOR UPDATE SKIP LOCKED")

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

# When the dispatcher next has something to do: the earliest due job of a queue with a free slot (parameter: the
# queues, a JSON array), or the earliest lease to expire, of any queue (the rescuer's work).
NEXT_WAKEUP = Dialects(
    f"""
SELECT MIN(t) FROM (SELECT MIN(next_attempt_at) AS t FROM jobs
                     WHERE state = '{JobState.QUEUED.value}' AND queue IN (SELECT value FROM json_each(?1))
                    UNION ALL SELECT MIN(lease_expires_at) FROM jobs WHERE state = '{JobState.RUNNING.value}') AS w
""",
    f"""
SELECT MIN(t) FROM (SELECT MIN(next_attempt_at) AS t FROM jobs
                     WHERE state = '{JobState.QUEUED.value}' AND queue IN (SELECT json_array_elements_text($1::json))
                    UNION ALL SELECT MIN(lease_expires_at) FROM jobs WHERE state = '{JobState.RUNNING.value}') AS w
""",
)

__all__ = [
    "INSERT_ATTEMPT",
    "CLAIM_QUEUED",
    "RECORD_CLAIMED_ATTEMPTS",
    "RENEW_IF_LEASE_HELD",
    "RENEW_MANY_IF_LEASE_HELD",
    "FINISH_IF_LEASE_HELD",
    "FINISH_ATTEMPT",
    "FINISH_JOBS_AND_ATTEMPTS",
    "FINISH_JOBS_FROM_JSON",
    "CLOSE_ATTEMPTS_FROM_JSON",
    "REQUEUE_IF_LEASE_HELD",
    "ADD_ATTEMPT_USAGE",
    "ADD_ATTEMPT_VERIFY_USAGE",
    "SKIP_IF_LEASE_HELD_AND_UNPOKED",
    "SELECT_EXPIRED",
    "SELECT_EXPIRED_FOR_RESCUE",
    "EXPIRE_TO_QUEUE",
    "EXPIRE_TO_FAILED",
    "NEXT_WAKEUP",
]
