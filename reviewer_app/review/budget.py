"""Pack the files to review into model requests that each fit the token budget, most relevant first."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import PurePosixPath

from pathspec import GitIgnoreSpec

from reviewer_app.core.diff import FileDiff
from reviewer_app.review.selection import SkippedFile

REASON_LARGER_THAN_BUDGET = "larger than the token budget"
REASON_OVER_REVIEW_BUDGET = "over the review budget"
DEFAULT_MAX_PARTS = 4
# A file changing more lines than this is reviewed after everything else: it would crowd out the rest.
HUGE_CHANGES = 800

_DOC_FILES = GitIgnoreSpec.from_lines(["*.md", "*.markdown", "*.rst", "*.adoc"])
_TEST_FILES = GitIgnoreSpec.from_lines(
    [
        "tests/",
        "test/",
        "__tests__/",
        "spec/",
        "testdata/",
        "test_*.py",
        "*_test.py",
        "conftest.py",
        "*_test.go",
        "*.test.[jt]s",
        "*.test.[jt]sx",
        "*.spec.[jt]s",
        "*.spec.[jt]sx",
        "*_spec.rb",
        "*Test.java",
        "*Tests.java",
        "*Test.kt",
        "*Tests.cs",
    ]
)
_DOC_DIRS = GitIgnoreSpec.from_lines(["docs/", "doc/"])
# What a test file's name says it tests: test_foo.py, foo_test.go, foo.test.ts, foo.spec.js, FooTest.java, foo_spec.rb.
_TEST_SUBJECT = re.compile(
    r"^(?:test_(?P<a>.+)|(?P<b>.+?)(?:_test|_spec|_tests|Tests?)|(?P<c>.+?)\.(?:test|spec)\..*)$"
)


class FileClass(IntEnum):
    """Review priority of a file, by what its path says it is; lower comes first."""

    SOURCE = 0
    TEST = 1
    DOCS = 2


@dataclass(frozen=True)
class BudgetPlan:
    """Files grouped into parts (one model request each), and files no part could take.

    ``part_tokens[i]`` is the estimated input of part ``i``, overhead included. ``plain`` names the files that fit
    only in their plain form (``fallback_render``: without the code around the change).
    """

    parts: list[list[FileDiff]] = field(default_factory=list)
    not_covered: list[SkippedFile] = field(default_factory=list)
    part_tokens: list[int] = field(default_factory=list)
    plain: set[str] = field(default_factory=set)


def classify(path: str) -> FileClass:
    """Documentation by extension, then tests by directory or name, then documentation directories."""
    if _DOC_FILES.match_file(path):
        return FileClass.DOCS
    if _TEST_FILES.match_file(path):
        return FileClass.TEST
    if _DOC_DIRS.match_file(path):
        return FileClass.DOCS
    return FileClass.SOURCE


def tested_subject(path: str) -> str | None:
    """The name (without extension) of the code a test file tests, as its file name says; None for other files."""
    if classify(path) != FileClass.TEST:
        return None
    name = PurePosixPath(path).name
    match = (
        _TEST_SUBJECT.match(name)
        if (".test." in name or ".spec." in name)
        else _TEST_SUBJECT.match(PurePosixPath(path).stem)
    )
    return (match["a"] or match["b"] or match["c"]) if match else None


def review_order(files: Sequence[FileDiff], *, last: Collection[str] = ()) -> list[list[FileDiff]]:
    """Groups of files in the order the model should read them.

    Source first, larger changes before smaller, each followed by the tests that test it (matched by name, the
    nearest directory winning); then tests nobody claimed, then documentation; huge changes (more than
    ``HUGE_CHANGES`` lines) and the paths in ``last`` (mechanical changes) come at the very end. Ties break on the path,
    so the order does not depend on the input order.
    """
    late = [f for f in files if f.path in last or f.changes > HUGE_CHANGES]
    rest = [f for f in files if f not in late]
    sources = sorted((f for f in rest if classify(f.path) == FileClass.SOURCE), key=lambda f: (-f.changes, f.path))
    groups: dict[str, list[FileDiff]] = {f.path: [f] for f in sources}
    unclaimed: list[FileDiff] = []
    for test in sorted((f for f in rest if classify(f.path) == FileClass.TEST), key=lambda f: (-f.changes, f.path)):
        subject = tested_subject(test.path)
        candidates = [s for s in sources if subject and PurePosixPath(s.path).stem == subject]
        if not candidates:
            unclaimed.append(test)
            continue
        best = max(candidates, key=lambda s: (_shared_dirs(s.path, test.path), s.path))
        groups[best.path].append(test)
    docs = sorted((f for f in rest if classify(f.path) == FileClass.DOCS), key=lambda f: (-f.changes, f.path))
    ordered = [groups[f.path] for f in sources] + [[f] for f in unclaimed] + [[f] for f in docs]
    return ordered + [[f] for f in sorted(late, key=lambda f: (f.changes, f.path))]


def _shared_dirs(a: str, b: str) -> int:
    n = 0
    for x, y in zip(PurePosixPath(a).parts[:-1], PurePosixPath(b).parts[:-1], strict=False):
        if x != y:
            break
        n += 1
    return n


def plan_parts(
    files: Sequence[FileDiff],
    *,
    max_input_tokens: int,
    fixed_overhead_tokens: int,
    estimate: Callable[[str], int],
    render: Callable[[FileDiff], str],
    max_parts: int = DEFAULT_MAX_PARTS,
    fallback_render: Callable[[FileDiff], str] | None = None,
    last: Collection[str] = (),
) -> BudgetPlan:
    """Place files, in ``review_order``, into at most ``max_parts``.

    ``render`` is what the model is sent of a file (the prompt's own rendering: the estimate is of the text that
    goes out). Each part's estimate (``fixed_overhead_tokens`` plus ``estimate(render(file))`` for its files) stays within
    ``max_input_tokens``. A source file and its tests go into one part when they fit there together; otherwise
    each file goes into the first part with room for it (first fit), so a small file can fill a gap an earlier,
    larger file left. A file that does not fit rendered with ``render`` is tried with ``fallback_render``.
    """
    if max_parts < 1:
        raise ValueError(f"max_parts must be at least 1, got {max_parts}")
    room = max_input_tokens - fixed_overhead_tokens
    plan = BudgetPlan()
    used: list[int] = []

    def cost_of(file: FileDiff) -> int:
        cost = estimate(render(file))
        if cost > room and fallback_render is not None:
            plain = estimate(fallback_render(file))
            if plain <= room:
                plan.plain.add(file.path)
                return plain
        return cost

    def place(cost: int) -> int | None:
        index = next((i for i, spent in enumerate(used) if spent + cost <= room), None)
        if index is None and len(plan.parts) < max_parts:
            plan.parts.append([])
            used.append(0)
            index = len(used) - 1
        return index

    for group in review_order(files, last=last):
        costs = [cost_of(f) for f in group]
        together = place(sum(costs)) if len(group) > 1 and all(c <= room for c in costs) else None
        if together is not None:
            plan.parts[together].extend(group)
            used[together] += sum(costs)
            continue
        for file, cost in zip(group, costs, strict=True):
            if cost > room:
                plan.not_covered.append(SkippedFile(file.path, REASON_LARGER_THAN_BUDGET))
                continue
            index = place(cost)
            if index is None:
                plan.not_covered.append(SkippedFile(file.path, REASON_OVER_REVIEW_BUDGET))
                continue
            plan.parts[index].append(file)
            used[index] += cost
    plan.part_tokens.extend(fixed_overhead_tokens + spent for spent in used)
    return plan
