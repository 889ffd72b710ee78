"""The gate stage: is this review still wanted, and for whom. It gathers the facts (who asked and their permission, the
pull request and the repository's settings as they are now, what the store and GitHub's markers know of the head)
and carries out core/gate.py's decisions: a skip ends the job (visibly), a wait defers it, a moved head is handed over
and supersedes it. Asked when a job starts, and again before each model call and before publication."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, NoReturn

from reviewer_app.core.admission import (
    AUTOMATIC_TRIGGERS,
    NO_ACCESS,
    TRIGGER_AUTO,
    TRIGGER_DRAFT,
    TRIGGER_RETARGET,
    Enqueue,
)
from reviewer_app.core.errors import (
    Cancelled,
    Deferred,
    InstallationUnavailable,
    PermanentError,
    Settled,
    Superseded,
)
from reviewer_app.core.events import decide_observed_head
from reviewer_app.core.gate import (
    CONFIG_PATH,
    AutomaticFacts,
    Moved,
    Skip,
    Wait,
    automatic_verdict,
    head_verdict,
    known_older,
    looks_on_github,
    reads_may_lag,
    request_answered,
    requester_refusal,
    review_of_jobs,
    reviewed_on_github,
    settings_refusal,
)
from reviewer_app.core.markers import reviewed_by_bot
from reviewer_app.core.states import JobState
from reviewer_app.dispatch.context import JobContext
from reviewer_app.github.client import GitHubClient
from reviewer_app.review.installation import learn_installation
from reviewer_app.review.permissions import Permissions, installation_of
from reviewer_app.review.repo_config import RepoConfig, parse_repo_config, with_variant
from reviewer_app.review.settings import ReviewSettings
from reviewer_app.store.base import Delivery

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Wanted:
    """The gate's hand-off: the pull request as read when the job started, and the repository's settings."""

    pr: dict[str, Any]
    config: RepoConfig


@contextlib.contextmanager
def ends_without_access(ctx: JobContext) -> Iterator[None]:
    """Suspended or uninstalled before its webhook arrived: the job ends with its episode, so the head is reviewed
    again when the installation is back (the sweep), not counted as failed."""
    try:
        yield
    except InstallationUnavailable as exc:
        log.info("job %s: %s", ctx.job.id, exc.reason)
        raise Cancelled(NO_ACCESS) from None


def refuse(verdict: Skip | None) -> None:
    """A skip ends the job (its check run, if any, says why)."""
    if verdict is not None:
        raise Cancelled(verdict.reason)


class Gate:
    """The gate stage of review jobs; it keeps who may request reviews for a minute, across jobs."""

    def __init__(self, github: GitHubClient, settings: ReviewSettings) -> None:
        self.github = github
        self.settings = settings
        self.permissions = Permissions(github)

    async def __call__(self, ctx: JobContext) -> Wanted:
        """The job's first look: who asked, the pull request now (a request takes the head it finds), the repository's
        settings from the base branch (a pull request cannot rewrite its own review rules), and its trigger's rules."""
        await learn_installation(self.github, ctx)  # a repository's webhook (`gh webhook forward`) names none
        inst = installation_of(ctx)
        job = ctx.job
        if job.details.verify_permission:
            await self._check_requester(ctx)
        pr = await self.github.get_pull(inst, job.repo_full_name, job.pr_number)
        if not job.head_sha:
            # A requested review (`/review`) names no head: it reviews the head it finds, from here on.
            head = str((pr.get("head") or {}).get("sha") or "")
            await ctx.checkpoint(head_sha=head)
            job = ctx.job = replace(job, head_sha=head)
        await self.still_applies(ctx, pr)
        base_ref = str((pr.get("base") or {}).get("ref") or "")
        text = await self.github.get_file_content(inst, job.repo_full_name, CONFIG_PATH, base_ref) if base_ref else None
        limits = {"max_input_tokens": self.settings.max_input_tokens, "max_parts": self.settings.max_parts}
        rc = parse_repo_config(text, **limits)
        rc = with_variant(rc, rc.experiment or self.settings.experiment, job.repo_id, job.pr_number, **limits)
        draft = pr.get("draft") is True
        if job.trigger in AUTOMATIC_TRIGGERS:
            verdict = await self._automatic(ctx, draft, rc)
            if isinstance(verdict, Wait):
                raise Deferred(verdict.reason, retry_at=ctx.clock() + self.settings.wait_seconds)
            if verdict is not None:
                await self._skip(ctx, verdict.reason)
        else:
            if job.trigger.startswith(TRIGGER_RETARGET):
                refuse(settings_refusal(draft=draft, auto=rc.auto, drafts=rc.drafts))
            await self.unanswered(ctx)
        return Wanted(pr, rc)

    async def recheck(self, ctx: JobContext) -> None:
        """The head read at the start may be minutes old (reading context, an earlier part, the model's answer): a
        push since then makes the next call or the publication pointless, and pushing right after a review starts is
        free to anyone."""
        job = ctx.job
        await self.still_applies(
            ctx, await self.github.get_pull(installation_of(ctx), job.repo_full_name, job.pr_number)
        )

    async def still_applies(self, ctx: JobContext, pr: dict[str, Any]) -> None:
        """Raise Cancelled or Superseded when the pull request moved on from this job. A head that moved is handed
        over first: the head the worker reads is the surest ordering signal there is, so it is admitted (a duplicate
        when its webhook came first), and a requested review pending on this PR follows it there."""
        job = ctx.job
        current = str((pr.get("head") or {}).get("sha") or "")
        older = bool(
            current
            and current != job.head_sha
            and reads_may_lag(before_sha=job.before_sha, created_at=job.created_at, now=ctx.clock())
            and known_older(
                current, job_head=job.head_sha, job_before=job.before_sha or "", pushes=await self._pushes(ctx)
            )
        )
        verdict = head_verdict(state=pr.get("state"), current=current, head_sha=job.head_sha, older=older)
        if isinstance(verdict, Wait):
            raise Deferred(verdict.reason, retry_at=ctx.clock() + self.settings.wait_seconds)
        if isinstance(verdict, Moved):
            await self._hand_over(ctx, pr)
            raise Superseded(f"superseded by newer commit {verdict.head}", by_sha=verdict.head)
        refuse(verdict)

    async def unanswered(self, ctx: JobContext) -> None:
        """A request ends when an earlier job of it published its review after all. Asked before the model call and
        again right before posting."""
        job = ctx.job
        jobs = await ctx.store.list_jobs(repo=job.repo_full_name, pr_number=job.pr_number, limit=500)
        earlier = {j.id: j for j in jobs if j.trigger == job.trigger and j.id != job.id}
        if not earlier:
            return
        review_id = next((j.review_id for j in earlier.values() if j.review_id is not None), None)
        if review_id is None:
            bot = await self.github.bot_login()
            reviews = await self.github.list_reviews(installation_of(ctx), job.repo_full_name, job.pr_number)
            review_id = review_of_jobs(reviews, bot_login=bot, job_ids=earlier)
        refuse(request_answered(review_id))

    async def _check_requester(self, ctx: JobContext) -> None:
        """Answers the request with a reaction on its comment either way (GitHub keeps one reaction per kind and user,
        so a retry adds nothing); a refusal is a visible skip."""
        job = ctx.job
        inst = installation_of(ctx)
        login, comment_id = job.details.requested_by or "", job.details.comment_id
        refusal = requester_refusal(login, await self.permissions.of(ctx, login))
        if isinstance(comment_id, int):
            try:
                await self.github.create_reaction(inst, job.repo_full_name, comment_id, "-1" if refusal else "+1")
            except PermanentError as exc:  # the comment was deleted meanwhile: the answer still stands
                log.info("job %s: no reaction on comment %s: %s", job.id, comment_id, exc.reason)
        refuse(refusal)

    async def _automatic(self, ctx: JobContext, draft: bool, rc: RepoConfig) -> Skip | Wait | None:
        """An automatic review's facts, read only where its rules look at them, and core/gate.py's verdict on them."""
        job = ctx.job
        draft_job = None
        if job.trigger == TRIGGER_AUTO:
            running = await ctx.store.list_jobs(
                states=[JobState.RUNNING.value], repo=job.repo_full_name, pr_number=job.pr_number
            )
            draft_job = next((j.id for j in running if j.trigger == TRIGGER_DRAFT and j.head_sha == job.head_sha), None)
        published = job.review_id is not None
        facts = AutomaticFacts(
            trigger=job.trigger,
            head_sha=job.head_sha,
            draft=draft,
            auto=rc.auto,
            drafts=rc.drafts,
            draft_job=draft_job,
            published=published,
            answered=job.answer is not None,
            last_reviewed=None if published else await ctx.store.last_reviewed_head(job.repo_id, job.pr_number),
        )
        verdict = automatic_verdict(facts)
        if verdict is None and looks_on_github(facts):
            # This job has no stored answer, so none of its attempts published: a review of the head is another's.
            bot = await self.github.bot_login()
            reviews = await self.github.list_reviews(installation_of(ctx), job.repo_full_name, job.pr_number)
            verdict = reviewed_on_github(job.head_sha, reviewed_by_bot(reviews, bot_login=bot, head_sha=job.head_sha))
        return verdict

    async def _skip(self, ctx: JobContext, reason: str) -> NoReturn:
        """End an automatic job skipped, unless an event for its head was admitted since it read the pull request
        (a draft marked ready while this job was deciding: that event found this job running and was a duplicate);
        then it decides again, on the pull request as it is now."""
        if await ctx.store.skip_if_unpoked(ctx.lease, pokes=ctx.job.pokes, now=ctx.clock(), outcome=reason):
            raise Settled(reason)
        raise Deferred(
            "an event for this head arrived while the review was being decided; deciding again", retry_at=ctx.clock()
        )

    async def _pushes(self, ctx: JobContext) -> list[tuple[str, str]]:
        """The PR's pushes the store knows: each head with the head it named as replaced."""
        job = ctx.job
        jobs = await ctx.store.list_jobs(repo=job.repo_full_name, pr_number=job.pr_number, limit=200)
        return [(j.head_sha, j.before_sha) for j in jobs if j.head_sha and j.before_sha]

    async def _hand_over(self, ctx: JobContext, pr: dict[str, Any]) -> None:
        job = ctx.job
        head = str((pr.get("head") or {}).get("sha") or "")
        decision = decide_observed_head(installation_of(ctx), job.repo_id, job.repo_full_name, pr, action="handover")
        if not isinstance(decision, Enqueue):
            return
        delivery = Delivery(f"handover:{job.id}:{head}", "pull_request", "handover")
        result = await ctx.store.admit(delivery, decision, now=ctx.clock(), max_attempts=job.max_attempts)
        log.info(
            "job %s: the pull request moved on to %s; handed over (%s, job %s)",
            job.id,
            head[:12],
            result.outcome,
            result.job_id,
        )
