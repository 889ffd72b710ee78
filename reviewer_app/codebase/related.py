"""The cross-file code a change depends on or is used by, chosen for it within a budget: the callers of each changed
function, method or class (the call site in its enclosing scope), the definitions of what the changed lines call, the
base types and interfaces a changed class implements, and the classes that implement or override what changed. Ranked
nearest first, deduplicated; what does not fit is counted."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reviewer_app.codebase import Snippet
from reviewer_app.codebase.index import Located
from reviewer_app.codebase.scopes import enclosing_scope
from reviewer_app.codebase.tags import Tag
from reviewer_app.core.tokens import estimate_tokens

if TYPE_CHECKING:
    from reviewer_app.codebase.snapshot import Snapshot

MAX_DEFINITIONS = 3  # a name defined in more files than this is too common to say which one is meant
MAX_REFERENCES = 40  # call sites looked at per changed name
MAX_SCOPE_LINES = 30  # a caller's scope longer than this is shown as the lines around the call
AROUND_CALL = 6
MAX_DEFINITION_LINES = 25  # signature, docstring and the start of the body
MAX_CANDIDATES = 200


@dataclass(frozen=True)
class _Candidate:
    snippet: Snippet
    rank: tuple[int, int, str, int]


def _qualified(tag: Tag) -> str:
    return f"{tag.scope}.{tag.name}" if tag.scope and tag.kind == "method" else tag.name


def _lines(snapshot: Snapshot, path: str) -> list[str] | None:
    text = snapshot.text(path)
    return None if text is None else text.split("\n")


def _near(a: str, b: str) -> int:
    """0 for files in the same folder, 1 for a shared top folder, 2 otherwise: nearer files first."""
    da, db = a.rpartition("/")[0], b.rpartition("/")[0]
    if da == db:
        return 0
    return 1 if da.split("/")[0] == db.split("/")[0] else 2


def _call_site(snapshot: Snapshot, ref: Located, why: str, distance: int, origin: str) -> _Candidate | None:
    lines = _lines(snapshot, ref.path)
    if lines is None or ref.tag.line > len(lines):
        return None
    text = "\n".join(lines)
    scope = enclosing_scope(ref.path, text, ref.tag.line)
    if scope is None or scope[1] - scope[0] + 1 > MAX_SCOPE_LINES:
        scope = (max(1, ref.tag.line - AROUND_CALL), min(len(lines), ref.tag.line + AROUND_CALL))
        where = f" in {ref.tag.scope}" if ref.tag.scope else ""
        why = f"{why}{where} (the lines around the call)"
    elif ref.tag.scope:
        why = f"{why}, in {ref.tag.scope}"
    first, last = scope
    body = "\n".join(lines[first - 1 : last])
    return _Candidate(
        Snippet(ref.path, first, last, body, why, distance), (distance, _near(origin, ref.path), ref.path, first)
    )


def _definition(snapshot: Snapshot, hit: Located, why: str, distance: int, origin: str) -> _Candidate | None:
    lines = _lines(snapshot, hit.path)
    if lines is None or hit.tag.line > len(lines):
        return None
    first = hit.tag.line
    last = min(hit.tag.end, len(lines), first + MAX_DEFINITION_LINES - 1)
    if last < hit.tag.end:
        why = f"{why} (its first {last - first + 1} of {hit.tag.end - first + 1} lines)"
    body = "\n".join(lines[first - 1 : last])
    return _Candidate(
        Snippet(hit.path, first, last, body, why, distance), (distance, _near(origin, hit.path), hit.path, first)
    )


def candidates(snapshot: Snapshot, path: str, start: int, end: int) -> list[_Candidate]:
    """Every snippet related to lines ``start``..``end`` of ``path``, unranked and possibly overlapping."""
    index = snapshot.index
    tags = index.tags(path)
    changed = [t for t in tags if t.is_definition and t.line <= end and t.end >= start]
    # The innermost definitions the change touches: a method changed inside a class is about the method.
    inner = [t for t in changed if not any(o is not t and t.line <= o.line and o.end <= t.end for o in changed)]
    calls = [t for t in tags if t.kind == "call" and start <= t.line <= end]
    changed_classes = {t.name for t in changed if t.kind in ("class", "interface", "type")}
    bases = [t for t in tags if t.kind == "base" and (start <= t.line <= end or t.scope in changed_classes)]
    out: list[_Candidate] = []

    def other_files(hits: Iterable[Located]) -> list[Located]:
        return [h for h in hits if h.path != path]

    # Callers of what changed (distance 0), and, for a changed class, where it is constructed.
    for d in inner or changed:
        defined = other_files(index.definitions(d.name))
        if len(defined) >= MAX_DEFINITIONS:
            continue  # the name is too common: its callers may be anyone's
        ambiguous = 1 if defined else 0
        refs = [r for r in other_files(index.references(d.name)) if r.tag.kind == "call"][:MAX_REFERENCES]
        for r in refs:
            c = _call_site(snapshot, r, f"caller of {_qualified(d)}", ambiguous, path)
            if c is not None:
                out.append(c)
    # What the changed lines call, defined in other files (distance 1).
    for name in dict.fromkeys(t.name for t in calls):
        if any(t.name == name and t.is_definition for t in tags):
            continue  # defined in this file: the model sees the file's own code
        defined = other_files(index.definitions(name))
        if not defined or len(defined) > MAX_DEFINITIONS:
            continue
        for hit in defined:
            c = _definition(
                snapshot, hit, f"definition of {_qualified(hit.tag)}, called by the change", len(defined), path
            )
            if c is not None:
                out.append(c)
    # The base types and interfaces a changed class implements (distance 1).
    for base in dict.fromkeys(t.name for t in bases):
        defined = other_files(index.definitions(base))
        if not defined or len(defined) > MAX_DEFINITIONS:
            continue
        for hit in defined:
            c = _definition(snapshot, hit, f"{hit.tag.kind} {base}, which the changed code implements", 1, path)
            if c is not None:
                out.append(c)
    # Who implements a changed class or interface, or overrides a changed method (distance 2).
    for d in inner or changed:
        owner = d.name if d.kind in ("class", "interface", "type") else d.scope if d.kind == "method" else ""
        if not owner:
            continue
        for sub in [r for r in other_files(index.references(owner)) if r.tag.kind == "base"][:MAX_REFERENCES]:
            overrides = (
                [h for h in index.definitions(d.name) if h.path == sub.path and h.tag.scope == sub.tag.scope]
                if d.kind == "method"
                else []
            )
            for hit in overrides or [h for h in index.definitions(sub.tag.scope) if h.path == sub.path]:
                what = f"overrides {_qualified(d)}" if overrides else f"implements {owner}"
                c = _definition(snapshot, hit, f"{_qualified(hit.tag)} {what}", 2, path)
                if c is not None:
                    out.append(c)
        if len(out) > MAX_CANDIDATES:
            break
    return out[:MAX_CANDIDATES]


def related(snapshot: Snapshot, path: str, start: int, end: int, *, budget_tokens: int) -> tuple[list[Snippet], int]:
    """The snippets for lines ``start``..``end`` of ``path`` that fit ``budget_tokens``, nearest first, none
    overlapping another; and how many related snippets were left out."""
    ranked = sorted(candidates(snapshot, path, start, end), key=lambda c: c.rank)
    chosen: list[Snippet] = []
    left_out = 0
    spent = 0
    for c in ranked:
        s = c.snippet
        if any(o.path == s.path and o.start <= s.end and s.start <= o.end for o in chosen):
            continue  # the same code, reached another way: shown once, for its nearest reason
        cost = estimate_tokens(s.text) + estimate_tokens(f"{s.path} {s.why}") + 10
        if spent + cost > budget_tokens:
            left_out += 1
            continue
        chosen.append(s)
        spent += cost
    return chosen, left_out
