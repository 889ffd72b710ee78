"""Who may do what in a job's repository, as GitHub says: the job's installation, a person's permission, and those
permissions kept for a minute across jobs (the gate's `/review` check and the team's signals share them)."""

from __future__ import annotations

import logging

import cachetools

from reviewer_app.core.commands import WRITE_PERMISSIONS
from reviewer_app.core.errors import Cancelled, PermanentError
from reviewer_app.core.gate import NO_INSTALLATION
from reviewer_app.dispatch.context import JobContext
from reviewer_app.github.client import GitHubClient

log = logging.getLogger(__name__)

PERMISSION_CACHE_SECONDS = 60.0
# Someone without write access is remembered longer: many accounts reacting on the app's comments cost one lookup each
# per ten minutes at most (and a pass asks about a bounded number of new ones: review/signals.py).
NO_WRITE_CACHE_SECONDS = 600.0
UNKNOWN = "unknown"  # the permission of someone GitHub could not tell about: refused, and not remembered


def installation_of(ctx: JobContext) -> int:
    """The job's installation; a job whose event carried none ends here."""
    if ctx.job.installation_id is None:
        raise Cancelled(NO_INSTALLATION)
    return ctx.job.installation_id


async def permission_of(github: GitHubClient, ctx: JobContext, login: str) -> str:
    """What GitHub says ``login`` may do in the job's repository; UNKNOWN (refused) when it cannot say, e.g. a 404
    for an account that no longer exists: fail closed."""
    return await _ask(github, installation_of(ctx), ctx.job.repo_full_name, login, f"job {ctx.job.id}")


async def _ask(github: GitHubClient, installation_id: int, repo: str, login: str, who: str) -> str:
    try:
        return await github.collaborator_permission(installation_id, repo, login)
    except PermanentError as exc:
        log.warning("%s: permission of %s not known: %s", who, login, exc.reason)
        return UNKNOWN


class Permissions:
    """What GitHub says people may do in a repository, kept per login across jobs: a burst of `/review`, or of
    reactions and replies by one person (review/signals.py), costs one lookup; a write permission is kept a minute,
    anything less ten (a changed permission counts after at most that). What GitHub could not tell (UNKNOWN,
    refused) is not kept."""

    def __init__(self, github: GitHubClient) -> None:
        self.github = github
        self._cache: cachetools.TTLCache[tuple[int, str, str], str] = cachetools.TTLCache(
            maxsize=4096, ttl=PERMISSION_CACHE_SECONDS
        )
        self._no_write: cachetools.TTLCache[tuple[int, str, str], str] = cachetools.TTLCache(
            maxsize=16384, ttl=NO_WRITE_CACHE_SECONDS
        )

    def known(self, installation_id: int, repo: str, login: str) -> str | None:
        """``login``'s permission in ``repo`` as last looked up, while it is kept; None when it must be asked."""
        key = (installation_id, repo, login)
        return self._cache.get(key) or self._no_write.get(key)

    async def of(self, ctx: JobContext, login: str) -> str:
        return await self.lookup(installation_of(ctx), ctx.job.repo_full_name, login, f"job {ctx.job.id}")

    async def lookup(self, installation_id: int, repo: str, login: str, who: str = "signals") -> str:
        """``login``'s permission in ``repo`` (``who``: whose work asks, for the log)."""
        permission = self.known(installation_id, repo, login)
        if permission is None:
            permission = await _ask(self.github, installation_id, repo, login, who)
            if permission in WRITE_PERMISSIONS:
                self._cache[(installation_id, repo, login)] = permission
            elif permission != UNKNOWN:
                self._no_write[(installation_id, repo, login)] = permission
        return permission
