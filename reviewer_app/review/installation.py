"""A job whose webhook named no installation learns it from GitHub: a repository's webhook (what `gh webhook forward`
delivers to a local `serve`) carries no ``installation`` field, but the App's installation that holds the repository
is one app-JWT call away (``GET /repos/{owner}/{repo}/installation``). The gate asks before anything else."""

from __future__ import annotations

import logging
from dataclasses import replace

from reviewer_app.core.errors import Cancelled
from reviewer_app.core.gate import NO_INSTALLATION
from reviewer_app.dispatch.context import JobContext
from reviewer_app.github.client import GitHubClient

log = logging.getLogger(__name__)


async def learn_installation(github: GitHubClient, ctx: JobContext) -> None:
    """Set the job's installation when its event named none; Cancelled when no installation of the App holds the
    repository (the App is not installed there)."""
    job = ctx.job
    if job.installation_id is not None:
        return
    found = await github.repo_installation(job.repo_full_name)
    if found is None:
        raise Cancelled(NO_INSTALLATION)
    await ctx.checkpoint(installation_id=found)
    ctx.job = replace(job, installation_id=found)
    log.info("job %s: the event named no installation; %s is in installation %s", job.id, job.repo_full_name, found)
