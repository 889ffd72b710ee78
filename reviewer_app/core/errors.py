"""The errors a job's runner raises, and what each one means to the dispatcher."""

from __future__ import annotations


class JobError(Exception):
    """Base of every error a runner raises on purpose.

    ``reason`` is shown to people (check run summary, CLI); it must never carry a secret or a stack trace.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TransientError(JobError):
    """Worth retrying later with backoff (5xx, timeout, connection reset, model overloaded).

    ``retry_after`` (seconds), when the remote side named one, is a lower bound for the next attempt.
    """

    def __init__(self, reason: str, *, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


class PermanentError(JobError):
    """Retrying cannot help (PR deleted, installation revoked, model answer malformed past its bound)."""


class ArchiveTooLarge(PermanentError):
    """A repository's archive is larger than the app downloads (the codebase at the head goes without it)."""


class InstallationUnavailable(PermanentError):
    """GitHub refused the installation itself (suspended, uninstalled: no token): nothing about this one request.
    What waits on it (a check run to complete) is left for when the installation is back, never given up on."""


class Deferred(JobError):
    """Not now: run again at ``retry_at`` (epoch seconds); waiting does not burn an attempt."""

    def __init__(self, reason: str, *, retry_at: float) -> None:
        super().__init__(reason)
        self.retry_at = retry_at


class RateLimited(Deferred):
    """The remote side asked us to wait until ``retry_at`` (epoch seconds); this does not burn an attempt."""


class Superseded(JobError):
    """The job's head is no longer the PR's head; ``by_sha`` names the newer head when known."""

    def __init__(self, reason: str, *, by_sha: str | None = None) -> None:
        super().__init__(reason)
        self.by_sha = by_sha


class Settled(JobError):
    """The runner recorded the job's end itself, under a guard of its own (a skip that must not outrun a newer event);
    the dispatcher writes nothing more."""


class LeaseLost(Exception):
    """A fenced write changed no row: another attempt owns the job now. Stop, publish nothing."""


class Cancelled(JobError):
    """The review no longer makes sense (PR closed, repository gone from the installation); nothing is posted."""
