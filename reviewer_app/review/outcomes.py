"""Outcomes at publication (issue 41): the findings a push changed are fixed, and the review is recorded with what it
was made with (model, prompt version, settings, experiment variant, tokens), so its findings' rate can be read by each.
No GitHub request: what the review read already (its recall of the earlier findings) says what changed."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from reviewer_app.core.job_records import StoredAnswer
from reviewer_app.core.outcomes import Event
from reviewer_app.dispatch.context import JobContext
from reviewer_app.review.memory import Recall
from reviewer_app.review.prompt import REVIEW_TOOL, SYSTEM_PROMPT
from reviewer_app.review.repo_config import RepoConfig
from reviewer_app.review.verify import (
    VERIFY_SYSTEM_PROMPT,
    VERIFY_SYSTEM_PROMPT_NO_LOOKUP,
    VERIFY_TOOL,
    VERIFY_TOOL_NO_LOOKUP,
)
from reviewer_app.store.base import FateEvent, ReviewRun, StoreUnavailable

log = logging.getLogger(__name__)

# The settings a review records, each as the repository (or its experiment variant) set it.
RECORDED_SETTINGS = (
    "min_confidence",
    "max_comments",
    "nits",
    "context",
    "repository_tools",
    "max_parts",
    "max_input_tokens",
)


def prompt_version() -> str:
    """A short hash of the prompt templates and tool schemas (the review's and the verifier's): a change to any of
    them is a new version on the outcomes page."""
    parts = [SYSTEM_PROMPT, REVIEW_TOOL, VERIFY_SYSTEM_PROMPT, VERIFY_TOOL, VERIFY_SYSTEM_PROMPT_NO_LOOKUP]
    text = json.dumps([*parts, VERIFY_TOOL_NO_LOOKUP], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


PROMPT_VERSION = prompt_version()


def settings_of(rc: RepoConfig, answer: StoredAnswer) -> dict[str, Any]:
    recorded = {key: getattr(rc, key) for key in RECORDED_SETTINGS}
    return {**recorded, "verify": bool(answer.verified_by)}


async def settle_changed(ctx: JobContext, recall: Recall) -> int:
    """The earlier findings whose code this head changed (or removed) are fixed, as of the push (the job's
    admission); how many changed fate."""
    job = ctx.job
    events = [
        FateEvent(f.id, Event.CHANGED, job.created_at, f"push {job.head_sha[:12]}")
        for f, _gone in recall.outdated
        if f.id is not None
    ]
    changed = await ctx.store.settle_findings(events)
    if changed:
        log.info("job %s: %d earlier finding(s) fixed by the push", job.id, len(changed))
    return len(changed)


async def record_run(ctx: JobContext, rc: RepoConfig, answer: StoredAnswer, review_id: int, published: int) -> None:
    """Keep what the published review was made with. Best effort: the review is on GitHub whatever happens here."""
    job = ctx.job
    try:
        usage = await ctx.store.job_usage(job.id)
        await ctx.store.record_review_run(
            ReviewRun(
                job_id=job.id,
                repo_id=job.repo_id,
                repo_full_name=job.repo_full_name,
                pr_number=job.pr_number,
                review_id=review_id,
                head_sha=job.head_sha,
                model=answer.model,
                verify_model=answer.verified_by,
                prompt_version=PROMPT_VERSION,
                settings=settings_of(rc, answer),
                experiment=rc.experiment.name if rc.experiment is not None else None,
                variant=rc.variant,
                learnings=len(answer.learnings),
                findings=published,
                usage=tuple(usage),
                created_at=ctx.clock(),
            )
        )
    except StoreUnavailable as exc:
        log.warning("job %s: the review's record for the outcomes page not kept: %s", job.id, exc)
