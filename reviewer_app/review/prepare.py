"""From the selected files to what the model is shown: diffs recovered from contents, collapsed layout-only hunks,
the code around each change, and the list of every changed file with where the model finds it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace

from reviewer_app.core.diff import FileDiff
from reviewer_app.review.budget import BudgetPlan
from reviewer_app.review.context import plan_context
from reviewer_app.review.prompt import OverviewRow, PromptFile
from reviewer_app.review.reading import ContentReader, diff_from_contents
from reviewer_app.review.selection import (
    REASON_NO_DIFF,
    REASON_TOO_LARGE,
    ChangedFile,
    Selection,
    SkippedFile,
    content_reason,
    header_reason,
    hunk_layout_change,
)

log = logging.getLogger(__name__)

# Files GitHub sent without a patch although they may hold text changes: their diff is computed from the contents.
RECOVERABLE = frozenset({REASON_TOO_LARGE, REASON_NO_DIFF})
NOTE_COMPUTED = "GitHub sent no patch for this file; this diff was computed from its contents at both commits"
CONCURRENT_READS = 8  # contents requests of one review in flight at once
# Statuses whose head file holds more than the diff shows (an added file's diff is the whole file).
_WITH_CONTEXT = frozenset({"modified", "renamed", "changed", "copied"})


@dataclass
class ContextStats:
    """How the code around the changes was found, summed over a review's files (logs and the benchmark)."""

    hunks: int = 0
    by_parser: int = 0
    by_indentation: int = 0
    context_lines: int = 0
    files_without: int = 0  # files whose head could not be read


@dataclass
class Prepared:
    """The files the model may be shown (by path), in selection order, and every other file with its reason."""

    files: dict[str, PromptFile] = field(default_factory=dict)
    skipped: list[SkippedFile] = field(default_factory=list)
    computed: set[str] = field(default_factory=set)  # diffs computed from contents: no inline comments, reviewed last
    stats: ContextStats = field(default_factory=ContextStats)

    @property
    def diffs(self) -> list[FileDiff]:
        return [f.diff for f in self.files.values()]


async def prepare(
    selection: Selection,
    *,
    reader: ContentReader,
    installation_id: int,
    repo: str,
    head_sha: str,
    base_sha: Callable[[], Awaitable[str | None]],
    context_lines: int = 0,
) -> Prepared:
    """Recover what GitHub sent without a patch, collapse hunks that only change whitespace or line endings, and
    (``context_lines`` > 0) read each changed file at the head to show the code around its changes.

    ``base_sha`` gives the commit the pull request's diff starts from (asked only when a patch is missing).
    """
    changed = {c.path: c for c in selection.changed}
    prepared = Prepared()
    for diff in selection.reviewed:
        prepared.files[diff.path] = _prompt_file(diff, changed.get(diff.path))
    recoverable = {
        s.path: changed[s.path]
        for s in selection.skipped
        if s.reason in RECOVERABLE and s.path in changed and changed[s.path].status != "removed"
    }
    base = await base_sha() if recoverable else None
    # Every file this review reads, read up front a hundred to a request: the heads of the files to recover and of
    # those shown with their context, and the bases of the files to recover.
    wanted = [(e.path, head_sha, e.blob_sha) for e in recoverable.values()]
    wanted += [(e.previous_path or e.path, base, None) for e in recoverable.values() if base and e.status != "added"]
    if context_lines > 0:
        wanted += [(p, head_sha, changed[p].blob_sha if p in changed else None) for p in _context_paths(prepared)]
    await reader.prefetch(installation_id, repo, wanted)
    for skipped in selection.skipped:
        entry = recoverable.get(skipped.path)
        if entry is None:
            prepared.skipped.append(skipped)
            continue
        recovered, new_text, why = await _recover(reader, installation_id, repo, entry, base, head_sha)
        if recovered is None:
            prepared.skipped.append(SkippedFile(skipped.path, f"{skipped.reason}; {why}"))
            continue
        reason = content_reason(recovered)
        if reason:
            prepared.skipped.append(SkippedFile(skipped.path, reason))
            continue
        prepared.files[recovered.path] = _with_context(
            _prompt_file(recovered, entry), new_text, context_lines, prepared.stats, NOTE_COMPUTED
        )
        prepared.computed.add(recovered.path)
    if context_lines > 0:
        await _read_context(prepared, changed, reader, installation_id, repo, head_sha, context_lines)
    return prepared


def _context_paths(prepared: Prepared) -> list[str]:
    """The files shown with the code around their changes: those whose head holds more than their diff shows."""
    return [p for p, f in prepared.files.items() if p not in prepared.computed and f.status in _WITH_CONTEXT]


async def _read_context(
    prepared: Prepared,
    changed: dict[str, ChangedFile],
    reader: ContentReader,
    installation_id: int,
    repo: str,
    head_sha: str,
    context_lines: int,
) -> None:
    """Each changed file read at the head commit (prefetched; the rest a few at a time) and its windows planned."""
    paths = _context_paths(prepared)
    gate = asyncio.Semaphore(CONCURRENT_READS)

    async def read(path: str) -> tuple[str | None, str | None]:
        entry = changed.get(path)
        async with gate:
            return await reader.try_read(
                installation_id, repo, path, head_sha, blob_sha=entry.blob_sha if entry else None
            )

    texts = await asyncio.gather(*(read(p) for p in paths))
    for path, (text, why) in zip(paths, texts, strict=True):
        file = prepared.files[path]
        if text is None:
            prepared.stats.files_without += 1
            prepared.files[path] = replace(file, context_note=f"no context: {why} at the head commit")
            continue
        reason = header_reason(text.split("\n", 10)[:10])
        if reason:  # the header sits above the diff, where selection could not see it
            del prepared.files[path]
            prepared.skipped.append(SkippedFile(path, reason))
            continue
        prepared.files[path] = _with_context(file, text, context_lines, prepared.stats)


def _with_context(
    file: PromptFile, text: str, context_lines: int, stats: ContextStats, lead: str | None = None
) -> PromptFile:
    if context_lines <= 0:
        return replace(file, context_note=lead)
    plan = plan_context(file.diff, text, max_context_lines=context_lines)
    stats.hunks += plan.hunks
    stats.by_parser += plan.by_parser
    stats.by_indentation += plan.by_indentation
    stats.context_lines += plan.context_lines
    note = "; ".join(filter(None, [lead, plan.note]))
    return replace(file, head_lines=tuple(text.split("\n")), windows=plan.windows, context_note=note)


def without_context(file: PromptFile) -> PromptFile:
    """The file as a plain diff, for a budget without room for its context."""
    if file.head_lines is None:
        return file
    return replace(file, head_lines=None, windows=(), context_note="no context: no room for it in the token budget")


def _prompt_file(diff: FileDiff, entry: ChangedFile | None) -> PromptFile:
    collapsed = frozenset(i for i, hunk in enumerate(diff.hunks) if hunk_layout_change(diff.path, hunk))
    status = entry.status if entry is not None else diff.status
    previous = entry.previous_path if entry is not None else diff.previous_path
    return PromptFile(diff.path, diff, status=status, previous_path=previous, collapsed=collapsed)


async def _recover(
    reader: ContentReader, installation_id: int, repo: str, entry: ChangedFile, base: str | None, head: str
) -> tuple[FileDiff | None, str, str]:
    """The file's diff from its contents at both commits and its head text, or None and why not."""
    if base is None:
        return None, "", "the commit it starts from is not known"
    new, why = await reader.try_read(installation_id, repo, entry.path, head, blob_sha=entry.blob_sha)
    if new is None:
        return None, "", f"{why} at the head commit"
    old = ""
    if entry.status != "added":
        old_text, why = await reader.try_read(installation_id, repo, entry.previous_path or entry.path, base)
        if old_text is None:
            return None, "", f"{why} at the base commit"
        old = old_text
    diff = diff_from_contents(entry.path, old, new, status=entry.status, previous_path=entry.previous_path)
    if diff is None:
        return None, "", "its contents are the same at both commits"
    return diff, new, ""


def overview(changed: Sequence[ChangedFile], plan: BudgetPlan, prepared: Prepared) -> list[OverviewRow]:
    """Every changed file, in GitHub's order, with where the model finds it (the same text for every part)."""
    part_of = {f.path: i for i, part in enumerate(plan.parts, start=1) for f in part}
    reasons = {s.path: s.reason for s in [*prepared.skipped, *plan.not_covered]}
    rows: list[OverviewRow] = []
    for c in changed:
        if c.path in part_of:
            where = "shown below" if len(plan.parts) == 1 else f"in part {part_of[c.path]} of {len(plan.parts)}"
            if c.path in prepared.computed:
                where += " (diff computed from the contents; GitHub sent no patch)"
        else:
            where = f"not reviewed: {reasons.get(c.path, 'left out')}"
        rows.append(OverviewRow(c.path, c.status, c.previous_path, c.additions, c.deletions, where))
    return rows


def part_note(index: int, count: int) -> str | None:
    """The trusted note of a part of a large review: which files this request shows."""
    if count < 2:
        return None
    return (
        f"This is part {index} of {count} of a large pull request: review only the files shown in <files> "
        f"(those listed as in part {index}); the other parts are reviewed in other requests. Your summary is "
        "joined with theirs into one: give only the risks in the files of this part, with no introduction and "
        "nothing about the pull request as a whole."
    )
