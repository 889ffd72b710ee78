"""The code around each change (pure): each hunk widened to its enclosing function, method or class (found by
codebase/scopes.py: tree-sitter where a grammar ships in a wheel, indentation otherwise), and small gaps between hunks
filled."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reviewer_app.codebase.scopes import enclosing_scope, has_grammar, indent_scope, parse, tree_scope
from reviewer_app.core.diff import FileDiff, Hunk

WHOLE_FILE_LINES = 60  # a file this short is shown whole
MAX_SCOPE_LINES = 120  # a longer scope shows its first lines and the lines around the change
SCOPE_HEAD_LINES = 3  # the signature of a scope too long to show
MARGIN_LINES = 6  # around a change whose scope is too long, or not found
GAP_LINES = 15  # two windows this close are joined: the lines between them are shown too
MAX_CONTEXT_LINES = 150  # context lines per file, at most


@dataclass(frozen=True)
class ContextPlan:
    """The new-side line ranges to show, and how the scopes were found (for the note and the benchmark)."""

    windows: tuple[tuple[int, int], ...]
    note: str
    hunks: int = 0
    by_parser: int = 0  # hunks whose enclosing scope tree-sitter found
    by_indentation: int = 0  # ... that the indentation heuristic found
    context_lines: int = 0


def plan_context(diff: FileDiff, head_text: str, *, max_context_lines: int = MAX_CONTEXT_LINES) -> ContextPlan:
    """Windows over the head file that cover every hunk, widened to each change's enclosing scope."""
    lines = head_text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the text ends with a newline: there is no line after it
    count = len(lines)
    spans = [_hunk_span(h) for h in diff.hunks]
    if not spans or count == 0 or max(last for _, last in spans) > count:
        return ContextPlan((), "no context: the file at the head commit does not match the diff")
    if count <= WHOLE_FILE_LINES:
        windows = ((1, count),)
        return ContextPlan(
            windows,
            f"the whole file is shown ({count} lines)",
            len(spans),
            len(spans),
            0,
            _context_size(windows, spans),
        )
    tree = parse(diff.path, head_text)
    wide: list[list[tuple[int, int]]] = []  # per hunk: its widest windows
    narrow: list[list[tuple[int, int]]] = []
    by_parser = by_indent = 0
    for hunk, (first, last) in zip(diff.hunks, spans, strict=True):
        changed = _changed_span(hunk, first, last)
        scope = tree_scope(tree, *changed) if tree is not None else None
        if scope is not None:
            by_parser += 1
        else:
            scope = indent_scope(lines, *changed)
            by_indent += scope is not None
        around = (max(1, first - MARGIN_LINES), min(count, last + MARGIN_LINES))
        if scope is None:
            wide.append([around])
            narrow.append([around])
            continue
        head = (scope[0], min(scope[0] + SCOPE_HEAD_LINES - 1, scope[1]))
        whole = (min(scope[0], first), max(scope[1], last))
        wide.append([whole] if whole[1] - whole[0] < MAX_SCOPE_LINES else [head, around])
        narrow.append([head, around])
    chosen = [list(w) for w in wide]
    # Over the cap: the hunks with the largest scopes fall back to their scope's head and the lines around them.
    order = sorted(range(len(wide)), key=lambda i: -sum(b - a for a, b in wide[i]))
    for i in order:
        if _context_size(_merge(chosen), spans) <= max_context_lines:
            break
        chosen[i] = narrow[i]
    windows = _merge(chosen)
    size = _context_size(windows, spans)
    if size > max_context_lines:
        windows = _merge([[span] for span in spans])  # no room for context at all: the hunks only
        return ContextPlan(
            windows,
            "no context: the code around the changes is longer than the context budget",
            len(spans),
            by_parser,
            by_indent,
            0,
        )
    how = "tree-sitter" if by_parser else "indentation" if by_indent else None
    found = by_parser + by_indent
    note = (
        (
            f"context: unchanged lines marked '.' show the enclosing function, method or class of {found} of "
            f"{len(spans)} changes (found by {how}) and short gaps between changes; the rest of the file "
            f"({count} lines) is not shown"
        )
        if how
        else (
            f"context: a few unchanged lines around each change, marked '.'; no enclosing scope was found; the rest "
            f"of the file ({count} lines) is not shown"
        )
    )
    return ContextPlan(windows, note, len(spans), by_parser, by_indent, size)


def _hunk_span(hunk: Hunk) -> tuple[int, int]:
    """The new-side lines a hunk covers (a hunk that only deletes covers the line before the deletion)."""
    if hunk.new_length:
        return hunk.new_start, hunk.new_start + hunk.new_length - 1
    return max(hunk.new_start, 1), max(hunk.new_start, 1)


def _changed_span(hunk: Hunk, first: int, last: int) -> tuple[int, int]:
    """The new-side lines the hunk changes (its added lines, or where it deletes), without its context lines."""
    numbers: list[int] = []
    previous = first - 1
    for ln in hunk.lines:
        if ln.new_line is not None:
            previous = ln.new_line
        if ln.kind == "added" and ln.new_line is not None:
            numbers.append(ln.new_line)
        elif ln.kind == "removed":
            numbers.append(max(previous, first))
    return (min(numbers), max(numbers)) if numbers else (first, last)


def _merge(groups: Sequence[Sequence[tuple[int, int]]]) -> tuple[tuple[int, int], ...]:
    ranges = sorted(r for group in groups for r in group)
    merged: list[tuple[int, int]] = []
    for a, b in ranges:
        if merged and a <= merged[-1][1] + GAP_LINES + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return tuple(merged)


def _context_size(windows: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]]) -> int:
    shown = {n for a, b in windows for n in range(a, b + 1)}
    return len(shown - {n for a, b in spans for n in range(a, b + 1)})


__all__ = ["ContextPlan", "enclosing_scope", "has_grammar", "plan_context"]
