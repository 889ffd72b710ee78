"""Dry run: a review (or an answer in a thread) runs to its end, the model is asked and its answer stored, and nothing
is posted: no review, no inline comment, no reply or resolution in a thread, no answer. What would have been posted
is kept on the job (``JobDetails.would_publish``), where `reviewer-app jobs show` and the dashboard show it, so a team
can watch the app on real pull requests before it speaks. The server turns it on everywhere (``REVIEWER_DRY_RUN=1``),
a repository for itself (``dry_run: true`` in .github/reviewer.yml, read from the base branch).

The job's check run still shows its status (queued, reviewing) and ends saying that nothing was posted
(github/check_run_text.py), without the findings. What answers a command someone typed (a reaction to ``/review``,
the reply to ``/review help``, a budget refusal) is still sent: it says nothing about the code.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from reviewer_app.core.gate import CONFIG_PATH
from reviewer_app.core.job_records import WouldPublish
from reviewer_app.core.review_model import InlineComment, ReviewCounts
from reviewer_app.dispatch.context import JobContext
from reviewer_app.github.client import GitHubClient
from reviewer_app.review.render import inline_comment
from reviewer_app.review.repo_config import RepoConfig, parse_repo_config
from reviewer_app.review.settings import ReviewSettings

log = logging.getLogger(__name__)

BY_SERVER = "REVIEWER_DRY_RUN is set"
BY_REPOSITORY = f"dry_run: true in {CONFIG_PATH}"


def dry_run_reason(settings: ReviewSettings, config: RepoConfig | None) -> str | None:
    """Why this work posts nothing (the server's setting first), or None when it posts."""
    if settings.dry_run:
        return BY_SERVER
    if config is not None and config.dry_run:
        return BY_REPOSITORY
    return None


async def answer_dry_run(github: GitHubClient, ctx: JobContext, pr: Mapping[str, Any], *, server: bool) -> str | None:
    """Why an answer posts nothing, or None: the server's setting, else the repository's .github/reviewer.yml on the
    pull request's base branch (read here: a review reads it in its gate anyway)."""
    if server:
        return BY_SERVER
    job = ctx.job
    base = pr.get("base")
    base_ref = str(base.get("ref") or "") if isinstance(base, Mapping) else ""
    if not base_ref or job.installation_id is None:
        return None
    text = await github.get_file_content(job.installation_id, job.repo_full_name, CONFIG_PATH, base_ref)
    # Only dry_run is read here; the token limits are a review's concern.
    return BY_REPOSITORY if parse_repo_config(text, max_input_tokens=1, max_parts=1).dry_run else None


def answer_held_back(body: str, why: str) -> WouldPublish:
    return WouldPublish(body=body, kind="answer", why=why)


def review_held_back(body: str, inline: Sequence[InlineComment], why: str) -> WouldPublish:
    """A review as GitHub would have got it: its body, and its inline comments as the review's POST sends them."""
    return WouldPublish(body=body, comments=tuple(inline_comment(c) for c in inline), kind="review", why=why)


async def hold_back(
    ctx: JobContext,
    would: WouldPublish,
    *,
    counts: ReviewCounts | None = None,
    config_errors: Sequence[str] = (),
    check_run_id: int | None = None,
) -> str:
    """Keep ``would`` on the job instead of posting it; returns the job's outcome in words."""
    job = ctx.job
    details = replace(
        job.details,
        would_publish=would,
        counts=counts if counts is not None else job.details.counts,
        config_errors=tuple(config_errors) or job.details.config_errors,
    )
    # check_run_id is None while another host's sync is creating the run: that host records it.
    await ctx.checkpoint(details=details, **({"check_run_id": check_run_id} if check_run_id else {}))
    ctx.job = replace(job, details=details)
    log.info("job %s: dry run (%s): the %s was kept on the job, not posted", job.id, would.why, would.kind)
    if would.kind != "review":
        return f"dry run ({would.why}): answer not posted; `reviewer-app jobs show {job.id}` shows it"
    what = (
        f"{counts.findings} finding(s), {counts.inline} inline comment(s), {counts.moved} in the body"
        if counts is not None
        else f"{len(would.comments)} inline comment(s)"
    )
    return f"dry run ({would.why}): review not posted ({what}); `reviewer-app jobs show {job.id}` shows it"
