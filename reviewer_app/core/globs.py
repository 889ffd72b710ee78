"""Repository path globs matched in linear time (pure): a glob compiles to a list of atoms, and matching simulates the
automaton over the path once (a set of atom positions per character), so no pattern can make it backtrack.

``**`` crosses directories, ``*`` and ``?`` do not, ``[abc]`` / ``[!abc]`` is a class, ``{a,b}`` is either (one level,
no nesting). As in .gitignore, a glob without ``/`` matches a file name in any directory, one ending in ``/`` a whole
directory, and one starting with ``/`` is anchored at the repository's top (``/config.py`` is the top-level file only).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

MAX_GLOB = 200  # characters of one glob
MAX_DOUBLE_STARS = 4  # ``**`` in one glob: more says nothing a shorter glob does not
MAX_ALTERNATIVES = 16  # globs one ``{a,b}`` glob expands to
MAX_PATH = 4_096  # a longer path matches no glob (GitHub's paths are far shorter)

_GLOB_CHARS = re.compile(r"^[A-Za-z0-9_./*?\[\]{},@+=~-]+$")
_SPECIAL = frozenset("*?[]{}")

# Atom kinds: a literal character, ``?``, ``*``, ``**`` (any characters), ``**/`` (zero or more whole directories),
# and a class.
LIT, ONE, STAR, ANY, DIRS, CLASS = range(6)


@dataclass(frozen=True)
class Atom:
    kind: int
    chars: frozenset[str] = frozenset()  # LIT: the one character; CLASS: the set
    negated: bool = False  # CLASS: ``[!...]``


def check_glob(glob: str | None) -> str | None:
    """A path glob as stored (None or empty: every path), or ValueError with a reason a person can act on: relative
    (a leading ``/`` only anchors it), no ``..``, glob characters only, at most MAX_GLOB characters and
    MAX_DOUBLE_STARS ``**``, braces one level deep."""
    if glob is None or not glob.strip():
        return None
    glob = glob.strip()
    if len(glob) > MAX_GLOB:
        raise ValueError(f"a path glob is at most {MAX_GLOB} characters")
    body = glob[1:] if glob.startswith("/") else glob
    if not body or body.startswith("/") or ".." in body.split("/") or not _GLOB_CHARS.match(body):
        raise ValueError("the path is not a repository path glob (like src/legacy/** or *.sql)")
    if body.count("**") > MAX_DOUBLE_STARS:
        raise ValueError(f"a path glob has at most {MAX_DOUBLE_STARS} `**`")
    _expand(body)  # raises on unbalanced or nested braces, or too many alternatives
    return glob


def exact_glob(path: str) -> str:
    """The glob that matches ``path`` and nothing else: glob characters bracketed, a top-level file anchored."""
    escaped = "".join(f"[{c}]" if c in _SPECIAL else c for c in path)
    return escaped if "/" in path else "/" + escaped


def path_matches(glob: str | None, path: str) -> bool:
    """Whether ``path`` falls under ``glob`` (None matches every path)."""
    return glob is None or match_steps(glob, path)[0]


def match_steps(glob: str, path: str) -> tuple[bool, int]:
    """Whether ``path`` matches ``glob``, and how many automaton steps it took (at most one per live state per
    character: linear in the path, whatever the glob)."""
    if len(path) > MAX_PATH:
        return False, 0
    steps = 0
    for atoms in _compiled(glob):
        matched, spent = _run(atoms, path)
        steps += spent
        if matched:
            return True, steps
    return False, steps


def _run(atoms: tuple[Atom, ...], path: str) -> tuple[bool, int]:
    end = len(atoms)
    inside = end + 1  # state ``inside + i``: within a folder's name that the ``**/`` at ``i`` is reading
    steps = 0
    live = _closure(atoms, {0})
    for ch in path:
        following: set[int] = set()
        for i in live:
            steps += 1
            if i == end:
                continue
            if i > end:  # a ``**/`` reads a folder's name to its "/", then may end or read another
                following.add(i - inside if ch == "/" else i)
                continue
            a = atoms[i]
            if a.kind == LIT:
                if ch in a.chars:
                    following.add(i + 1)
            elif a.kind == ONE:
                if ch != "/":
                    following.add(i + 1)
            elif a.kind == CLASS:
                if ch != "/" and ((ch in a.chars) != a.negated):
                    following.add(i + 1)
            elif a.kind == STAR:
                if ch != "/":
                    following.add(i)
            elif a.kind == ANY:
                following.add(i)
            elif ch != "/":  # DIRS, at a folder's start: whole folders only, so "**/a.py" is not "xa.py"
                following.add(inside + i)
        if not following:
            return False, steps
        live = _closure(atoms, following)
    return end in live, steps


def _closure(atoms: tuple[Atom, ...], states: set[int]) -> frozenset[int]:
    """The states reachable without reading a character: past each ``*``, ``**`` and ``**/`` (each may match none)."""
    out = set(states)
    todo = list(states)
    while todo:
        i = todo.pop()
        # (a state within a folder's name, numbered past the end, never skips)
        if i < len(atoms) and atoms[i].kind in (STAR, ANY, DIRS) and i + 1 not in out:
            out.add(i + 1)
            todo.append(i + 1)
    return frozenset(out)


@lru_cache(maxsize=512)
def _compiled(glob: str) -> tuple[tuple[Atom, ...], ...]:
    if glob.startswith("/"):
        glob = glob[1:]
    elif "/" not in glob.rstrip("/"):
        glob = "**/" + glob
    if glob.endswith("/"):
        glob += "**"
    return tuple(_atoms(alternative) for alternative in _expand(glob))


def _expand(glob: str) -> list[str]:
    """The globs a ``{a,b}`` glob stands for (one level of braces); ValueError past MAX_ALTERNATIVES."""
    out = [""]
    i = 0
    while i < len(glob):
        ch = glob[i]
        if ch == "{":
            end = glob.find("}", i)
            if end < 0 or "{" in glob[i + 1 : end]:
                raise ValueError("a path glob's braces are one level deep and closed: {a,b}")
            choices = glob[i + 1 : end].split(",")
            out = [prefix + choice for prefix in out for choice in choices]
            i = end + 1
        elif ch == "}":
            raise ValueError("a path glob's braces are one level deep and closed: {a,b}")
        else:
            out = [prefix + ch for prefix in out]
            i += 1
        if len(out) > MAX_ALTERNATIVES:
            raise ValueError(f"a path glob stands for at most {MAX_ALTERNATIVES} alternatives")
    return out


def _atoms(glob: str) -> tuple[Atom, ...]:
    atoms: list[Atom] = []
    i = 0
    while i < len(glob):
        ch = glob[i]
        if glob.startswith("**/", i):
            if not atoms or atoms[-1].kind != DIRS:  # "**/**/" is "**/"
                atoms.append(Atom(DIRS))
            i += 3
        elif glob.startswith("**", i):
            atoms.append(Atom(ANY))
            i += 2
        elif ch == "*":
            atoms.append(Atom(STAR))
            i += 1
        elif ch == "?":
            atoms.append(Atom(ONE))
            i += 1
        elif ch == "[" and "]" in glob[i + 2 :]:
            end = glob.index("]", i + 2)
            body = glob[i + 1 : end]
            negated = body.startswith("!")
            atoms.append(Atom(CLASS, _class_chars(body[1:] if negated else body), negated))
            i = end + 1
        else:
            atoms.append(Atom(LIT, frozenset(ch)))
            i += 1
    return tuple(atoms)


def _class_chars(body: str) -> frozenset[str]:
    """The characters of a class body: single characters and ``a-z`` ranges."""
    chars: set[str] = set()
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            chars.update(chr(c) for c in range(ord(body[i]), ord(body[i + 2]) + 1))
            i += 3
        else:
            chars.add(body[i])
            i += 1
    return frozenset(chars)
