"""The review runner: check run in progress, read the change, ask Claude (once), anchor, publish once."""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NoReturn

import cachetools

from reviewer_app.core.admission import (
    AUTOMATIC_TRIGGERS,
    NO_ACCESS,
    PR_CLOSED_AT_WORKER,
    TRIGGER_AUTO,
    TRIGGER_DRAFT,
    TRIGGER_RETARGET,
    Enqueue,
    is_reply,
)
from reviewer_app.core.anchoring import anchor
from reviewer_app.core.cancel_reasons import COVERED_PREFIX
from reviewer_app.core.commands import WRITE_PERMISSIONS
from reviewer_app.core.errors import (
    Cancelled,
    Deferred,
    InstallationUnavailable,
    JobError,
    PermanentError,
    RateLimited,
    Settled,
    Superseded,
)
from reviewer_app.core.events import decide_observed_head
from reviewer_app.core.job_records import CheckReport, ModelProgress, PartAnswer, StoredAnswer
from reviewer_app.core.markdown import publishable
from reviewer_app.core.markers import find_published_review, make_marker, parse_markers, reviewed_by_bot
from reviewer_app.core.pr_work import DRAFT_SKIP
from reviewer_app.core.review_model import SEVERITIES, InlineComment, ModelAnswer, ModelComment, ReviewCounts
from reviewer_app.core.states import JobState
from reviewer_app.dispatch.context import JobContext
from reviewer_app.github.check_run_text import MAX_CHECK_SUMMARY_CHARS, conclusion_for, desired_check
from reviewer_app.github.checks import CheckRuns
from reviewer_app.github.client import MAX_COMPARE_FILES, MAX_PULL_FILES, GitHubClient
from reviewer_app.github.scopes import as_work
from reviewer_app.review.batches import PENDING, Batches
from reviewer_app.review.budget import plan_parts
from reviewer_app.review.claude import ClaudeReviewer, UsageMeter
from reviewer_app.review.explore import RepositoryTools, ToolLimits, tools_note
from reviewer_app.review.memory import Memory, Recall
from reviewer_app.review.prepare import overview, part_note, prepare, without_context
from reviewer_app.review.prompt import (
    SYSTEM_PROMPT,
    OverviewRow,
    PromptFile,
    PromptPR,
    RaisedFinding,
    build_user_blocks,
    build_user_message,
    estimate_tokens,
    render_file,
)
from reviewer_app.review.reading import ContentReader
from reviewer_app.review.render import (
    Links,
    earlier_finding_entry,
    group_by_reason,
    inline_comment,
    not_reviewed_line,
    render_review_body,
    top_findings,
)
from reviewer_app.review.repo_config import CONFIG_PATH, RepoConfig, parse_repo_config
from reviewer_app.review.selection import Selection, select_files
from reviewer_app.store.base import Delivery, Finding, Usage

log = logging.getLogger(__name__)

PERMISSION_CACHE_SECONDS = 60.0
DRAFT_SKIP_TEXT = (
    f"{DRAFT_SKIP}; it is reviewed when marked ready for review (or set `drafts: true` in {CONFIG_PATH}, or comment "
    "/review)"
)
# How long after its admission a job takes a read of an older head for GitHub's lag rather than the truth.
STALE_READ_SECONDS = 15.0


@dataclass(frozen=True)
class Scope:
    selection: Selection
    note: str | None  # set for an incremental review
    base: str | None = None  # the commit the diffs start from, when known (an incremental review's last head)


@dataclass(frozen=True)
class ReviewSettings:
    max_input_tokens: int = 60000
    max_parts: int = 3
    ignore: tuple[str, ...] = ()
    wait_seconds: float = 10.0  # before a job that waits on another one looks again
    context_lines: int = 150  # unchanged lines shown around the changes of one file (0: none)
    repository_tools: bool = False  # the server's default for repositories that do not say
    tool_limits: ToolLimits = field(default_factory=ToolLimits)


class ReviewPipeline:
    """The dispatcher's runner for review jobs. Every external write is recoverable:
    the model's answer is stored before publication, and publication reconciles against the marker first."""

    def __init__(
        self,
        github: GitHubClient,
        claude: ClaudeReviewer,
        checks: CheckRuns,
        settings: ReviewSettings,
        batches: Batches | None = None,
    ) -> None:
        self.github = github
        self.claude = claude
        self.checks = checks
        self.settings = settings
        self.batches = batches  # Message Batches for work that can wait (review/batches.py); None: all interactive
        self.reader = ContentReader(github)
        self.memory = Memory(github, self.reader)
        # (installation, repository, login) -> permission, for a minute: a burst of `/review` by one person costs one
        # lookup; a changed permission counts after at most a minute.
        self._permissions: cachetools.TTLCache[tuple[int, str, str], str] = cachetools.TTLCache(
            maxsize=4096, ttl=PERMISSION_CACHE_SECONDS
        )

    @as_work("review")
    async def __call__(self, ctx: JobContext) -> str:
        try:
            return await self._review(ctx)
        except InstallationUnavailable as exc:
            # Suspended or uninstalled before its webhook arrived: the job ends with its episode, so the head is
            # reviewed again when the installation is back (the sweep), not counted as failed.
            log.info("job %s: %s", ctx.job.id, exc.reason)
            raise Cancelled(NO_ACCESS) from None

    async def _review(self, ctx: JobContext) -> str:
        job = ctx.job
        inst, repo, number = job.installation_id, job.repo_full_name, job.pr_number
        if inst is None:
            raise Cancelled("the event carried no installation; the app cannot act on this repository")
        if job.details.verify_permission:
            await self._check_requester(ctx)
        pr = await self.github.get_pull(inst, repo, number)
        if not job.head_sha:
            # A requested review (`/review`) names no head: it reviews the head it finds, from here on.
            head = str((pr.get("head") or {}).get("sha") or "")
            await ctx.checkpoint(head_sha=head)
            job = ctx.job = replace(job, head_sha=head)
        await self._still_applies(ctx, pr)
        # The base branch's settings: a pull request cannot rewrite its own review rules.
        base_ref = str((pr.get("base") or {}).get("ref") or "")
        text = await self.github.get_file_content(inst, repo, CONFIG_PATH, base_ref) if base_ref else None
        rc = parse_repo_config(text, max_input_tokens=self.settings.max_input_tokens, max_parts=self.settings.max_parts)
        if job.trigger in AUTOMATIC_TRIGGERS:
            try:
                await self._check_automatic(ctx, pr, rc)
            except Cancelled as skip:
                await self._skip(ctx, skip.reason)
        else:
            if job.trigger.startswith(TRIGGER_RETARGET):
                _check_retarget(pr, rc)
            await self._check_unanswered(ctx)
        async with self.checks.lock(job.id):
            check_run_id = await self.checks.show_for_attempt(ctx, desired_check(job))
        ctx.ensure_held()

        files = await self.github.list_pull_files(inst, repo, number)
        ignore = (*self.settings.ignore, *rc.ignore)
        selection = select_files(files, ignore=ignore)
        diffs = {d.path: d for d in selection.reviewed}
        recall = await self._recall(ctx)
        stored = job.answer
        if stored is None:
            scope = await self._scope(ctx, selection, ignore)
            stored = await self._ask_model(ctx, pr, scope, rc, recall)
            # The answer replaces the progress it was built from (finished parts, tool turns).
            details = replace(ctx.job.details, model_progress=None)
            await ctx.checkpoint(answer=stored, details=details)
            job = ctx.job = replace(ctx.job, details=details)
        else:
            log.info("job %s: publishing the stored model answer (no new model call)", job.id)
        summary = stored.summary
        unlisted = _unlisted_files(pr, len(files))
        if unlisted:
            summary = f"{unlisted}\n\n{summary}"
        comments, not_covered = stored.comments, stored.not_covered
        # What an earlier review raised on code that did not change is not posted again, even if the model repeats it.
        comments = await self.memory.drop_repeats(ctx, list(comments), recall)
        # Nits never go inline: folded in the body when the repository wants them, otherwise not shown.
        nits = [c for c in comments if c.rank == "nit"] if rc.nits == "fold" else []
        anchored = anchor([c for c in comments if c.rank != "nit"], diffs)
        severities = Counter(
            [*(c.severity for c in anchored.inline), *(c.rank for c in anchored.moved), *("nit" for _ in nits)]
        )
        counts = ReviewCounts(
            files_reviewed=stored.files_reviewed,
            inline=len(anchored.inline),
            moved=len(anchored.moved),
            not_covered=len(not_covered),
            **{s: severities[s] for s in SEVERITIES},
        )
        links = Links(str(pr.get("html_url") or f"https://github.com/{repo}/pull/{number}"), job.head_sha)
        earlier = [_earlier_entry(s.finding, s.line, links) for s in recall.still_open]
        body = render_review_body(
            summary=summary,
            inline=anchored.inline,
            moved_comments=anchored.moved,
            nits=nits,
            not_covered=not_covered,
            incremental_note=stored.incremental_note,
            marker=make_marker(job.id, job.head_sha),
            counts=counts,
            links=links,
            earlier=earlier,
        )

        review_id = await self._publish_once(ctx, body, [inline_comment(c) for c in anchored.inline])
        resolved = await self._remember(ctx, review_id, anchored.inline, recall, rc)
        report = CheckReport(
            summary=publishable(summary, MAX_CHECK_SUMMARY_CHARS) if summary.strip() else "",
            top=tuple(f.entry for f in top_findings(anchored.inline, anchored.moved, links)),
            review_url=f"{links.pr_url}#pullrequestreview-{review_id}",
            not_reviewed=not_reviewed_line(group_by_reason(not_covered)),
            conclusion=conclusion_for(counts, rc.conclusions),
            resolved=resolved,
            answers=await _answers_on_pr(ctx),
        )
        # check_run_id is None while another host's sync is creating the run: that host records it.
        await ctx.checkpoint(
            review_id=review_id,
            **({"check_run_id": check_run_id} if check_run_id else {}),
            details=replace(
                job.details,
                counts=counts,
                report=report,
                incremental=bool(stored.incremental_note),
                config_errors=tuple(rc.errors),
            ),
        )
        return (
            f"reviewed: {counts.findings} finding(s), {counts.inline} inline comment(s), {counts.moved} in the "
            f"body, {counts.not_covered} file(s) not reviewed; review {review_id}"
        )

    async def _recall(self, ctx: JobContext) -> Recall:
        """The PR's open findings at this head; none when GitHub cannot tell (the review goes on without them)."""
        try:
            return await self.memory.recall(ctx)
        except JobError as exc:
            log.warning("job %s: earlier findings not checked: %s", ctx.job.id, exc.reason)
            return Recall()

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
        return await ctx.store.resolved_findings(job.repo_id, job.pr_number)

    async def _check_requester(self, ctx: JobContext) -> None:
        """A requested review (`/review` by someone other than the repository's owner) runs only for people with
        write access. Answers with a reaction on the comment either way (GitHub keeps one reaction per kind and
        user, so a retry adds nothing); a refusal is a visible skip."""
        job = ctx.job
        assert job.installation_id is not None
        login, comment_id = job.details.requested_by or "", job.details.comment_id
        key = (job.installation_id, job.repo_full_name, login)
        permission = self._permissions.get(key)
        if permission is None:
            try:
                permission = await self.github.collaborator_permission(job.installation_id, job.repo_full_name, login)
                self._permissions[key] = permission
            except PermanentError as exc:  # e.g. 404 for an account that no longer exists: fail closed
                log.warning("job %s: permission of %s not known: %s", job.id, login, exc.reason)
                permission = "unknown"
        allowed = permission in WRITE_PERMISSIONS
        if isinstance(comment_id, int):
            try:
                await self.github.create_reaction(
                    job.installation_id, job.repo_full_name, comment_id, "+1" if allowed else "-1"
                )
            except PermanentError as exc:  # the comment was deleted meanwhile: the answer still stands
                log.info("job %s: no reaction on comment %s: %s", job.id, comment_id, exc.reason)
        if not allowed:
            raise Cancelled(
                f"skipped: {login} may not request reviews here ({permission} access; reviews can be "
                "requested by people with write access)"
            )

    async def _check_unanswered(self, ctx: JobContext) -> None:
        """A requested review that followed the pull request to a newer head ends here when an earlier job of the same
        request published its review after all (its POST was in flight when the push moved the request on): one
        request, one review. Asked before the model call and again right before posting."""
        job = ctx.job
        assert job.installation_id is not None
        jobs = await ctx.store.list_jobs(repo=job.repo_full_name, pr_number=job.pr_number, limit=500)
        earlier = {j.id: j for j in jobs if j.trigger == job.trigger and j.id != job.id}
        if not earlier:
            return
        review_id = next((j.review_id for j in earlier.values() if j.review_id is not None), None)
        if review_id is None:
            bot = await self.github.bot_login()
            reviews = await self.github.list_reviews(job.installation_id, job.repo_full_name, job.pr_number)
            review_id = next(
                (
                    int(r["id"])
                    for r in reviews
                    if str((r.get("user") or {}).get("login")) == bot
                    and any(m.job_id in earlier for m in parse_markers(r.get("body")))
                ),
                None,
            )
        if review_id is not None:
            raise Cancelled(f"{COVERED_PREFIX}the request was answered by review {review_id} of an earlier commit")

    async def _skip(self, ctx: JobContext, reason: str) -> NoReturn:
        """End an automatic job skipped, unless an event for its head was admitted since it read the pull request
        (a draft marked ready while this job was deciding: that event found this job running and was a duplicate);
        then it decides again, on the pull request as it is now."""
        if await ctx.store.skip_if_unpoked(ctx.lease, pokes=ctx.job.pokes, now=ctx.clock(), outcome=reason):
            raise Settled(reason)
        raise Deferred(
            "an event for this head arrived while the review was being decided; deciding again", retry_at=ctx.clock()
        )

    async def _check_automatic(self, ctx: JobContext, pr: dict[str, Any], rc: RepoConfig) -> None:
        """Raise Cancelled (a visible skip) when the repository's settings or the pull request's state as it is now
        say this automatic review should not run. `/review` and Re-run are never skipped here."""
        job = ctx.job
        if not rc.auto:
            raise Cancelled(
                f"skipped: automatic reviews are turned off in {CONFIG_PATH}; comment /review to ask for one"
            )
        is_draft = pr.get("draft") is True
        if is_draft and not rc.drafts:
            raise Cancelled(DRAFT_SKIP_TEXT)
        if job.trigger == TRIGGER_DRAFT and not is_draft:
            # Marked ready since: its ready_for_review job (or the sweep, if that webhook went missing) reviews it.
            raise Cancelled(
                "skipped: the pull request is no longer a draft; its ready-for-review review covers this head"
            )
        if job.trigger == TRIGGER_AUTO:
            running = await ctx.store.list_jobs(
                states=[JobState.RUNNING.value], repo=job.repo_full_name, pr_number=job.pr_number
            )
            draft = next((j for j in running if j.trigger == TRIGGER_DRAFT and j.head_sha == job.head_sha), None)
            if draft is not None:
                # Marked ready while its draft's review of this head runs: wait for it, then this job finds the
                # head reviewed (or reviews it, if the draft's job was skipped). Never two reviews of one head.
                raise Deferred(
                    f"waiting for the draft's review of this head (job {draft.id}) to finish",
                    retry_at=ctx.clock() + self.settings.wait_seconds,
                )
        # A job that published its own review (an attempt that then waited on GitHub, or died before finishing)
        # goes on to find it by its marker: its own review does not make it "covered".
        last = None if job.review_id is not None else await ctx.store.last_reviewed_head(job.repo_id, job.pr_number)
        if last == job.head_sha:
            # Reviewed as a draft (drafts: true), then marked ready at the same head: nothing new to review.
            # "covered", not "skipped": the check run (if one was opened) says success, so a later run on this head
            # does not hide the review's own check behind a grey "skipped".
            raise Cancelled(
                f"{COVERED_PREFIX}commit {job.head_sha} was already reviewed; comment /review to review it again"
            )
        if job.review_id is None and job.answer is None and last is None:
            # The store remembers no review of this pull request: GitHub's markers may (see below).
            await self._check_reviewed_on_github(ctx)

    async def _check_reviewed_on_github(self, ctx: JobContext) -> None:
        """Before an automatic review is paid for: a head the app's bot reviewed already, by the markers on GitHub,
        is not reviewed again. What the store knows covers the ordinary case; this covers what it no longer knows (a
        signed delivery replayed after its jobs were pruned, a database restored from an old backup)."""
        job = ctx.job
        assert job.installation_id is not None
        bot = await self.github.bot_login()
        reviews = await self.github.list_reviews(job.installation_id, job.repo_full_name, job.pr_number)
        # This job has no stored answer, so none of its attempts published: a review of the head is another's.
        if reviewed_by_bot(reviews, bot_login=bot, head_sha=job.head_sha):
            raise Cancelled(
                f"{COVERED_PREFIX}commit {job.head_sha} was already reviewed (found on GitHub); comment /review to "
                "review it again"
            )

    async def _scope(self, ctx: JobContext, selection: Selection, ignore: tuple[str, ...]) -> Scope:
        """What the model reviews: the whole PR, or only what changed since the last reviewed head."""
        job = ctx.job
        assert job.installation_id is not None
        full = Scope(selection, None)
        if job.details.full:
            return full
        last = await ctx.store.last_reviewed_head(job.repo_id, job.pr_number)
        if not last or last == job.head_sha:
            return full
        comparison = await self.github.compare(job.installation_id, job.repo_full_name, last, job.head_sha)
        if comparison.get("status") != "ahead":
            # The reviewed commit is no longer in the branch's history (force-push): review everything again.
            log.info(
                "job %s: %s is not an ancestor of %s; reviewing the whole pull request",
                job.id,
                last[:12],
                job.head_sha[:12],
            )
            return full
        compared = comparison.get("files") or []
        if len(compared) >= MAX_COMPARE_FILES:
            # GitHub's compare lists at most 300 files and says nothing of the rest: an incremental review would
            # neither review nor list them. The pull request's own file list goes further.
            log.info(
                "job %s: the comparison since %s lists %d files, GitHub's limit; reviewing the whole pull request",
                job.id,
                last[:12],
                len(compared),
            )
            return full
        changed = select_files(compared, ignore=ignore)
        note = (
            f"Incremental review: this covers only the changes since the last reviewed commit {last[:12]} "
            f"(up to {job.head_sha[:12]}). Comment `/review full` to review the whole pull request."
        )
        return Scope(changed, note, base=last)

    async def _still_applies(self, ctx: JobContext, pr: dict[str, Any]) -> None:
        """Raise Cancelled or Superseded when the pull request moved on from this job. A head that moved is handed
        over first: the head the worker reads is the surest ordering signal there is, so it is admitted (a
        duplicate when its webhook came first), and a requested review pending on this PR follows it there."""
        job = ctx.job
        if pr.get("state") != "open":
            raise Cancelled(PR_CLOSED_AT_WORKER)
        current = (pr.get("head") or {}).get("sha")
        if current and current != job.head_sha:
            if await self._known_older(ctx, str(current)):
                # GitHub's reads are eventually consistent: a read that shows a head the store knows this one
                # replaced is stale, and never undoes newer knowledge. Read again shortly.
                raise Deferred(
                    f"GitHub still shows {current[:12]}, which this job's head replaced; reading the pull request again",
                    retry_at=ctx.clock() + self.settings.wait_seconds,
                )
            await self._hand_over(ctx, pr)
            raise Superseded(f"superseded by newer commit {current}", by_sha=current)

    async def _known_older(self, ctx: JobContext, head: str) -> bool:
        """Whether the store knows ``head`` is older than this job's head by the pushes' own links: following the
        heads each push named as replaced (``before``) back from this job's head reaches ``head``, and no push of
        ``head`` names one of the heads passed on the way (a force-push back to it). Event times are not used: a
        handed-over head carries the time it was read, not the time it was pushed. Trusted for STALE_READ_SECONDS
        after the job was admitted; past that, the read wins."""
        job = ctx.job
        if not job.before_sha or ctx.clock() - job.created_at > STALE_READ_SECONDS:
            return False
        jobs = await ctx.store.list_jobs(repo=job.repo_full_name, pr_number=job.pr_number, limit=200)
        replaced: dict[str, set[str]] = {}
        for j in jobs:
            if j.head_sha and j.before_sha:
                replaced.setdefault(j.head_sha, set()).add(j.before_sha)
        replaced.setdefault(job.head_sha, set()).add(job.before_sha)
        newer, step, reached = {job.head_sha}, {job.before_sha}, False
        while step and len(newer) < 50:
            reached = reached or head in step
            step -= {head}  # not walked through: only the heads newer than it are collected
            newer |= step
            step = {b for h in step for b in replaced.get(h, ())} - newer
        return reached and not (replaced.get(head, set()) & newer)

    async def _hand_over(self, ctx: JobContext, pr: dict[str, Any]) -> None:
        job = ctx.job
        assert job.installation_id is not None
        head = str((pr.get("head") or {}).get("sha") or "")
        decision = decide_observed_head(job.installation_id, job.repo_id, job.repo_full_name, pr, action="handover")
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

    async def _ask_model(
        self, ctx: JobContext, pr: dict[str, Any], scope: Scope, rc: RepoConfig, recall: Recall
    ) -> StoredAnswer:
        job = ctx.job
        assert job.installation_id is not None
        inst = job.installation_id
        selection = scope.selection

        async def base_sha() -> str | None:
            if scope.base:
                return scope.base
            base = str((pr.get("base") or {}).get("sha") or "")
            if not base:
                return None
            comparison = await self.github.compare(inst, job.repo_full_name, base, job.head_sha)
            return str((comparison.get("merge_base_commit") or {}).get("sha") or "") or None

        context_lines = self.settings.context_lines if rc.context else 0
        raised = tuple(
            RaisedFinding(s.finding.path, s.line, s.finding.severity, s.finding.title) for s in recall.still_open
        )
        prepared = await prepare(
            selection,
            reader=self.reader,
            installation_id=inst,
            repo=job.repo_full_name,
            head_sha=job.head_sha,
            base_sha=base_sha,
            context_lines=context_lines,
        )

        def prompt(
            files: tuple[PromptFile, ...] = (),
            rows: tuple[OverviewRow, ...] = (),
            note: str | None = None,
            tools: RepositoryTools | None = None,
        ) -> PromptPR:
            return PromptPR(
                repo=job.repo_full_name,
                number=job.pr_number,
                title=str(pr.get("title") or ""),
                description=str(pr.get("body") or ""),
                head_sha=job.head_sha,
                files=files,
                changed_files=rows,
                incremental_note=scope.note,
                part_note=note,
                extra_instructions=rc.instructions,
                language=rc.language,
                tools_note=tools_note(tools.limits) if tools is not None else None,
                nits=rc.nits == "fold",
                already_raised=raised,
            )

        # The file list is as long whatever the plan: estimate it with the longest "where" it can get.
        rows = tuple(
            OverviewRow(c.path, c.status, c.previous_path, c.additions, c.deletions, "x" * 120)
            for c in selection.changed
        )
        shared = build_user_message(
            prompt(rows=rows, note=part_note(9, 9), tools=self._tools(inst, job.repo_full_name, job.head_sha, rc))
        )
        overhead = estimate_tokens(SYSTEM_PROMPT) + estimate_tokens(shared) + 1500  # + tool and answer framing
        plan = plan_parts(
            prepared.diffs,
            max_input_tokens=rc.max_input_tokens or self.settings.max_input_tokens,
            fixed_overhead_tokens=overhead,
            estimate=estimate_tokens,
            max_parts=rc.max_parts or self.settings.max_parts,
            last=prepared.computed,
            render=lambda d: render_file(prepared.files[d.path]),
            fallback_render=lambda d: render_file(without_context(prepared.files[d.path])),
        )
        stats = prepared.stats
        log.info(
            "job %s: context for %d of %d hunks (tree-sitter %d, indentation %d), %d lines; %d files unread",
            job.id,
            stats.by_parser + stats.by_indentation,
            stats.hunks,
            stats.by_parser,
            stats.by_indentation,
            stats.context_lines,
            stats.files_without,
        )
        rows = tuple(overview(selection.changed, plan, prepared))
        summaries: list[str] = []
        comments: list[ModelComment] = []
        model = ""
        tools = self._tools(job.installation_id, job.repo_full_name, job.head_sha, rc)
        # [batches] A part may be answered by a Message Batch (half price) instead of a call now.
        route = await self.batches.route(ctx, repo_batch=rc.batch, tools=tools is not None) if self.batches else None

        async def save(progress: ModelProgress) -> None:
            details = replace(ctx.job.details, model_progress=progress)
            await ctx.checkpoint(details=details)
            ctx.job = replace(ctx.job, details=details)

        for i, part in enumerate(plan.parts, start=1):
            files = tuple(
                without_context(prepared.files[f.path]) if f.path in plan.plain else prepared.files[f.path]
                for f in part
            )
            asked = prompt(files, rows, part_note(i, len(plan.parts)), tools)
            blocks = build_user_blocks(asked)
            key = _part_key(asked)
            done = _progress(ctx).parts.get(key)
            if done is None:
                # The head read at the start may be minutes old by now (reading context, an earlier part): a push
                # since then makes this call pointless, and pushing right after a review starts is free to anyone.
                current = await self.github.get_pull(inst, job.repo_full_name, job.pr_number)
                await self._still_applies(ctx, current)
                # [batches] the batch's answer, checkpointed like a finished part; PENDING: it waits on a batch.
                batched = await route.answer(key, blocks, shared=len(plan.parts) > 1) if route else None
                if batched is PENDING:
                    continue
                if isinstance(batched, PartAnswer):
                    done = batched
                    await save(_progress(ctx).with_part(key, done))
                else:
                    done = await self._ask_part(ctx, blocks, len(plan.parts) > 1, tools, key, save)
            model = done.model
            summaries.append(done.summary.strip())
            comments.extend(done.comments)
        if route is not None:
            await route.defer()  # [batches] sends what is to be sent; raises Deferred while a part waits on a batch
        if not plan.parts:
            summaries.append("There was nothing in this pull request that the reviewer reviews.")
        not_covered = [(s.path, s.reason) for s in [*prepared.skipped, *plan.not_covered]]
        return StoredAnswer(
            # One summary, however many parts: each part's risks, joined (a part told to give only those).
            summary=" ".join(dict.fromkeys(s for s in summaries if s)),
            comments=tuple(comments),
            not_covered=tuple(not_covered),
            files_reviewed=sum(len(p) for p in plan.parts),
            model=model,
            parts=len(plan.parts),
            incremental_note=scope.note,
        )

    def _tools(self, installation_id: int, repo: str, head_sha: str, rc: RepoConfig) -> RepositoryTools | None:
        """The read-only repository tools, when the repository (or the server's default) opts in."""
        enabled = self.settings.repository_tools if rc.repository_tools is None else rc.repository_tools
        if not enabled or self.settings.tool_limits.max_turns < 1:
            return None
        return RepositoryTools(self.github, installation_id, repo, head_sha, self.settings.tool_limits)

    async def _ask_part(
        self,
        ctx: JobContext,
        blocks: list[str],
        shared: bool,
        tools: RepositoryTools | None,
        key: str,
        save: Callable[[ModelProgress], Awaitable[None]],
    ) -> PartAnswer:
        """Ask the model about one part. Each tool turn is checkpointed with the job as it completes (a resumed
        attempt replays the stored turns instead of paying for them again), and so is a finished part of a large
        review. Every turn's tokens go to the usage ledger as soon as they are spent."""
        meter, recorded = UsageMeter(), UsageMeter()

        async def record() -> None:
            nonlocal recorded
            spent = meter.since(recorded)
            recorded = replace(meter)
            if spent.calls or spent.input_tokens or spent.output_tokens:
                await ctx.record_usage(
                    Usage(
                        model=self.claude.model,
                        input_tokens=spent.input_tokens,
                        output_tokens=spent.output_tokens,
                        cache_creation_tokens=spent.cache_creation_input_tokens,
                        cache_read_tokens=spent.cache_read_input_tokens,
                    )
                )

        async def on_turn(turn: dict[str, Any]) -> None:
            await record()
            await save(_progress(ctx).with_turn(key, turn))

        try:
            # The first block (framing, description, file list) is the same in every part: cached once for all.
            answer: ModelAnswer = await self.claude.review(
                blocks,
                meter=meter,
                shared_blocks=1 if shared else 0,
                tools=tools,
                turns=_progress(ctx).turns.get(key, ()),
                on_turn=on_turn,
            )
        finally:
            # What was paid for is on record, even when the call failed or the process dies next.
            await record()
        done = PartAnswer(answer.summary, answer.comments, answer.model)
        if shared:
            await save(_progress(ctx).with_part(key, done))  # a later part that fails does not cost this one again
        return done

    async def _publish_once(self, ctx: JobContext, body: str, comments: list[dict[str, object]]) -> int:
        """Find this job's review by the app's bot, or post it once. Never posts for a head that moved on."""
        job = ctx.job
        inst, repo, number = job.installation_id, job.repo_full_name, job.pr_number
        assert inst is not None
        pr = await self.github.get_pull(inst, repo, number)
        await self._still_applies(ctx, pr)
        bot = await self.github.bot_login()
        found = await self._own_review(ctx, bot)
        if found is not None:
            log.info("job %s: review %s already published; not posting again", job.id, found)
            return found
        # The intent is a fenced write: a worker that lost its lease stops here, before posting. It is written again
        # once the installation's write lock is held, right before the request: a push admitted while this job
        # waited for the lock has superseded it by then, and nothing is posted for the old head.
        await ctx.checkpoint(publish_intent_at=ctx.clock())

        async def post_and_record() -> int:
            try:
                review = await self.github.create_review(
                    inst,
                    repo,
                    number,
                    commit_id=job.head_sha,
                    body=body,
                    event="COMMENT",
                    comments=comments,
                    before_send=lambda: self._confirm(ctx),
                )
                review_id = int(review["id"])
            except JobError:
                # The answer was lost (a timeout, a 502 after the write): the review may be there all the same.
                review_id = await self._own_review(ctx, bot)
                if review_id is None:
                    raise
            # Published is published: recorded even when the lease was lost meanwhile, so the next incremental
            # review starts from this head.
            await ctx.store.record_published_review(job.id, review_id)
            return review_id

        # Shielded: a lost lease cancels the runner, but a request that may have reached GitHub is seen through to
        # its record, and a shutdown hands the job back only after it (JobContext.write_through).
        return await ctx.write_through(post_and_record())

    async def _confirm(self, ctx: JobContext) -> None:
        """Right before the review POST, with the installation's write lock held: still this attempt's job, and (for a
        request) not answered meanwhile by an earlier job of the same request."""
        await ctx.checkpoint(publish_intent_at=ctx.clock())
        if ctx.job.trigger not in AUTOMATIC_TRIGGERS:
            await self._check_unanswered(ctx)

    async def _own_review(self, ctx: JobContext, bot: str) -> int | None:
        """The id of this job's review by the app's bot (its marker), if GitHub has one."""
        job = ctx.job
        assert job.installation_id is not None
        reviews = await self.github.list_reviews(job.installation_id, job.repo_full_name, job.pr_number)
        found = find_published_review(reviews, bot_login=bot, job_id=job.id, head_sha=job.head_sha)
        return None if found is None else int(found["id"])


def _part_key(asked: PromptPR) -> str:
    """A part's name in the job's progress and in a Message Batch: what it asks about (the code, the file list, the
    notes and instructions), not the pull request's title and description, which anyone may edit while the part waits
    on its batch (a bot rewriting descriptions would otherwise have every finished result match nothing)."""
    blocks = build_user_blocks(replace(asked, title="", description=""))
    return hashlib.sha256("".join(blocks).encode()).hexdigest()[:24]


def _progress(ctx: JobContext) -> ModelProgress:
    """The job's model answer not yet stored (finished parts, tool turns), as last saved."""
    return ctx.job.details.model_progress or ModelProgress()


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


def _check_retarget(pr: dict[str, Any], rc: RepoConfig) -> None:
    """A retargeted base is automatic work: skipped (visibly) where the repository turned automatic reviews off, or
    for a draft the repository does not review."""
    if not rc.auto:
        raise Cancelled(f"skipped: automatic reviews are turned off in {CONFIG_PATH}; comment /review to ask for one")
    if pr.get("draft") is True and not rc.drafts:
        raise Cancelled(DRAFT_SKIP_TEXT)


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
