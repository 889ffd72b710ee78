"""The worker registry's records: the processes running against the database, whether each is gone, and the jobs it
held."""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass, field


@dataclass(frozen=True)
class WorkerInfo:
    """One process running against the database, as it registers itself (a row of the workers table)."""

    id: str  # its lease owner name (new_owner_id): the running jobs it holds have jobs.lease_owner = id
    host: str
    pid: int
    role: str  # "serve", "serve --no-worker" or "worker"
    version: str
    slots: int  # job slots (0: it runs no jobs)
    lease_seconds: float  # its lease: a heartbeat older than this means the process is gone
    started_at: float
    heartbeat_at: float
    jobs_running: int = 0
    # Its slots and busy slots per queue (core/queues.py), e.g. {"reviews": {"slots": 4, "running": 1}, ...}.
    queues: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class HeldJob:
    """A running job as its lease holder's entry shows it: the rescuer hands it back at ``lease_expires_at``."""

    job_id: int
    repo: str
    pr_number: int
    lease_expires_at: float | None


@dataclass(frozen=True)
class WorkerStatus:
    """A registered process as seen at ``now``: alive, or gone with the jobs it held."""

    info: WorkerInfo
    gone: bool
    held: tuple[HeldJob, ...] = ()

    @property
    def rescued_at(self) -> float | None:
        """When the last of the jobs it held is rescued (its lease expires), if it held any."""
        expiries = [h.lease_expires_at for h in self.held if h.lease_expires_at is not None]
        return max(expiries) if expiries else None


def is_gone(info: WorkerInfo, now: float) -> bool:
    """A process whose heartbeat is older than its lease: its leases are expiring unrenewed too."""
    return info.heartbeat_at + info.lease_seconds < now


def new_owner_id(prefix: str = "worker") -> str:
    """A name for this process as a lease owner: readable in the attempts table, unique across restarts."""
    return f"{prefix}-{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
