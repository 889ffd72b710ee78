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
       slots = excluded.slots, queues = excluded.queues
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

__all__ = [
    "UPSERT_WORKER",
    "DEREGISTER_WORKER",
    "SELECT_WORKERS",
    "RUNNING_JOBS_BY_OWNER",
    "PRUNE_WORKERS",
    "TAKE_DUTY_LEASE_IF_FREE",
    "RELEASE_DUTY_LEASE_IF_HELD",
]
