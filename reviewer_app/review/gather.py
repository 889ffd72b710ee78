"""The gather stage: what the pull request changes and what the model is asked about it. The change (the files GitHub
lists, those a reviewer reads, what earlier reviews raised that is still open) is read for every attempt; the question
(the scope, incremental or whole, the diffs recovered and widened to their enclosing scopes, fitted to the token
budget in parts, each part's prompt) only when the job holds no stored answer yet."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from reviewer_app.codebase import Codebase, Snippet
from reviewer_app.core.diff import FileDiff
from reviewer_app.core.errors import JobError
from reviewer_app.core.learnings import Learning, prompt_line, relevant
from reviewer_app.core.passes import pass_order
from reviewer_app.dispatch.context import JobContext
from reviewer_app.github.client import MAX_COMPARE_FILES, GitHubClient
from reviewer_app.review.budget import plan_parts
from reviewer_app.review.crossfile import open_for_review, related_for_part, snippet_tokens
from reviewer_app.review.explore import ToolLimits, tools_note
from reviewer_app.review.gate import Wanted, installation_of
from reviewer_app.review.memory import Memory, Recall
from reviewer_app.review.prepare import Prepared, overview, part_note, prepare, without_context
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
from reviewer_app.review.repo_config import RepoConfig, matching_instructions
from reviewer_app.review.selection import Selection, select_files
from reviewer_app.review.settings import ReviewSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Change:
    """What the pull request changes at the job's head, and what it remembers of earlier reviews."""

    listed: int  # how many files GitHub listed (it lists at most 3,000)
    selection: Selection
    ignore: tuple[str, ...]  # the server's and the repository's ignore patterns
    recall: Recall
    learnings: tuple[Learning, ...] = ()  # what the repository's team taught the app (core/learnings.py)

    @property
    def diffs(self) -> dict[str, FileDiff]:
        return {d.path: d for d in self.selection.reviewed}


@dataclass(frozen=True)
class Scope:
    selection: Selection
    note: str | None  # set for an incremental review
    base: str | None = None  # the commit the diffs start from, when known (an incremental review's last head)


@dataclass(frozen=True)
class Part:
    """One request to the model: its name in the job's progress and in a Message Batch, and its user turn's blocks."""

    key: str
    blocks: tuple[str, ...]
    review_pass: int = 1  # which of the review's independent passes asks it (core/passes.py)


@dataclass(frozen=True)
class Sources:
    """What the ask stage checks the model's findings against, and the verifier is told about the pull request."""

    diffs: Mapping[str, FileDiff] = field(default_factory=dict)  # the pull request's, by path
    blobs: Mapping[str, str] = field(default_factory=dict)  # each changed file's blob at the head, by path
    title: str = ""
    description: str = ""


@dataclass(frozen=True)
class Verification:
    """The verification pass is on for this review: findings under ``min_confidence`` are not published."""

    min_confidence: int


@dataclass(frozen=True)
class Question:
    """The gather stage's hand-off to the ask stage: the parts to ask, how the model may be reached, and what the
    answer says of the files that are in no part."""

    parts: tuple[Part, ...]
    not_covered: tuple[tuple[str, str], ...]  # (path, why not reviewed)
    files_reviewed: int
    incremental_note: str | None
    tools: ToolLimits | None  # the read-only repository tools, when the repository (or the server) opts in
    batch: bool | None  # the repository's `batch:` setting (core/batching.py decides with it)
    # What the answer's findings are checked against: the pull request's diffs and blobs (the evidence check reads the
    # files they name), its title and description (for the verifier), and whether and how strictly to verify.
    sources: Sources = field(default_factory=Sources)
    verify: Verification | None = None
    # The repository's active learnings (a do-not-flag one withholds the findings it covers), and the ids of those in
    # the prompt.
    learnings: tuple[Learning, ...] = ()
    in_prompt: tuple[int, ...] = ()
    passes: int = 1  # independent review passes; ``parts`` holds every pass's parts, the first pass's first
    vote: bool = False  # several passes: publish only what most found or the verifier is sure of (core/passes.py)
    # The repository at the head (codebase/), when it could be had: the tools search it, the verifier reads it (what
    # each finding depends on, and the code a verdict asks for).
    codebase: Codebase | None = field(default=None, compare=False, repr=False)

    @property
    def shared(self) -> bool:
        """Several parts share their first block (framing, description, file list): cached once for all."""
        return len(self.parts) > 1


class Gather:
    """The gather stage of review jobs."""

    def __init__(self, github: GitHubClient, reader: ContentReader, memory: Memory, settings: ReviewSettings) -> None:
        self.github = github
        self.reader = reader
        self.memory = memory
        self.settings = settings

    async def change(self, ctx: JobContext, wanted: Wanted) -> Change:
        job = ctx.job
        files = await self.github.list_pull_files(installation_of(ctx), job.repo_full_name, job.pr_number)
        ignore = (*self.settings.ignore, *wanted.config.ignore)
        # Only active learnings are used: one proposed from a reply waits on a writer's confirmation (never applied).
        learnings = tuple(x for x in await ctx.store.list_learnings(str(job.repo_id)) if x.active)
        return Change(len(files), select_files(files, ignore=ignore), ignore, await self._recall(ctx), learnings)

    async def question(self, ctx: JobContext, wanted: Wanted, change: Change) -> Question:
        job = ctx.job
        inst = installation_of(ctx)
        pr, rc = wanted.pr, wanted.config
        scope = await self._scope(ctx, change)

        async def base_sha() -> str | None:
            if scope.base:
                return scope.base
            base = str((pr.get("base") or {}).get("sha") or "")
            if not base:
                return None
            comparison = await self.github.compare(inst, job.repo_full_name, base, job.head_sha)
            return str((comparison.get("merge_base_commit") or {}).get("sha") or "") or None

        enabled = self.settings.repository_tools if rc.repository_tools is None else rc.repository_tools
        tools = self.settings.tool_limits if enabled and self.settings.tool_limits.max_turns >= 1 else None
        path_instructions = matching_instructions(rc, [c.path for c in scope.selection.changed])
        raised = tuple(
            RaisedFinding(s.finding.path, s.line, s.finding.severity, s.finding.title) for s in change.recall.still_open
        )
        taught = relevant(
            change.learnings,
            [c.path for c in scope.selection.changed],
            self.settings.learnings_prompt_tokens,
            estimate=estimate_tokens,
        )
        prepared = await prepare(
            scope.selection,
            reader=self.reader,
            installation_id=inst,
            repo=job.repo_full_name,
            head_sha=job.head_sha,
            base_sha=base_sha,
            context_lines=self.settings.context_lines if rc.context else 0,
        )
        codebase = await self._codebase(ctx, wanted, scope, prepared)
        max_input = rc.max_input_tokens or self.settings.max_input_tokens
        reserve = await self._reserve(codebase, prepared, max_input)

        def prompt(
            files: tuple[PromptFile, ...] = (), rows: tuple[OverviewRow, ...] = (), note: str | None = None
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
                path_instructions=tuple((i.path, i.instructions) for i in path_instructions),
                language=rc.language,
                tools_note=tools_note(tools, search=codebase is not None) if tools is not None else None,
                nits=rc.nits == "fold",
                already_raised=raised,
                team_learnings=tuple(prompt_line(x) for x in taught),
            )

        # The file list is as long whatever the plan: estimate it with the longest "where" it can get.
        rows = tuple(
            OverviewRow(c.path, c.status, c.previous_path, c.additions, c.deletions, "x" * 120)
            for c in scope.selection.changed
        )
        shared = build_user_message(prompt(rows=rows, note=part_note(9, 9)))
        overhead = estimate_tokens(SYSTEM_PROMPT) + estimate_tokens(shared) + 1500  # + tool and answer framing
        plan = plan_parts(
            prepared.diffs,
            max_input_tokens=max_input - reserve,
            fixed_overhead_tokens=overhead,
            estimate=estimate_tokens,
            max_parts=rc.max_parts or self.settings.max_parts,
            last=prepared.computed,
            render=lambda d: render_file(prepared.files[d.path]),
            fallback_render=lambda d: render_file(without_context(prepared.files[d.path])),
        )
        _log_context(job.id, prepared)
        rows = tuple(overview(scope.selection.changed, plan, prepared))
        parts: list[Part] = []
        passes = max(1, rc.passes) if plan.parts else 1
        related_of: dict[int, tuple[tuple[Snippet, ...], int]] = {}  # by part: the same in every pass
        for review_pass in range(1, passes + 1):
            # Each pass reads the same context, its files in an order of its own (core/passes.py).
            for i, part in enumerate(plan.parts, start=1):
                order = pass_order([f.path for f in part], review_pass)
                files = tuple(
                    without_context(prepared.files[p]) if p in plan.plain else prepared.files[p] for p in order
                )
                if i not in related_of:
                    related_of[i] = await related_for_part(codebase, files, reserve)
                    if related_of[i] != ((), 0):
                        shown, cut = len(related_of[i][0]), related_of[i][1]
                        log.info("job %s: part %d shows %d cross-file snippets, %d left out", job.id, i, shown, cut)
                related, left_out = related_of[i]
                asked = replace(
                    prompt(files, rows, part_note(i, len(plan.parts))), related=related, related_left_out=left_out
                )
                key = part_key(asked) if review_pass == 1 else f"{part_key(asked)}-p{review_pass}"
                parts.append(Part(key, tuple(build_user_blocks(asked)), review_pass))
        return Question(
            parts=tuple(parts),
            not_covered=tuple((s.path, s.reason) for s in [*prepared.skipped, *plan.not_covered]),
            files_reviewed=sum(len(p) for p in plan.parts),
            passes=passes,
            vote=rc.passes_vote,
            incremental_note=scope.note,
            tools=tools,
            batch=rc.batch,
            sources=Sources(
                diffs={**{p: f.diff for p, f in prepared.files.items()}, **change.diffs},
                blobs={c.path: c.blob_sha for c in change.selection.changed if c.blob_sha},
                title=str(pr.get("title") or ""),
                description=str(pr.get("body") or ""),
            ),
            verify=Verification(rc.min_confidence) if _verifies(self.settings, rc) else None,
            learnings=change.learnings,
            in_prompt=tuple(x.id for x in taught),
            codebase=codebase,
        )

    async def _reserve(self, codebase: Codebase | None, prepared: Prepared, max_input: int) -> int:
        """The part of each request's budget kept for cross-file code: what the whole change's related code takes,
        at most the setting and a quarter of the budget (nothing when there is none: no budget is lost to it)."""
        allowed = min(self.settings.codebase.related_tokens, max_input // 4)
        everything, _ = await related_for_part(codebase, list(prepared.files.values()), allowed)
        return min(allowed, sum(snippet_tokens(s) for s in everything))

    async def _codebase(self, ctx: JobContext, wanted: Wanted, scope: Scope, prepared: Prepared) -> Codebase | None:
        """The repository at the head, unless the server or the repository turned it off (or it cannot be had)."""
        rc = wanted.config
        if not (self.settings.codebase.enabled if rc.codebase is None else rc.codebase):
            return None
        return await open_for_review(
            self.github,
            replace(self.settings.codebase, enabled=True),
            installation_id=installation_of(ctx),
            repo=ctx.job.repo_full_name,
            pr=wanted.pr,
            head_sha=ctx.job.head_sha,
            changed=scope.selection.changed,
            files=prepared.files,
        )

    async def _recall(self, ctx: JobContext) -> Recall:
        """The PR's open findings at this head; none when GitHub cannot tell (the review goes on without them)."""
        try:
            return await self.memory.recall(ctx)
        except JobError as exc:
            log.warning("job %s: earlier findings not checked: %s", ctx.job.id, exc.reason)
            return Recall()

    async def _scope(self, ctx: JobContext, change: Change) -> Scope:
        """What the model reviews: the whole PR, or only what changed since the last reviewed head."""
        job = ctx.job
        full = Scope(change.selection, None)
        if job.details.full:
            return full
        last = await ctx.store.last_reviewed_head(job.repo_id, job.pr_number)
        if not last or last == job.head_sha:
            return full
        comparison = await self.github.compare(installation_of(ctx), job.repo_full_name, last, job.head_sha)
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
        note = (
            f"Incremental review: this covers only the changes since the last reviewed commit {last[:12]} "
            f"(up to {job.head_sha[:12]}). Comment `/review full` to review the whole pull request."
        )
        return Scope(select_files(compared, ignore=change.ignore), note, base=last)


def _verifies(settings: ReviewSettings, rc: RepoConfig) -> bool:
    """The repository's `verify:` setting, or the server's default when it does not say."""
    return settings.verify if rc.verify is None else rc.verify


def part_key(asked: PromptPR) -> str:
    """A part's name in the job's progress and in a Message Batch: what it asks about (the code, the file list, the
    notes and instructions), not the pull request's title and description, which anyone may edit while the part waits
    on its batch (a bot rewriting descriptions would otherwise have every finished result match nothing)."""
    # Nor the cross-file code: the snapshot it comes from is a cache, which may be fresher on another attempt.
    blocks = build_user_blocks(replace(asked, title="", description="", related=(), related_left_out=0))
    return hashlib.sha256("".join(blocks).encode()).hexdigest()[:24]


def _log_context(job_id: int, prepared: Prepared) -> None:
    stats = prepared.stats
    log.info(
        "job %s: context for %d of %d hunks (tree-sitter %d, indentation %d), %d lines; %d files unread",
        job_id,
        stats.by_parser + stats.by_indentation,
        stats.hunks,
        stats.by_parser,
        stats.by_indentation,
        stats.context_lines,
        stats.files_without,
    )
