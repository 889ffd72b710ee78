"""Message Batches: requests of jobs sent at half price, their results handed to the jobs (review/batches.py)."""

from __future__ import annotations

from reviewer_app.core.states import JobState
from reviewer_app.store.statements.dialects import Dialects
from reviewer_app.store.statements.jobs import TERMINAL_STATES

BATCH_REQUEST_COLUMNS = (
    "custom_id, job_id, part_key, batch_id, model, state, result, error, submitted_at, ended_at, input_tokens,"
    " output_tokens, cache_creation_tokens, cache_read_tokens"
)

INSERT_BATCH_REQUEST = """
INSERT INTO batch_requests (custom_id, job_id, part_key, batch_id, model, submitted_at) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (custom_id) DO NOTHING
"""

SELECT_BATCH_REQUESTS_OF_JOB = (
    f"SELECT {BATCH_REQUEST_COLUMNS} FROM batch_requests WHERE job_id = ? ORDER BY submitted_at, custom_id"
)

# Batches the duty still waits on: any request of theirs not reported yet (withdrawn ones too, for their tokens).
OPEN_BATCHES = "SELECT DISTINCT batch_id FROM batch_requests WHERE ended_at IS NULL ORDER BY batch_id LIMIT ?"

SELECT_OPEN_REQUESTS_OF_BATCH = "SELECT custom_id FROM batch_requests WHERE batch_id = ? AND ended_at IS NULL"

# Before a report is settled, the row of the job it answers is locked (PostgreSQL; SQLite's single writer already
# orders the two): a worker deferring that job to wait on its batch (the job row updated, then
# WAKE_IF_SETTLED_DURING_ATTEMPT) either commits first, so WAKE_QUEUED_JOB below sees the job queued, or waits for this
# transaction's commit, so its own check sees the request settled. Without the lock each could miss the other and
# the job would wait until its far retry time.
LOCK_JOB_OF_BATCH_REQUEST = Dialects(
    None, "SELECT j.id FROM jobs j JOIN batch_requests b ON b.job_id = j.id WHERE b.custom_id = $1 FOR UPDATE OF j"
)

# A batch's report on one request, written once (the first report wins; a second duty pass finds it ended). Only a
# request still pending takes the result: a withdrawn one keeps its state and gets only its tokens.
SETTLE_BATCH_REQUEST_IF_OPEN = """
UPDATE batch_requests
   SET state = CASE WHEN state = 'pending' THEN ? ELSE state END,
       result = CASE WHEN state = 'pending' THEN ? ELSE result END,
       error = CASE WHEN state = 'pending' THEN ? ELSE error END,
       ended_at = ?, input_tokens = ?, output_tokens = ?, cache_creation_tokens = ?, cache_read_tokens = ?
 WHERE custom_id = ? AND ended_at IS NULL
RETURNING job_id, state
"""

# The job waiting on a settled request runs now (it waits `queued` with a far retry time while the batch runs).
WAKE_QUEUED_JOB = f"""
UPDATE jobs SET next_attempt_at = ?, updated_at = ?
 WHERE id = ? AND state = '{JobState.QUEUED.value}' AND next_attempt_at > ?
"""

# A job that defers itself to wait on its batch, when one of its requests was settled while this attempt ran: the
# poller's WAKE_QUEUED_JOB found it running then and woke nothing, so it is due now instead of at the far retry time.
# Parameters: now, job id, lease token (this attempt), now.
WAKE_IF_SETTLED_DURING_ATTEMPT = """
UPDATE jobs SET next_attempt_at = ?
 WHERE id = ? AND state = 'queued'
   AND EXISTS (
       SELECT 1 FROM batch_requests b
        WHERE b.job_id = jobs.id AND b.ended_at IS NOT NULL AND b.state <> 'withdrawn'
          AND b.ended_at >= (SELECT a.started_at FROM attempts a WHERE a.lease_token = ?)
   )
   AND next_attempt_at > ?
"""

# Requests whose job ended while they were batched (superseded, cancelled, failed): withdrawn, never answered to a
# job; the batches they belong to, to cancel those left with nothing pending.
WITHDRAW_REQUESTS_OF_ENDED_JOBS = f"""
UPDATE batch_requests SET state = 'withdrawn'
 WHERE state = 'pending'
   AND job_id IN (SELECT id FROM jobs WHERE state IN ({TERMINAL_STATES}))
RETURNING batch_id
"""

PENDING_REQUESTS_OF_BATCH = "SELECT COUNT(*) FROM batch_requests WHERE batch_id = ? AND state = 'pending'"

__all__ = [
    "BATCH_REQUEST_COLUMNS",
    "INSERT_BATCH_REQUEST",
    "SELECT_BATCH_REQUESTS_OF_JOB",
    "OPEN_BATCHES",
    "SELECT_OPEN_REQUESTS_OF_BATCH",
    "LOCK_JOB_OF_BATCH_REQUEST",
    "SETTLE_BATCH_REQUEST_IF_OPEN",
    "WAKE_QUEUED_JOB",
    "WAKE_IF_SETTLED_DURING_ATTEMPT",
    "WITHDRAW_REQUESTS_OF_ENDED_JOBS",
    "PENDING_REQUESTS_OF_BATCH",
]
