"""The processes running against this database (the worker registry, migration 0011) and the periodic duties they
take turns at."""

from __future__ import annotations

from reviewer_app.core.states import JobState

# Register a process, or refresh its row on each beat (a row pruned while the process was cut off comes back).
UPSERT_WORKER = """
INSERT INTO workers (id, host, pid, role, version, slots, lease_seconds, started_at, heartbeat_at, jobs_running,
                     queues)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, jobs_running = excluded.jobs_running,
       slots = excluded.slots, queues = excluded.queues, lease_seconds = excluded.lease_seconds
"""
DEREGISTER_WORKER = "DELETE FROM workers WHERE id = ?"
SELECT_WORKERS = """
SELECT id, host, pid, role, version, slots, lease_seconds, started_at, heartbeat_at, jobs_running, queues
  FROM workers ORDER BY role, host, started_at, id
"""
# Every running job with its lease holder (the jobs_running index): whose jobs a gone process held, and when the
# rescuer hands them back.
RUNNING_JOBS_BY_OWNER = f"""
SELECT id, lease_owner, repo_full_name, pr_number, lease_expires_at FROM jobs
 WHERE state = '{JobState.RUNNING.value}' ORDER BY lease_expires_at, id
"""
# Retention: processes whose last heartbeat is older than the cut-off.
PRUNE_WORKERS = "DELETE FROM workers WHERE heartbeat_at < ?"

# The registered processes whose heartbeat is older than their lease (store/workers.py is_gone, in SQL): what they
# hold is void. Parameter: now.
GONE_WORKER_IDS = "SELECT id FROM workers WHERE heartbeat_at + lease_seconds < ?"

# A pass of a periodic duty: taken when free, expired, already ours, or held by a process that is gone.
# Parameters: duty, owner, expires at, now, now.
TAKE_DUTY_LEASE_IF_FREE = f"""
INSERT INTO duty_leases (duty, owner, expires_at) VALUES (?, ?, ?)
ON CONFLICT (duty) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
 WHERE duty_leases.expires_at <= ? OR duty_leases.owner = excluded.owner
    OR duty_leases.owner IN ({GONE_WORKER_IDS})
RETURNING duty
"""

RELEASE_DUTY_LEASE_IF_HELD = """
UPDATE duty_leases SET expires_at = ? WHERE duty = ? AND owner = ?
"""

# A process known dead (its host restarted, or its pid is no longer running there: dispatch/registry.py) holds
# nothing: its duty leases, check-run creation claims and redelivery claims end now, so the next pass or sync takes
# them over without waiting out their expiry; its running jobs' leases end once no request it sent can still be in
# flight at GitHub (a review POST sent just before the kill may still land: the next attempt must find its marker).
# Each: then, owner, then (the last two statements: owner).
VOID_DUTY_LEASES_OF = "UPDATE duty_leases SET expires_at = ? WHERE owner = ? AND expires_at > ?"
VOID_CHECK_RUN_CLAIMS_OF = """
UPDATE jobs SET check_run_claim_until = ? WHERE check_run_claim = ? AND check_run_claim_until > ?
"""
VOID_JOB_LEASES_OF = f"""
UPDATE jobs SET lease_expires_at = ? WHERE state = '{JobState.RUNNING.value}' AND lease_owner = ? AND lease_expires_at > ?
"""
VOID_REDELIVERY_CLAIMS_OF = "UPDATE redeliveries SET claimed_at = 0 WHERE owner = ? AND requested_at IS NULL"
# Its registration's lease ends too: it is listed gone at once (with the jobs it held until a rescuer hands them
# back), and GONE_WORKER_IDS names it. A process wrongly taken for dead restores its lease on its next beat.
END_REGISTRATION_LEASE = "UPDATE workers SET lease_seconds = 0 WHERE id = ?"

__all__ = [
    "UPSERT_WORKER",
    "DEREGISTER_WORKER",
    "SELECT_WORKERS",
    "RUNNING_JOBS_BY_OWNER",
    "PRUNE_WORKERS",
    "GONE_WORKER_IDS",
    "TAKE_DUTY_LEASE_IF_FREE",
    "RELEASE_DUTY_LEASE_IF_HELD",
    "VOID_DUTY_LEASES_OF",
    "VOID_CHECK_RUN_CLAIMS_OF",
    "VOID_JOB_LEASES_OF",
    "VOID_REDELIVERY_CLAIMS_OF",
    "END_REGISTRATION_LEASE",
]
