"""The model's searches of the codebase, answered as bounded text: lines matching a literal or a regular expression
(RE2: linear time, so no pattern can hang a worker), where a name is defined, where it is used, a file's lines. Like
ripgrep: binary and huge files skipped, output cut at a limit, and the answer says how much it did not show."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from reviewer_app.codebase.index import Located
from reviewer_app.codebase.related import is_test
from reviewer_app.core.globs import check_glob, path_matches

if TYPE_CHECKING:
    from reviewer_app.codebase.snapshot import Snapshot

log = logging.getLogger(__name__)

MAX_PATTERN = 300
MAX_LINE_CHARS = 240  # a matching line is shown cut to this
MAX_SEARCHED_BYTES = 256 * 1024  # a larger file is not searched (minified bundles, generated tables)
MAX_ANSWER_CHARS = 12_000
MAX_READ_LINES = 400
MAX_LIMIT = 200
SEARCH_SECONDS = 5.0  # a search still going after this answers with what it found (the repository may be huge)

try:  # google-re2 ships as a wheel; without it, regular expressions are refused and literals still work
    import re2 as _re2
except ImportError:  # pragma: no cover - a dependency; kept for a trimmed install
    _re2 = None


class BadPattern(ValueError):
    """A pattern the search will not run (empty, too long, not a valid RE2 expression)."""


def _compile(pattern: str, regex: bool):  # type: ignore[no-untyped-def]
    if not pattern or len(pattern) > MAX_PATTERN:
        raise BadPattern(f"the pattern must be 1 to {MAX_PATTERN} characters")
    if not regex:
        return None
    if _re2 is None:
        raise BadPattern("regular expressions are not available here; search for a literal string")
    options = _re2.Options()
    options.max_mem = 8 << 20
    options.log_errors = False
    try:  # ^ and $ match at each line's ends: the whole file is searched first, then its lines
        return _re2.compile("(?m)" + pattern, options)
    except _re2.error as exc:
        raise BadPattern(
            f"not a valid RE2 regular expression ({exc}); lookarounds and backreferences are not supported"
        ) from None


def _under_glob(glob: str, path: str) -> bool:
    """Whether ``path`` or a folder it is in matches ``glob``, as ripgrep's ``-g`` and .gitignore read a glob:
    ``src/*`` covers every file under src, ``*.ts`` every TypeScript file, ``**/`` zero or more folders."""
    if path_matches(glob, path):
        return True
    parts = path.split("/")
    return any(path_matches(glob, "/".join(parts[:i])) for i in range(1, len(parts)))


def _clip(line: str) -> str:
    line = line.rstrip("\r")
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " [...]"


def search_code(
    snapshot: Snapshot, pattern: str, *, regex: bool = False, path_glob: str | None = None, limit: int = 50
) -> str:
    """``path:line: text`` for each matching line, files in path order; bounded by ``limit`` and a size."""
    limit = max(1, min(limit, MAX_LIMIT))
    try:
        compiled = _compile(pattern, regex)
        glob = check_glob(path_glob)  # the repository's one glob syntax (core/globs.py), matched in linear time
    except ValueError as exc:  # BadPattern included
        return f"refused: {exc}"
    shown: list[str] = []
    size = matches = files_matched = 0
    skipped = 0
    deadline = time.monotonic() + SEARCH_SECONDS
    stopped = False
    for path in sorted(snapshot.files):
        if time.monotonic() > deadline:
            stopped = True
            break
        entry = snapshot.files[path]
        if glob is not None and not _under_glob(glob, path):
            continue
        if not entry.text or entry.size > MAX_SEARCHED_BYTES:
            skipped += entry.text
            continue
        text = snapshot.text(path)
        if text is None:
            continue
        if compiled is None:
            if pattern not in text:
                continue
            hits = [n for n, line in enumerate(text.split("\n"), 1) if pattern in line]
        else:
            if compiled.search(text) is None:
                continue
            hits = [n for n, line in enumerate(text.split("\n"), 1) if compiled.search(line) is not None]
        if not hits:
            continue
        files_matched += 1
        lines = text.split("\n")
        for n in hits:
            matches += 1
            if len(shown) < limit:
                row = f"{path}:{n}: {_clip(lines[n - 1])}"
                if size + len(row) + 1 <= MAX_ANSWER_CHARS:
                    shown.append(row)
                    size += len(row) + 1
    kind = "regular expression" if regex else "literal"
    if not matches and stopped:
        return f"no match in the files searched within {SEARCH_SECONDS:.0f} s (up to {path}): narrow it with path_glob"
    if not matches:
        return f"no match for the {kind} {pattern!r}" + (f" in files matching {path_glob!r}" if path_glob else "")
    head = f"{matches} matching lines in {files_matched} files for the {kind} {pattern!r}"
    tail = (
        [f"[{matches - len(shown)} more matches not shown: narrow the pattern or the path filter]"]
        if matches > len(shown)
        else []
    )
    if skipped:
        tail.append(f"[{skipped} files over {MAX_SEARCHED_BYTES // 1024} KB not searched]")
    if stopped:
        tail.append(f"[the search stopped after {SEARCH_SECONDS:.0f} s, before {path}: narrow it with path_glob]")
    return "\n".join([head, *shown, *tail])


def _signature(snapshot: Snapshot, hit: Located) -> str:
    text = snapshot.text(hit.path)
    if text is None:
        return ""
    lines = text.split("\n")
    return _clip(lines[hit.tag.line - 1].strip()) if hit.tag.line <= len(lines) else ""


DEFINITION_BODY_LINES = 40  # of a definition's code shown with a find_definition answer


def find_definition(snapshot: Snapshot, name: str, *, limit: int = 10, bodies: int = 0) -> str:
    """Each definition of ``name``: where, what kind, its line range and first line; then the code (its first
    DEFINITION_BODY_LINES lines, numbered) of the first ``bodies`` that have a body, so that a question about what a
    function does is answered without another read."""
    name = name.strip()
    if not name or len(name) > MAX_PATTERN:
        return "refused: name a function, method, class or type"
    name = name.replace("::", ".").replace("#", ".")  # Rust's ``Type::method``, Javadoc's ``Type#method``
    bare = name.rsplit(".", 1)[-1]  # "Store.load" is looked up as "load" in class Store
    owner = name.rsplit(".", 1)[0] if "." in name else None
    hits = [h for h in snapshot.index.definitions(bare) if owner is None or h.tag.scope == owner]
    hits.sort(key=lambda h: is_test(h.path))  # the code's own definitions before a test's helper of the same name
    if not hits:
        return f"no definition of {name!r} found in the indexed files (Python, JavaScript, TypeScript, Go, Java, Rust)"
    limit = max(1, min(limit, MAX_LIMIT))
    rows = [
        f"{h.path}:{h.tag.line}-{h.tag.end}: {h.tag.kind} {(h.tag.scope + '.') if h.tag.scope else ''}{h.tag.name}: "
        f"{_signature(snapshot, h)}"
        for h in hits[:limit]
    ]
    more = [f"[{len(hits) - limit} more definitions not shown]"] if len(hits) > limit else []
    code = []
    for h in [h for h in hits[:limit] if h.tag.end > h.tag.line][: max(0, bodies)]:
        text = read_file(snapshot, h.path, h.tag.line, min(h.tag.end, h.tag.line + DEFINITION_BODY_LINES - 1))
        if text is not None:
            code.append(f"\n{text}")
    return "\n".join([f"{len(hits)} definitions of {name!r}", *rows, *more, *code])


def find_references(snapshot: Snapshot, name: str, *, limit: int = 50) -> str:
    """Each call of ``name`` (or use as a base type): where, in which function or class, and the line."""
    name = name.strip().rsplit(".", 1)[-1]
    if not name or len(name) > MAX_PATTERN:
        return "refused: name a function, method, class or type"
    hits = snapshot.index.references(name)
    if not hits:
        return f"no reference to {name!r} found in the indexed files (calls and base types)"
    limit = max(1, min(limit, MAX_LIMIT))
    rows: list[str] = []
    size = 0
    for h in hits[:limit]:
        where = f" in {h.tag.scope}" if h.tag.scope else ""
        row = f"{h.path}:{h.tag.line}{where} ({h.tag.kind}): {_signature(snapshot, h)}"
        if size + len(row) > MAX_ANSWER_CHARS:
            break
        rows.append(row)
        size += len(row) + 1
    more = [f"[{len(hits) - len(rows)} more references not shown]"] if len(hits) > len(rows) else []
    return "\n".join([f"{len(hits)} references to {name!r}", *rows, *more])


def read_file(snapshot: Snapshot, path: str, start: int = 1, end: int | None = None) -> str | None:
    """The file's lines ``start``..``end`` numbered (at most MAX_READ_LINES); None when there is no such text file."""
    entry = snapshot.files.get(path)
    if entry is None:
        return None
    if not entry.text:
        return f"{path}: a binary file ({entry.size:,} bytes), not shown"
    text = snapshot.text(path)
    if text is None:
        return None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    first = max(1, start)
    last = min(len(lines), end if end is not None and end >= first else len(lines), first + MAX_READ_LINES - 1)
    out = [f"{path}: lines {first}-{last} of {len(lines)}"]
    size = len(out[0])
    for n in range(first, last + 1):
        row = f"{n:>6} | {lines[n - 1]}"
        if size + len(row) + 1 > MAX_ANSWER_CHARS * 2:
            out.append(f"[cut at line {n - 1}: ask for a line range]")
            break
        out.append(row)
        size += len(row) + 1
    if last < len(lines) and not out[-1].startswith("[cut"):
        out.append(f"[{len(lines) - last} more lines: ask for start_line {last + 1}]")
    return "\n".join(out)
