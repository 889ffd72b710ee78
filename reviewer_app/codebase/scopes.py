"""Where code sits in a file: the tree-sitter grammars the app knows (from wheels that ship them compiled), a file
parsed with them, and the smallest function, method or class around some lines (tree-sitter, else indentation). Pure:
the review's context (review/context.py) and the code index (index.py, related.py) share it."""

from __future__ import annotations

import functools
import importlib
import logging
import re
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

log = logging.getLogger(__name__)

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
    ".java": ("tree_sitter_java", "language"),
    ".rs": ("tree_sitter_rust", "language"),
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
        "constructor_declaration",
        "record_declaration",  # Java (and the class, interface, enum and method declarations above)
        "function_item",
        "impl_item",
        "trait_item",
        "struct_item",
        "enum_item",
        "mod_item",  # Rust
    }
)
_ROOTS = frozenset({"module", "program", "source_file"})
# A line that opens a block, for the indentation heuristic.
_OPENER = re.compile(
    r"(?:[:{]\s*(?:#.*|//.*|/\*.*)?$|^\s*(?:def|class|fn|func|function|sub|proc|module|impl|trait|struct|interface"
    r"|enum|namespace|public|private|protected|static|async|export)\b)"
)
_CLOSER = re.compile(r"^\s*(?:[}\])]|end\b|fi\b|done\b|esac\b)")


def enclosing_scope(path: str, text: str, first: int, last: int | None = None) -> tuple[int, int] | None:
    """The lines of the smallest function, method or class around lines ``first``..``last`` of ``text`` (tree-sitter
    where a grammar is installed, else indentation); None when none is found."""
    last = first if last is None else last
    lines = text.split("\n")
    if not 1 <= first <= last <= len(lines):
        return None
    tree = parse(path, text)
    scope = tree_scope(tree, first, last) if tree is not None else None
    return scope if scope is not None else indent_scope(lines, first, last)


# --- tree-sitter ---------------------------------------------------------------------------------------------------


@functools.cache
def language_for(suffix: str) -> Any | None:
    """The tree-sitter language of a file suffix, or None when no grammar wheel is installed for it."""
    grammar = _GRAMMARS.get(suffix)
    if grammar is None:
        return None
    try:
        import tree_sitter

        module = importlib.import_module(grammar[0])
        return tree_sitter.Language(getattr(module, grammar[1])())
    except (ImportError, AttributeError, ValueError) as exc:
        log.warning("no tree-sitter grammar for %s files (%s); using indentation", suffix, exc)
        return None


@functools.cache
def parser_for(suffix: str) -> Any | None:
    """A tree-sitter parser for the file suffix, or None when no grammar wheel is installed for it."""
    language = language_for(suffix)
    if language is None:
        return None
    import tree_sitter

    return tree_sitter.Parser(language)


def grammar_name(path: str) -> str | None:
    """The grammar a path is parsed with ("python", "javascript", "typescript", "tsx", "go", "java", "rust"), or
    None."""
    grammar = _GRAMMARS.get(PurePosixPath(path).suffix.lower())
    if grammar is None:
        return None
    return {"language_typescript": "typescript", "language_tsx": "tsx"}.get(
        grammar[1], grammar[0][len("tree_sitter_") :]
    )


def has_grammar(path: str) -> bool:
    return parser_for(PurePosixPath(path).suffix.lower()) is not None


def parse(path: str, text: str) -> Any | None:
    parser = parser_for(PurePosixPath(path).suffix.lower())
    return None if parser is None else parser.parse(text.encode("utf-8", errors="surrogateescape"))


def rows(node: Any) -> tuple[int, int]:
    """1-based first and last line of a node (an end at column 0 belongs to the line before)."""
    end = node.end_point.row if node.end_point.column else node.end_point.row - 1
    return node.start_point.row + 1, max(end, node.start_point.row) + 1


def tree_scope(tree: Any, first: int, last: int) -> tuple[int, int] | None:
    """The smallest function, method or class around lines ``first``..``last``; at top level, the statements
    they touch. None when the tree has errors around them."""
    root = tree.root_node
    node = root.descendant_for_point_range((first - 1, 0), (last - 1, 10_000))
    while node is not None and node.type not in _SCOPES and node.type not in _ROOTS:
        node = node.parent
    if node is not None and node.type in _SCOPES:
        if node.parent is not None and node.parent.type in ("decorated_definition", "export_statement"):
            node = node.parent
        a, b = rows(node)
        return (a, b) if a <= first and last <= b else None
    touched = [c for c in root.children if rows(c)[0] <= last and rows(c)[1] >= first]
    if not touched or any(c.type == "ERROR" or c.has_error for c in touched):
        return None
    return rows(touched[0])[0], rows(touched[-1])[1]


# --- indentation ---------------------------------------------------------------------------------------------------


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def indent_scope(lines: Sequence[str], first: int, last: int) -> tuple[int, int] | None:
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
