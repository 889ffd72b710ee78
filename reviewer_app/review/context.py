"""The code around each change (pure): each hunk widened to its enclosing function, method or class, found with
tree-sitter where a grammar ships in a wheel and by indentation otherwise, and small gaps between hunks filled."""

from __future__ import annotations

import functools
import importlib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from reviewer_app.core.diff import FileDiff, Hunk

log = logging.getLogger(__name__)

WHOLE_FILE_LINES = 60  # a file this short is shown whole
MAX_SCOPE_LINES = 120  # a longer scope shows its first lines and the lines around the change
SCOPE_HEAD_LINES = 3  # the signature of a scope too long to show
MARGIN_LINES = 6  # around a change whose scope is too long, or not found
GAP_LINES = 15  # two windows this close are joined: the lines between them are shown too
MAX_CONTEXT_LINES = 150  # context lines per file, at most

# Grammar packages whose wheels ship the compiled grammar (no download at run time): module, function, node types.
_GRAMMARS: dict[str, tuple[str, str]] = {
    ".py": ("tree_sitter_python", "language"),
    ".pyi": ("tree_sitter_python", "language"),
    ".js": ("tree_sitter_javascript", "language"),
    ".mjs": ("tree_sitter_javascript", "language"),
    ".cjs": ("tree_sitter_javascript", "language"),
    ".jsx": ("tree_sitter_javascript", "language"),
    ".ts": ("tree_sitter_typescript", "language_typescript"),
    ".mts": ("tree_sitter_typescript", "language_typescript"),
    ".tsx": ("tree_sitter_typescript", "language_tsx"),
    ".go": ("tree_sitter_go", "language"),
}
_SCOPES = frozenset(
    {
        "function_definition",
        "class_definition",
        "decorated_definition",  # Python
        "function_declaration",
        "generator_function_declaration",
        "method_definition",
        "class_declaration",
        "abstract_class_declaration",
        "interface_declaration",
        "enum_declaration",
        "type_alias_declaration",
        "internal_module",  # JavaScript, TypeScript (namespace)
        "method_declaration",
        "type_declaration",  # Go
    }
)
_ROOTS = frozenset({"module", "program", "source_file"})
# A line that opens a block, for the indentation heuristic.
_OPENER = re.compile(
    r"(?:[:{]\s*(?:#.*|//.*|/\*.*)?$|^\s*(?:def|class|fn|func|function|sub|proc|module|impl|trait|struct|interface"
    r"|enum|namespace|public|private|protected|static|async|export)\b)"
)
_CLOSER = re.compile(r"^\s*(?:[}\])]|end\b|fi\b|done\b|esac\b)")


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
    tree = _parse(diff.path, head_text)
    wide: list[list[tuple[int, int]]] = []  # per hunk: its widest windows
    narrow: list[list[tuple[int, int]]] = []
    by_parser = by_indent = 0
    for hunk, (first, last) in zip(diff.hunks, spans, strict=True):
        changed = _changed_span(hunk, first, last)
        scope = _tree_scope(tree, *changed) if tree is not None else None
        if scope is not None:
            by_parser += 1
        else:
            scope = _indent_scope(lines, *changed)
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


def enclosing_scope(path: str, text: str, first: int, last: int | None = None) -> tuple[int, int] | None:
    """The lines of the smallest function, method or class around lines ``first``..``last`` of ``text`` (tree-sitter
    where a grammar is installed, else indentation); None when none is found."""
    last = first if last is None else last
    lines = text.split("\n")
    if not 1 <= first <= last <= len(lines):
        return None
    tree = _parse(path, text)
    scope = _tree_scope(tree, first, last) if tree is not None else None
    return scope if scope is not None else _indent_scope(lines, first, last)


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


# --- tree-sitter ---------------------------------------------------------------------------------------------------


@functools.cache
def _parser(suffix: str) -> Any | None:
    """A tree-sitter parser for the file suffix, or None when no grammar wheel is installed for it."""
    grammar = _GRAMMARS.get(suffix)
    if grammar is None:
        return None
    try:
        import tree_sitter

        module = importlib.import_module(grammar[0])
        return tree_sitter.Parser(tree_sitter.Language(getattr(module, grammar[1])()))
    except (ImportError, AttributeError, ValueError) as exc:
        log.warning("no tree-sitter grammar for %s files (%s); using indentation", suffix, exc)
        return None


def has_grammar(path: str) -> bool:
    return _parser(PurePosixPath(path).suffix.lower()) is not None


def _parse(path: str, text: str) -> Any | None:
    parser = _parser(PurePosixPath(path).suffix.lower())
    return None if parser is None else parser.parse(text.encode("utf-8", errors="surrogateescape"))


def _rows(node: Any) -> tuple[int, int]:
    """1-based first and last line of a node (an end at column 0 belongs to the line before)."""
    end = node.end_point.row if node.end_point.column else node.end_point.row - 1
    return node.start_point.row + 1, max(end, node.start_point.row) + 1


def _tree_scope(tree: Any, first: int, last: int) -> tuple[int, int] | None:
    """The smallest function, method or class around lines ``first``..``last``; at top level, the statements
    they touch. None when the tree has errors around them."""
    root = tree.root_node
    node = root.descendant_for_point_range((first - 1, 0), (last - 1, 10_000))
    while node is not None and node.type not in _SCOPES and node.type not in _ROOTS:
        node = node.parent
    if node is not None and node.type in _SCOPES:
        if node.parent is not None and node.parent.type in ("decorated_definition", "export_statement"):
            node = node.parent
        a, b = _rows(node)
        return (a, b) if a <= first and last <= b else None
    touched = [c for c in root.children if _rows(c)[0] <= last and _rows(c)[1] >= first]
    if not touched or any(c.type == "ERROR" or c.has_error for c in touched):
        return None
    return _rows(touched[0])[0], _rows(touched[-1])[1]


# --- indentation ---------------------------------------------------------------------------------------------------


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _indent_scope(lines: Sequence[str], first: int, last: int) -> tuple[int, int] | None:
    """The block around lines ``first``..``last`` by indentation: the nearest less-indented opener above, down to
    the first line as little indented as it (a closing brace or ``end`` included)."""
    start_line = next((n for n in range(first, last + 1) if lines[n - 1].strip()), None)
    if start_line is None:
        return None
    depth = _indent(lines[start_line - 1])
    opener = None
    for n in range(start_line - 1, 0, -1):
        text = lines[n - 1]
        if text.strip() and _indent(text) < depth:
            if _OPENER.search(text):
                opener = n
                break
            depth = _indent(text)
    if opener is None:
        return None
    base = _indent(lines[opener - 1])
    for n in range(last + 1, len(lines) + 1):
        text = lines[n - 1]
        if text.strip() and _indent(text) <= base:
            return opener, n if _CLOSER.match(text) else n - 1
    return opener, len(lines)
