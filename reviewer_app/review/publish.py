"""The publish stage: the stored answer rendered as one review (repeats of findings still open dropped, the rest
ranked by severity and confidence and capped, the shown ones anchored on commentable lines or moved into the body,
the others listed folded), posted once (reconciled by the job's marker: found means
done), recorded on the job with what its check run shows, and the pull request's memory tended (the review's
findings kept, the app's outdated threads resolved); in a dry run kept on the job instead, posted nowhere
(review/dry_run.py). An answer in a thread is posted through the same ``post_once``."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from reviewer_app.core.admission import AUTOMATIC_TRIGGERS, is_reply
from reviewer_app.core.anchoring import AnchorResult, anchor
from reviewer_app.core.errors import JobError, RateLimited
from reviewer_app.core.job_records import CheckReport, StoredAnswer
from reviewer_app.core.markdown import publishable
from reviewer_app.core.markers import find_published_review, make_marker
from reviewer_app.core.passes import pass_line
from reviewer_app.core.precision import rank_and_cap
from reviewer_app.core.review_model import SEVERITIES, InlineComment, ModelComment, ReviewCounts
from reviewer_app.core.states import JobState
from reviewer_app.dispatch.context import JobContext
from reviewer_app.github.check_run_text import MAX_CHECK_SUMMARY_CHARS, conclusion_for
from reviewer_app.github.client import MAX_PULL_FILES, GitHubClient
from reviewer_app.review.dry_run import dry_run_reason, hold_back, review_held_back
from reviewer_app.review.gate import Gate, Wanted, installation_of
from reviewer_app.review.gather import Change
from reviewer_app.review.memory import Memory, Recall
from reviewer_app.review.outcomes import record_run, settle_changed
from reviewer_app.review.render import (
    Links,
    earlier_finding_entry,
    group_by_reason,
    inline_comment,
    learning_entry,
    not_reviewed_line,
    render_review_body,
    top_findings,
    withheld_lines,
)
from reviewer_app.review.repo_config import RepoConfig
from reviewer_app.review.signals import Signals
from reviewer_app.store.base import Finding

log = logging.getLogger(__name__)

T = TypeVar("T")


async def post_once(
    ctx: JobContext,
    post: Callable[[Callable[[], Awaitable[None]]], Awaitable[T]],
    find: Callable[[], Awaitable[T | None]],
    *,
    confirm: Callable[[], Awaitable[None]] | None = None,
    record: Callable[[T], Awaitable[None]] | None = None,
) -> T:
    """Post one thing to GitHub once. The intent is a fenced write: a worker that lost its lease stops here, before
    posting. ``post`` gets a check to run with the installation's write turn held, right before the request: the
    intent written again (a push admitted while the job waited for its turn has superseded it by then), and
    ``confirm``'s own check. A request whose answer was lost (a timeout, a 502 after the write) is looked up with
    ``find``, not sent again. Shielded: a lost lease cancels the runner, but a request that may have reached GitHub is
    seen through to its ``record``, and a shutdown hands the job back only after it (JobContext.write_through)."""
    await ctx.checkpoint(publish_intent_at=ctx.clock())

    async def still_mine() -> None:
        await ctx.checkpoint(publish_intent_at=ctx.clock())
        if confirm is not None:
            await confirm()

    async def attempt() -> T:
        try:
            done = await post(still_mine)
        except JobError:
            found = await find()
            if found is None:
                raise
            done = found
        if record is not None:
            await record(done)
        return done

    return await ctx.write_through(attempt())


@dataclass(frozen=True)
class Review:
    """The review as it is posted, with what the job and its check run record of it."""

    summary: str
    body: str
    anchored: AnchorResult
    counts: ReviewCounts
    links: Links
    held_back: int  # findings withheld before publication, or past the cap
    withheld: list[str]  # the check run's folded account of them


class Publish:
    """The publish stage of review jobs."""

    def __init__(self, github: GitHubClient, memory: Memory, gate: Gate, signals: Signals | None = None) -> None:
        self.github = github
        self.memory = memory
        self.gate = gate
        self.signals = signals  # the team's reactions and resolved threads, read after publication (None: not read)

    async def __call__(
        self, ctx: JobContext, wanted: Wanted, change: Change, answer: StoredAnswer, *, check_run_id: int | None
    ) -> str:
        """Publish ``answer`` once and record it; returns the job's outcome in words."""
        review = await self._render(ctx, wanted, change, answer)
        why = dry_run_reason(self.gate.settings, wanted.config)
        if why is not None:  # nothing posted, no thread tended: what would have been is kept on the job
            held = review_held_back(review.body, review.anchored.inline, why)
            return await hold_back(
                ctx, held, counts=review.counts, config_errors=wanted.config.errors, check_run_id=check_run_id
            )
        review_id = await self._publish_once(ctx, review.body, [inline_comment(c) for c in review.anchored.inline])
        await _mark_applied(ctx, answer)
        resolved = await self._remember(ctx, review_id, review.anchored.inline, change.recall, wanted.config)
        # What the team did with the earlier findings, and what this review was made with (review/outcomes.py).
        await settle_changed(ctx, change.recall)
        await record_run(ctx, wanted.config, answer, review_id, len(review.anchored.inline))
        await self._record(ctx, wanted.config, answer, review, review_id, resolved, check_run_id)
        counts = review.counts
        return (
            f"reviewed: {counts.findings} finding(s), {counts.inline} inline comment(s), {counts.moved} in the "
            f"body, {counts.not_covered} file(s) not reviewed; review {review_id}"
        )

    async def _render(self, ctx: JobContext, wanted: Wanted, change: Change, answer: StoredAnswer) -> Review:
        job, pr, rc = ctx.job, wanted.pr, wanted.config
        taught = {x.id: x for x in change.learnings}  # a learning forgotten since the answer is named by its id
        summary = answer.summary
        unlisted = _unlisted_files(pr, change.listed)
        if unlisted:
            summary = f"{unlisted}\n\n{summary}"
        # What an earlier review raised on code that did not change is not posted again, even if the model repeats it.
        comments = await self.memory.drop_repeats(ctx, list(answer.comments), change.recall)
        # Nits are folded in the body when the repository wants them, otherwise not shown.
        if rc.nits != "fold":
            comments = [c for c in comments if c.rank != "nit"]
        # The most severe and most confident first; past the cap, and below warning, they are listed folded.
        shown = rank_and_cap(comments, max_comments=rc.max_comments)
        anchored = anchor(shown.shown, change.diffs)
        counts = _counts(answer, anchored, shown.folded)
        links = Links(
            str(pr.get("html_url") or f"https://github.com/{job.repo_full_name}/pull/{job.pr_number}"), job.head_sha
        )
        body = render_review_body(
            summary=summary,
            inline=anchored.inline,
            moved_comments=anchored.moved,
            folded=shown.folded,
            not_covered=answer.not_covered,
            incremental_note=answer.incremental_note,
            marker=make_marker(job.id, job.head_sha),
            counts=counts,
            links=links,
            earlier=[_earlier_entry(s.finding, s.line, links) for s in change.recall.still_open],
            learnings=[learning_entry(i, taught.get(i)) for i in answer.learnings],
        )
        withheld = withheld_lines(
            answer.withheld,
            len(shown.past_cap),
            links,
            min_confidence=rc.min_confidence,
            max_comments=rc.max_comments,
            learnings=taught,
        )
        return Review(summary, body, anchored, counts, links, len(answer.withheld) + len(shown.past_cap), withheld)

    async def _publish_once(self, ctx: JobContext, body: str, comments: list[dict[str, object]]) -> int:
        """Find this job's review by the app's bot, or post it once. Never posts for a head that moved on."""
        job = ctx.job
        inst, repo, number = installation_of(ctx), job.repo_full_name, job.pr_number
        await self.gate.recheck(ctx)
        bot = await self.github.bot_login()
        found = await self._own_review(ctx, bot)
        if found is not None:
            log.info("job %s: review %s already published; not posting again", job.id, found)
            return found

        async def post(before_send: Callable[[], Awaitable[None]]) -> int:
            review = await self.github.create_review(
                inst,
                repo,
                number,
                commit_id=job.head_sha,
                body=body,
                event="COMMENT",
                comments=comments,
                before_send=before_send,
            )
            return int(review["id"])

        async def confirm() -> None:
            # A request not answered meanwhile by an earlier job of the same request.
            if ctx.job.trigger not in AUTOMATIC_TRIGGERS:
                await self.gate.unanswered(ctx)

        async def record(review_id: int) -> None:
            # Published is published: recorded even when the lease was lost meanwhile, so the next incremental
            # review starts from this head.
            await ctx.store.record_published_review(job.id, review_id)

        # After a lost answer the lookup reads fresh: the review may have landed on a page no kept copy knows of.
        return await post_once(
            ctx, post, lambda: self._own_review(ctx, bot, fresh=True), confirm=confirm, record=record
        )

    async def _record(
        self,
        ctx: JobContext,
        rc: RepoConfig,
        answer: StoredAnswer,
        review: Review,
        review_id: int,
        resolved: int,
        check_run_id: int | None,
    ) -> None:
        """The review on its job, with what its check run shows."""
        links = review.links
        report = CheckReport(
            summary=publishable(review.summary, MAX_CHECK_SUMMARY_CHARS) if review.summary.strip() else "",
            top=tuple(f.entry for f in top_findings(review.anchored.inline, review.anchored.moved, links)),
            review_url=f"{links.pr_url}#pullrequestreview-{review_id}",
            not_reviewed=not_reviewed_line(group_by_reason(answer.not_covered)),
            conclusion=conclusion_for(review.counts, rc.conclusions),
            resolved=resolved,
            answers=await _answers_on_pr(ctx),
            withheld_count=review.held_back,
            withheld=tuple(review.withheld),
            passes=pass_line(answer.passes, len(answer.comments)) if answer.passes else "",
        )
        # check_run_id is None while another host's sync is creating the run: that host records it.
        await ctx.checkpoint(
            review_id=review_id,
            **({"check_run_id": check_run_id} if check_run_id else {}),
            details=replace(
                ctx.job.details,
                counts=review.counts,
                report=report,
                incremental=bool(answer.incremental_note),
                config_errors=tuple(rc.errors),
            ),
        )

    async def _own_review(self, ctx: JobContext, bot: str, *, fresh: bool = False) -> int | None:
        """The id of this job's review by the app's bot (its marker), if GitHub has one."""
        job = ctx.job
        reviews = await self.github.list_reviews(installation_of(ctx), job.repo_full_name, job.pr_number, fresh=fresh)
        found = find_published_review(reviews, bot_login=bot, job_id=job.id, head_sha=job.head_sha)
        return None if found is None else int(found["id"])

    async def _remember(
        self, ctx: JobContext, review_id: int, inline: Sequence[InlineComment], recall: Recall, rc: RepoConfig
    ) -> int:
        """After publication: keep the review's findings, link them to their threads and resolve the app's outdated
        threads. GitHub failing here never costs the published review: it is logged, and the next review of the pull
        request tries again. Returns how many of the PR's threads the app has resolved so far."""
        job = ctx.job
        await self.memory.record(ctx, review_id, inline)
        try:
            await self.memory.tend_threads(ctx, recall, resolve=rc.resolve_outdated)
        except RateLimited:
            # GitHub asked the app to wait: the job waits (no attempt spent), and its next attempt finds the review
            # by its marker, posts nothing again, and tends the threads then.
            raise
        except JobError as exc:
            log.warning("job %s: review threads not tended (tried again at the next review): %s", job.id, exc.reason)
        if self.signals is not None:
            await self.signals.at_review(ctx, [s.finding.id for s in recall.still_open if s.finding.id is not None])
        return await ctx.store.resolved_findings(job.repo_id, job.pr_number)


async def _mark_applied(ctx: JobContext, answer: StoredAnswer) -> None:
    """The learnings the published review used count as applied, once per job (a retry that finds the review
    published already counts nothing again)."""
    if answer.learnings and await ctx.store.claim_once(f"learnings-applied:{ctx.job.id}"):
        await ctx.store.mark_learnings_applied(answer.learnings, datetime.fromtimestamp(ctx.clock(), UTC))


def _counts(answer: StoredAnswer, anchored: AnchorResult, folded: Sequence[ModelComment]) -> ReviewCounts:
    severities = Counter(
        [*(c.severity for c in anchored.inline), *(c.rank for c in anchored.moved), *(c.rank for c in folded)]
    )
    return ReviewCounts(
        files_reviewed=answer.files_reviewed,
        inline=len(anchored.inline),
        moved=len(anchored.moved),
        not_covered=len(answer.not_covered),
        **{s: severities[s] for s in SEVERITIES},
        folded=len(folded),
    )


def _earlier_entry(finding: Finding, line: int, links: Links) -> str:
    """An earlier finding still open, for the review body: linked to its comment when its id is known."""
    if finding.comment_id is not None:
        url = f"{links.pr_url}#discussion_r{finding.comment_id}"
    elif finding.review_id is not None:
        url = f"{links.pr_url}#pullrequestreview-{finding.review_id}"
    else:
        url = links.permalink(finding.path, line)
    return earlier_finding_entry(finding.severity, finding.path, line, finding.title, url)


async def _answers_on_pr(ctx: JobContext) -> int:
    """How many answers in threads (review/answer.py) the app posted on this pull request so far."""
    job = ctx.job
    done = await ctx.store.list_jobs(
        states=[JobState.SUCCEEDED.value], repo=job.repo_full_name, pr_number=job.pr_number, limit=500
    )
    return sum(1 for j in done if is_reply(j.trigger))


def _unlisted_files(pr: dict[str, Any], listed: int) -> str | None:
    """What the review body says when GitHub listed fewer files than the pull request changes (it lists at most
    3,000, and cuts the rest without a word), or None."""
    changed = pr.get("changed_files")
    if not isinstance(changed, int) or isinstance(changed, bool) or changed <= listed:
        return None
    return (
        f"**Not reviewed: {changed - listed} of the {changed} changed files.** GitHub lists at most "
        f"{MAX_PULL_FILES:,} files of a pull request, so the others were neither seen nor reviewed. Split the pull "
        "request to have them reviewed."
    )
