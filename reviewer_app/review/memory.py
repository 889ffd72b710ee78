"""A pull request's memory of what the app posted: its open findings found again at a new head (by content), given to
the model as already raised, repeats dropped, new findings recorded at publication, and the app's own threads
resolved once the code they pointed at changed."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reviewer_app.core.errors import JobError
from reviewer_app.core.findings import (
    Candidate,
    Earlier,
    FileLines,
    Snippet,
    body_digest,
    repeats,
    snippet_at,
    title_of,
)
from reviewer_app.core.review_model import InlineComment, ModelComment
from reviewer_app.dispatch.context import JobContext
from reviewer_app.github.client import GitHubClient, Json
from reviewer_app.github.graphql import full_database_id
from reviewer_app.review.reading import ContentReader, NotText
from reviewer_app.store.base import Finding

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StillOpen:
    """An earlier finding whose code is unchanged at this head, and the line it sits on now."""

    finding: Finding
    line: int


@dataclass(frozen=True)
class Recall:
    """The PR's open findings, as they stand at the head under review."""

    still_open: tuple[StillOpen, ...] = ()
    outdated: tuple[tuple[Finding, bool], ...] = ()  # (finding, its file is gone) whose code changed or went away


def _snippet(f: Finding) -> Snippet:
    return Snippet(f.line_text, f.before, f.after)


class Memory:
    """Reads and writes a PR's findings; every GitHub call here is best effort and never costs the review."""

    def __init__(self, github: GitHubClient, reader: ContentReader) -> None:
        self.github = github
        self.reader = reader

    async def _lines(self, ctx: JobContext, path: str) -> list[str] | None:
        """The file at the job's head as lines; None when it is not there. Raises JobError or NotText."""
        job = ctx.job
        assert job.installation_id is not None
        text = await self.reader.read(job.installation_id, job.repo_full_name, path, job.head_sha)
        return None if text is None else text.split("\n")

    async def _exists(self, ctx: JobContext, path: str) -> bool:
        """Whether ``path`` is at the job's head at all (a file too large to read is, and is not gone)."""
        job = ctx.job
        assert job.installation_id is not None
        return await self.github.get_contents(job.installation_id, job.repo_full_name, path, job.head_sha) is not None

    async def recall(self, ctx: JobContext) -> Recall:
        """Where each open finding of earlier jobs sits at this head, if anywhere. A file that cannot be read leaves
        its findings out (neither open nor outdated)."""
        job = ctx.job
        findings = [f for f in await ctx.store.open_findings(job.repo_id, job.pr_number) if f.job_id != job.id]
        still: list[StillOpen] = []
        outdated: list[tuple[Finding, bool]] = []
        files: dict[str, FileLines | None] = {}
        for f in findings:
            if f.path not in files:
                try:
                    lines = await self._lines(ctx, f.path)
                    if lines is None and await self._exists(ctx, f.path):
                        raise NotText(f"{f.path} is there but not served as text (larger than the API's 1 MB?)")
                except (JobError, NotText) as exc:
                    log.info("job %s: earlier findings on %r not checked: %s", job.id, f.path, exc)
                    continue
                files[f.path] = None if lines is None else FileLines(lines)
            at = files[f.path]
            line = None if at is None else at.locate(_snippet(f), near=f.line)
            if line is None:
                outdated.append((f, at is None))
            else:
                still.append(StillOpen(f, line))
        return Recall(tuple(still), tuple(outdated))

    async def drop_repeats(
        self, ctx: JobContext, comments: Sequence[ModelComment], recall: Recall
    ) -> list[ModelComment]:
        """The comments without those that repeat a finding still open (same file, same code, a similar text)."""
        if not recall.still_open or not comments:
            return list(comments)
        earlier = [
            Earlier(s.finding.path, _snippet(s.finding), s.finding.title, s.finding.body_digest)
            for s in recall.still_open
        ]
        candidates: list[Candidate] = []
        for c in comments:
            lines = None
            if c.side == "RIGHT" and any(e.path == c.path for e in earlier):
                try:
                    lines = await self._lines(ctx, c.path)
                except (JobError, NotText):
                    lines = None
            candidates.append(Candidate(c.path, None if lines is None else snippet_at(lines, c.line), c.body))
        dropped = set(repeats(candidates, earlier))
        if dropped:
            log.info("job %s: %d comment(s) repeat findings still open; not posted", ctx.job.id, len(dropped))
        return [c for i, c in enumerate(comments) if i not in dropped]

    async def record(self, ctx: JobContext, review_id: int, inline: Sequence[InlineComment]) -> None:
        """Keep the review's inline findings on new-side lines (a removed line cannot stay unchanged)."""
        job = ctx.job
        findings: list[Finding] = []
        for c in inline:
            if c.side != "RIGHT":
                continue
            try:
                lines = await self._lines(ctx, c.path)
            except (JobError, NotText) as exc:
                log.info("job %s: finding on %r not remembered: %s", job.id, c.path, exc)
                continue
            snippet = None if lines is None else snippet_at(lines, c.line)
            if snippet is None:
                continue
            findings.append(
                Finding(
                    repo_id=job.repo_id,
                    pr_number=job.pr_number,
                    job_id=job.id,
                    review_id=review_id,
                    head_sha=job.head_sha,
                    path=c.path,
                    line=c.line,
                    line_text=snippet.line,
                    before=snippet.before,
                    after=snippet.after,
                    severity=c.severity,
                    title=title_of(c.body),
                    body_digest=body_digest(c.body),
                )
            )
        await ctx.store.record_findings(findings, now=ctx.clock())

    async def _claim_reply(self, ctx: JobContext, thread_id: str) -> bool:
        """Whether this job is the one that replies in ``thread_id`` before resolving it: the first to claim it, on
        any host, or this job again (a retry after its reply's answer was lost)."""
        key, mine = f"thread_reply:{thread_id}", str(ctx.job.id)
        if await ctx.store.claim_once(key, mine) or await ctx.store.get_setting(key) == mine:
            return True
        log.info("job %s: another job replies in thread %s; resolving only", ctx.job.id, thread_id)
        return False

    async def tend_threads(self, ctx: JobContext, recall: Recall, *, resolve: bool) -> int:
        """Link the PR's findings to their GitHub threads, then (``resolve``) resolve the app's own threads whose
        code changed, with one short reply saying so. A thread anyone else replied in is left alone. Returns how many
        threads were resolved. Raises JobError when GitHub fails: the caller logs it, and the next review tries
        again (the findings stay open until their threads are resolved)."""
        job = ctx.job
        assert job.installation_id is not None
        unlinked = any(f.thread_id is None for f in await ctx.store.open_findings(job.repo_id, job.pr_number))
        if not unlinked and not (resolve and recall.outdated):
            return 0  # nothing to ask GitHub
        bot = await self.github.bot_login()
        ours = {bot, bot.removesuffix("[bot]")}
        threads = await self.github.review_threads(job.installation_id, job.repo_full_name, job.pr_number)
        by_comment: dict[int, Json] = {}
        by_place: dict[tuple[int, str, int], list[tuple[int, Json]]] = {}
        for thread in threads:
            nodes = (thread.get("comments") or {}).get("nodes") or []
            if not nodes:
                continue
            first = nodes[0]
            comment_id = full_database_id(first.get("fullDatabaseId"))
            if ((first.get("author") or {}).get("login")) not in ours or comment_id is None:
                continue
            by_comment[comment_id] = thread
            review = full_database_id((first.get("pullRequestReview") or {}).get("fullDatabaseId"))
            if review is not None and first.get("originalLine") is not None:
                key = (review, str(thread.get("path") or ""), int(first["originalLine"]))
                by_place.setdefault(key, []).append((comment_id, thread))
        await self._link(ctx, by_place)
        if not resolve or not recall.outdated:
            return 0
        linked = {f.id: f for f in await ctx.store.open_findings(job.repo_id, job.pr_number)}
        resolved: list[int] = []
        for finding, gone in recall.outdated:
            current = linked.get(finding.id)
            if current is None or current.comment_id is None:
                continue  # resolved meanwhile, or its thread is not known
            thread = by_comment.get(current.comment_id)
            if thread is None:
                continue
            comments = thread.get("comments") or {}
            nodes = comments.get("nodes") or []
            # A thread with more comments than the query lists is left alone too: what the rest say is not known.
            if int(comments.get("totalCount") or 0) > len(nodes) or any(
                ((n.get("author") or {}).get("login")) not in ours for n in nodes
            ):
                log.info("job %s: thread %s has replies by others; left open", job.id, thread.get("id"))
                continue
            if not thread.get("isResolved"):
                # Our reply is not there yet (a retry after a lost answer finds it). Two jobs of the pull request
                # finishing together both see that: the one that claims the thread replies (its own retry too).
                if len(nodes) == 1 and await self._claim_reply(ctx, str(thread["id"])):
                    await self.github.reply_in_thread(
                        job.installation_id, job.repo_full_name, str(thread["id"]), _reply(job.head_sha, gone)
                    )
                await self.github.resolve_review_thread(job.installation_id, job.repo_full_name, str(thread["id"]))
            assert current.id is not None
            resolved.append(current.id)
        await ctx.store.resolve_findings(resolved, now=ctx.clock())
        if resolved:
            log.info("job %s: resolved %d outdated thread(s) of the app", job.id, len(resolved))
        return len(resolved)

    async def _link(self, ctx: JobContext, by_place: Mapping[tuple[int, str, int], list[tuple[int, Json]]]) -> None:
        """Fill in the comment and thread ids of findings recorded without them, matched by review, file and line."""
        job = ctx.job
        taken: dict[tuple[int, str, int], int] = {}
        links: list[tuple[int, int | None, str | None]] = []
        for f in await ctx.store.open_findings(job.repo_id, job.pr_number):
            if f.thread_id is not None or f.review_id is None or f.id is None:
                continue
            key = (f.review_id, f.path, f.line)
            place = by_place.get(key) or []
            if f.comment_id is not None:
                match = next((t for cid, t in place if cid == f.comment_id), None)
                if match is not None:
                    links.append((f.id, f.comment_id, str(match["id"])))
                continue
            index = taken.get(key, 0)
            if index < len(place):  # several findings on one line of one review: in the order they were posted
                comment_id, thread = place[index]
                taken[key] = index + 1
                links.append((f.id, comment_id, str(thread["id"])))
        await ctx.store.link_findings(links)


def _reply(head_sha: str, gone: bool) -> str:
    if gone:
        return f"This file is no longer in the pull request at {head_sha[:12]}, so this thread is resolved."
    return (
        f"The code this comment pointed at changed in {head_sha[:12]}, so this thread is resolved. "
        "If the problem is still there, the review of that commit says so."
    )
