"""From the selected files to what the model is shown: diffs recovered from contents, collapsed layout-only hunks,
the code around each change, and the list of every changed file with where the model finds it."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace

from reviewer_app.core.diff import FileDiff
from reviewer_app.review.budget import BudgetPlan
from reviewer_app.review.prompt import OverviewRow, PromptFile
from reviewer_app.review.reading import ContentReader, diff_from_contents
from reviewer_app.review.selection import (
    REASON_NO_DIFF,
    REASON_TOO_LARGE,
    ChangedFile,
    Selection,
    SkippedFile,
    content_reason,
    hunk_layout_change,
)

log = logging.getLogger(__name__)

# Files GitHub sent without a patch although they may hold text changes: their diff is computed from the contents.
RECOVERABLE = frozenset({REASON_TOO_LARGE, REASON_NO_DIFF})
NOTE_COMPUTED = "GitHub sent no patch for this file; this diff was computed from its contents at both commits"


@dataclass
class Prepared:
    """The files the model may be shown (by path), in selection order, and every other file with its reason."""

    files: dict[str, PromptFile] = field(default_factory=dict)
    skipped: list[SkippedFile] = field(default_factory=list)
    computed: set[str] = field(default_factory=set)  # diffs computed from contents: no inline comments, reviewed last

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
) -> Prepared:
    """Recover what GitHub sent without a patch, and collapse hunks that only change whitespace or line endings.

    ``base_sha`` gives the commit the pull request's diff starts from (asked only when a patch is missing).
    """
    changed = {c.path: c for c in selection.changed}
    prepared = Prepared()
    for diff in selection.reviewed:
        prepared.files[diff.path] = _prompt_file(diff, changed.get(diff.path))
    base: str | None = None
    for skipped in selection.skipped:
        entry = changed.get(skipped.path)
        if skipped.reason not in RECOVERABLE or entry is None or entry.status == "removed":
            prepared.skipped.append(skipped)
            continue
        base = base or await base_sha()
        recovered, why = await _recover(reader, installation_id, repo, entry, base, head_sha)
        if recovered is None:
            prepared.skipped.append(SkippedFile(skipped.path, f"{skipped.reason}; {why}"))
            continue
        reason = content_reason(recovered)
        if reason:
            prepared.skipped.append(SkippedFile(skipped.path, reason))
            continue
        prepared.files[recovered.path] = replace(_prompt_file(recovered, entry), context_note=NOTE_COMPUTED)
        prepared.computed.add(recovered.path)
    return prepared


def _prompt_file(diff: FileDiff, entry: ChangedFile | None) -> PromptFile:
    collapsed = frozenset(i for i, hunk in enumerate(diff.hunks) if hunk_layout_change(diff.path, hunk))
    status = entry.status if entry is not None else diff.status
    previous = entry.previous_path if entry is not None else diff.previous_path
    return PromptFile(diff.path, diff, status=status, previous_path=previous, collapsed=collapsed)


async def _recover(reader: ContentReader, installation_id: int, repo: str, entry: ChangedFile, base: str | None,
                   head: str) -> tuple[FileDiff | None, str]:  # fmt: skip
    """The file's diff from its contents at both commits, or None and why not."""
    if base is None:
        return None, "the commit it starts from is not known"
    new, why = await reader.try_read(installation_id, repo, entry.path, head, blob_sha=entry.blob_sha)
    if new is None:
        return None, f"{why} at the head commit"
    old = ""
    if entry.status != "added":
        old_text, why = await reader.try_read(installation_id, repo, entry.previous_path or entry.path, base)
        if old_text is None:
            return None, f"{why} at the base commit"
        old = old_text
    diff = diff_from_contents(entry.path, old, new, status=entry.status, previous_path=entry.previous_path)
    if diff is None:
        return None, "its contents are the same at both commits"
    return diff, ""


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
    return (f"This is part {index} of {count} of a large pull request: review only the files shown in <files> "
            f"(those listed as in part {index}); the other parts are reviewed in other requests.")  # fmt: skip
