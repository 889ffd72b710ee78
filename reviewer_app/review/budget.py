"""Pack the files to review into model requests that each fit the token budget, most important first."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from pathspec import GitIgnoreSpec

from reviewer_app.core.diff import FileDiff, numbered_patch
from reviewer_app.review.selection import SkippedFile

REASON_LARGER_THAN_BUDGET = "larger than the token budget"
REASON_OVER_REVIEW_BUDGET = "over the review budget"
DEFAULT_MAX_PARTS = 4

_DOC_FILES = GitIgnoreSpec.from_lines(["*.md", "*.markdown", "*.rst", "*.adoc"])
_TEST_FILES = GitIgnoreSpec.from_lines([
    "tests/", "test/", "__tests__/", "spec/", "testdata/", "test_*.py", "*_test.py", "conftest.py",
    "*_test.go", "*.test.[jt]s", "*.test.[jt]sx", "*.spec.[jt]s", "*.spec.[jt]sx", "*_spec.rb",
    "*Test.java", "*Tests.java", "*Test.kt", "*Tests.cs",
])
_DOC_DIRS = GitIgnoreSpec.from_lines(["docs/", "doc/"])


class FileClass(IntEnum):
    """Review priority of a file, by what its path says it is; lower comes first."""

    SOURCE = 0
    TEST = 1
    DOCS = 2


@dataclass(frozen=True)
class BudgetPlan:
    """Files grouped into parts (one model request each), and files no part could take.

    ``part_tokens[i]`` is the estimated input of part ``i``, overhead included.
    """

    parts: list[list[FileDiff]] = field(default_factory=list)
    not_covered: list[SkippedFile] = field(default_factory=list)
    part_tokens: list[int] = field(default_factory=list)


def classify(path: str) -> FileClass:
    """Documentation by extension, then tests by directory or name, then documentation directories."""
    if _DOC_FILES.match_file(path):
        return FileClass.DOCS
    if _TEST_FILES.match_file(path):
        return FileClass.TEST
    if _DOC_DIRS.match_file(path):
        return FileClass.DOCS
    return FileClass.SOURCE


def plan_parts(
    files: Sequence[FileDiff],
    *,
    max_input_tokens: int,
    fixed_overhead_tokens: int,
    estimate: Callable[[str], int],
    max_parts: int = DEFAULT_MAX_PARTS,
    render: Callable[[FileDiff], str] = numbered_patch,
) -> BudgetPlan:
    """Place files, source before tests before docs and larger changes first, into at most ``max_parts``.

    Each part's estimate (``fixed_overhead_tokens`` plus ``estimate(render(file))`` for its files) stays
    within ``max_input_tokens``. A file goes into the first part with room for it (first fit), so a small
    file can fill a gap an earlier, larger file left. Ties break on the path, so a plan is reproducible.
    """
    if max_parts < 1:
        raise ValueError(f"max_parts must be at least 1, got {max_parts}")
    room = max_input_tokens - fixed_overhead_tokens
    plan = BudgetPlan()
    used: list[int] = []
    for file in sorted(files, key=lambda f: (classify(f.path), -f.changes, f.path)):
        cost = estimate(render(file))
        if cost > room:
            plan.not_covered.append(SkippedFile(file.path, REASON_LARGER_THAN_BUDGET))
            continue
        index = next((i for i, spent in enumerate(used) if spent + cost <= room), None)
        if index is None and len(plan.parts) < max_parts:
            plan.parts.append([])
            used.append(0)
            index = len(used) - 1
        if index is None:
            plan.not_covered.append(SkippedFile(file.path, REASON_OVER_REVIEW_BUDGET))
            continue
        plan.parts[index].append(file)
        used[index] += cost
    plan.part_tokens.extend(fixed_overhead_tokens + spent for spent in used)
    return plan
