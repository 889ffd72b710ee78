"""A job's check run: which jobs' runs lag behind their phase, one creator of a run at a time across hosts, and what a
run shows recorded only while the job is as its writer read it."""

from __future__ import annotations

from reviewer_app.store.statements.dialects import with_json_ids
from reviewer_app.store.statements.jobs import JOB_COLUMNS
from reviewer_app.store.statements.workers import GONE_WORKER_IDS

# Jobs whose check run does not show their current phase yet (the key names the phase and the attempt). A running
# job's check run belongs to its worker, so hosts never race to create it (a sync that was already creating it when
# the worker claimed the job shows it in progress itself: CheckRuns.sync_job). An answer in a thread has no check
# run (it reviews no head).
CHECK_KEY = (
    "CASE WHEN state = 'queued' THEN 'queued:' || attempts"
    " WHEN state = 'running' THEN 'in_progress:' || attempts ELSE 'completed' END"
)
# Installations waiting out a rate limit are skipped (a JSON array of ids): the others' jobs do not wait behind
# theirs. Parameters: skipped installations, limit.
NEEDS_CHECK_SYNC = with_json_ids(f"""
SELECT {JOB_COLUMNS} FROM jobs
 WHERE installation_id IS NOT NULL AND head_sha <> '' AND state <> 'running' AND trigger NOT LIKE 'reply:%'
   AND COALESCE(check_run_status, '') <> {CHECK_KEY}
   AND installation_id NOT IN (SELECT id FROM installations WHERE active = 0)
   AND installation_id NOT IN ({{ids}})
 ORDER BY updated_at LIMIT ?
""")

# One creator of a job's check run at a time, across hosts: the worker starting the review and another host's
# check-sync pass can both find no check run for the job and would both create one (GitHub keeps both). The claim
# expires, so a creator that died between creating and recording is replaced; its successor looks for the run by
# external_id before creating. A claim of a process that is gone (its heartbeat older than its lease) is void at
# once, as is one of a process known dead on its host (VOID_CHECK_RUN_CLAIMS_OF). Parameters: owner, until, job id,
# now, owner, now.
CLAIM_CHECK_RUN_CREATION = f"""
UPDATE jobs SET check_run_claim = ?, check_run_claim_until = ?
 WHERE id = ? AND check_run_id IS NULL
   AND (check_run_claim_until IS NULL OR check_run_claim_until <= ? OR check_run_claim = ?
        OR check_run_claim IN ({GONE_WORKER_IDS}))
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

# The pull request of the latest job for a head of a repository: a fork's check suite lists no pull request.
PULL_OF_HEAD = "SELECT pr_number FROM jobs WHERE repo_id = ? AND head_sha = ? ORDER BY id DESC LIMIT 1"

__all__ = [
    "CHECK_KEY",
    "NEEDS_CHECK_SYNC",
    "CLAIM_CHECK_RUN_CREATION",
    "SET_CHECK_RUN_IF_UNCHANGED",
    "FORGET_CHECK_RUN_STATUS",
    "PULL_OF_HEAD",
]
