"""The cross-file code a change depends on or is used by, chosen for it within a budget: the callers of each changed
function, method or class (the call site in its enclosing scope), the definitions of what the changed lines call, the
base types and interfaces a changed class implements, and the classes that implement a changed class or override a
changed method. A reference and a definition are linked only when the reference's file can mean that definition
(links.py: what it imports and names), not by a shared name alone. Ranked nearest first, code before tests,
deduplicated; what does not fit is counted. Code in files the pull request did not change comes first: the model
is shown the changed files already."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from reviewer_app.codebase import Snippet
from reviewer_app.codebase.index import Located
from reviewer_app.codebase.links import Defined, FileView, links, module_names
from reviewer_app.codebase.scopes import enclosing_scope
from reviewer_app.codebase.tags import Tag
from reviewer_app.core.tokens import estimate_tokens

if TYPE_CHECKING:
    from reviewer_app.codebase.snapshot import Snapshot

_T = TypeVar("_T", Tag, Located)

MAX_DEFINITIONS = 3  # a name defined in more files than this is too common to say which one is meant
MAX_REFERENCES = 40  # call sites looked at per changed name
MAX_TEST_CALLERS = 3  # of them in test files: how the change is exercised, not every test that calls it
MAX_SCOPE_LINES = 30  # a caller's scope longer than this is shown as the lines around the call
AROUND_CALL = 6
MAX_DEFINITION_LINES = 25  # signature, docstring and the start of the body
MAX_CANDIDATES = 200
CONSTRUCTORS = frozenset({"__init__", "__new__", "constructor"})


@dataclass(frozen=True)
class _Candidate:
    snippet: Snippet
    rank: tuple[bool, int, bool, int, str, int]


def _code(items: list[_T]) -> list[_T]:
    """Without module-level constants: the related code is about what runs (a constant is found by lookups)."""
    return [i for i in items if (i.kind if isinstance(i, Tag) else i.tag.kind) != "constant"]


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
        Snippet(ref.path, first, last, body, why, distance),
        (_changed(snapshot, ref.path), distance, is_test(ref.path), _near(origin, ref.path), ref.path, first),
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
        Snippet(hit.path, first, last, body, why, distance),
        (_changed(snapshot, hit.path), distance, is_test(hit.path), _near(origin, hit.path), hit.path, first),
    )


def _changed(snapshot: Snapshot, path: str) -> bool:
    """Whether the pull request changed ``path``: the model is shown its changes already, so its code comes last."""
    found = snapshot.files.get(path)
    return found is not None and found.changed is not None


def is_test(path: str) -> bool:
    """A test file by the usual names (``tests/``, ``test_x.py``, ``x_test.go``, ``x.test.ts``, ``x.spec.js``)."""
    parts = path.lower().split("/")
    name = parts[-1]
    stem = name.rsplit(".", 1)[0]
    return (
        any(p in ("test", "tests", "__tests__", "testing", "spec") for p in parts[:-1])
        or stem.startswith("test_")
        or stem.endswith(("_test", ".test", ".spec", "_spec"))
    )


class _Linker:
    """The link rules (links.py) over one snapshot: each file read, and its tags and each class's subclasses looked up
    in the index, once."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._views: dict[str, FileView | None] = {}
        self._defined: dict[tuple[str, Tag], Defined] = {}
        self._tags: dict[str, list[Tag]] = {}
        self._derived: dict[str, frozenset[str]] = {}
        self._names: dict[str, frozenset[str]] = {}

    def tags(self, path: str) -> list[Tag]:
        """The file's tags, constants left out."""
        if path not in self._tags:
            self._tags[path] = _code(self.snapshot.index.tags(path))
        return self._tags[path]

    def derived(self, owner: str) -> frozenset[str]:
        """The classes that name ``owner`` as a base, anywhere."""
        if owner not in self._derived:
            refs = self.snapshot.index.references(owner)[:MAX_REFERENCES]
            self._derived[owner] = frozenset(r.tag.scope for r in refs if r.tag.kind == "base")
        return self._derived[owner]

    def view(self, path: str) -> FileView | None:
        if path not in self._views:
            text = self.snapshot.text(path)
            self._views[path] = None if text is None else FileView.of(path, text)
        return self._views[path]

    def defined(self, path: str, tag: Tag) -> Defined:
        key = (path, tag)
        if key not in self._defined:
            view = self.view(path)
            tags = self.tags(path)
            bases: frozenset[str] = frozenset()
            derived: frozenset[str] = frozenset()
            if tag.kind == "method" and tag.scope:
                bases = frozenset(t.name for t in tags if t.kind == "base" and t.scope == tag.scope)
                derived = self.derived(tag.scope)
            nested = tag.kind != "method" and any(
                t.is_definition
                and t is not tag
                and t.line <= tag.line
                and tag.end <= t.end
                and (t.line, t.end) != (tag.line, tag.end)
                for t in tags
            )
            self._defined[key] = Defined(
                path, tag, module_names(path, view.text if view else ""), bases, derived, nested
            )
        return self._defined[key]

    def exported(self, hit: Located) -> bool:
        """Whether the package ``hit`` sits in re-exports its name from its file (``from .core import Argument`` in
        ``click/__init__.py``): which of two same-named classes ``click.Argument`` means."""
        folder = hit.path.rpartition("/")[0]
        stem = hit.path.rsplit("/", 1)[-1].split(".")[0]
        for init in ("__init__.py", "index.ts", "index.js", "index.mjs"):
            view = self.view(f"{folder}/{init}" if folder else init)
            if view is not None:
                return stem in view.imported.get(hit.tag.name, frozenset())
        return False

    def links(self, ref: Located, target: Located) -> bool:
        """links.py's rules; and a file that defines the name itself is taken to mean its own (``lx.next()`` in the
        lexer's file is the lexer's ``next``, not the parser's)."""
        view = self.view(ref.path)
        if view is None or ref.tag.name in self.names(ref.path):
            return False
        return links(ref.tag, view, self.defined(target.path, target.tag))

    def names(self, path: str) -> frozenset[str]:
        """What the file defines, by name."""
        if path not in self._names:
            self._names[path] = frozenset(t.name for t in self.tags(path) if t.is_definition)
        return self._names[path]


def candidates(snapshot: Snapshot, path: str, start: int, end: int) -> list[_Candidate]:
    """Every snippet related to lines ``start``..``end`` of ``path``, unranked and possibly overlapping."""
    index = snapshot.index
    linker = _Linker(snapshot)
    tags = linker.tags(path)
    changed = [t for t in tags if t.is_definition and t.line <= end and t.end >= start]
    # The innermost definitions the change touches: a method changed inside a class is about the method.
    inner = [t for t in changed if not any(o is not t and t.line <= o.line and o.end <= t.end for o in changed)]
    calls = [Located(path, t) for t in tags if t.kind == "call" and start <= t.line <= end]
    changed_classes = {t.name for t in changed if t.kind in ("class", "interface", "type")}
    bases = [
        Located(path, t) for t in tags if t.kind == "base" and (start <= t.line <= end or t.scope in changed_classes)
    ]
    out: list[_Candidate] = []

    def other_files(hits: Iterable[Located]) -> list[Located]:
        return [h for h in hits if h.path != path]

    def linked(refs: list[Located], name: str) -> list[Located]:
        """The definitions of ``name`` in other files that any of ``refs`` can mean (those a package re-exports first,
        when several can); none when too many can."""
        hits = [h for h in other_files(_code(index.definitions(name))) if any(linker.links(r, h) for r in refs)]
        if len(hits) > 1:
            hits = [h for h in hits if linker.exported(h)] or hits
        return [] if len(hits) > MAX_DEFINITIONS else hits

    # Callers of what changed (distance 0; 1 when the call could mean another definition too), test files last and
    # few; and, for a changed class, where it is constructed.
    for d in inner or changed:
        if d.kind == "method" and d.name in CONSTRUCTORS:
            # A changed constructor is called by the class's name (``Rule(...)``, ``new Rule()``).
            owner = [t for t in tags if t.name == d.scope and t.kind == "class"]
            if not owner:
                continue
            d = owner[0]
        target = Located(path, d)
        others = other_files(_code(index.definitions(d.name)))[: MAX_DEFINITIONS * 3]
        refs = [r for r in other_files(index.references(d.name)) if r.tag.kind == "call" and linker.links(r, target)]
        refs.sort(key=lambda r: is_test(r.path))
        tests = 0
        for r in refs[:MAX_REFERENCES]:
            if is_test(r.path):
                tests += 1
                if tests > MAX_TEST_CALLERS:
                    break
            ambiguous = 1 if any(linker.links(r, o) for o in others) else 0
            c = _call_site(snapshot, r, f"caller of {_qualified(d)}", ambiguous, path)
            if c is not None:
                out.append(c)
    # What the changed lines call, defined in other files (distance 1).
    by_name: dict[str, list[Located]] = {}
    for call in calls:
        by_name.setdefault(call.tag.name, []).append(call)
    for name, refs in by_name.items() if not is_test(path) else ():  # a test calls what it tests: the change shows it
        if any(t.name == name and t.is_definition for t in tags):
            continue  # defined in this file: the model sees the file's own code
        hits = linked(refs, name)
        for hit in hits:
            c = _definition(
                snapshot, hit, f"definition of {_qualified(hit.tag)}, called by the change", len(hits), path
            )
            if c is not None:
                out.append(c)
    # The base types and interfaces a changed class implements (distance 1).
    by_base: dict[str, list[Located]] = {}
    for base in bases:
        by_base.setdefault(base.tag.name, []).append(base)
    for name, refs in by_base.items():
        for hit in linked(refs, name):
            c = _definition(snapshot, hit, f"{hit.tag.kind} {name}, which the changed code implements", 1, path)
            if c is not None:
                out.append(c)
    # Who implements a changed class or interface (the whole class), or overrides a changed method (distance 2).
    for d in inner or changed:
        owner = d.name if d.kind in ("class", "interface", "type") else d.scope if d.kind == "method" else ""
        owner_tags = [t for t in tags if t.name == owner and t.kind in ("class", "interface", "type")]
        if not owner_tags:
            continue
        owner_at = Located(path, owner_tags[0])
        subs = [r for r in other_files(index.references(owner)) if r.tag.kind == "base" and linker.links(r, owner_at)]
        for sub in subs[:MAX_REFERENCES]:
            if d.kind == "method":
                hits = [
                    h for h in _code(index.definitions(d.name)) if h.path == sub.path and h.tag.scope == sub.tag.scope
                ]
                what = f"overrides {_qualified(d)}"
            else:
                hits = [h for h in _code(index.definitions(sub.tag.scope)) if h.path == sub.path]
                what = f"implements {owner}"
            for hit in hits:
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
