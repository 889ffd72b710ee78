"""What the verifier is shown from the repository at the head (through the codebase room's interface only): the code
in other files each finding's quoted lines depend on or are used by, within the verifier's budget, and the bounded
answer to the one lookup a finding may ask for ("need: <symbol or path>")."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from reviewer_app.codebase import Codebase, Snippet
from reviewer_app.core.review_model import ModelComment

log = logging.getLogger(__name__)

RELATED_TOKENS = 6_000  # cross-file code in one verification request, all findings together
MIN_FINDING_TOKENS = 400  # below this a finding's share is not worth a lookup of related code
MAX_FINDING_TOKENS = 1_500  # one finding's share, however few findings there are
LOOKUP_LINES = 200  # of a file or a definition, shown for a lookup (within MAX_LOOKUP_CHARS): a whole helper, not
# its first screen (60 lines left the decisive part of a long function or module unshown)
LOOKUP_DEFINITIONS = 2  # definitions of a symbol whose code is shown
LOOKUP_CANDIDATES = 10  # definitions listed, of which the LOOKUP_DEFINITIONS the finding points at are shown
MAX_LOOKUP_CHARS = 9_000
WINDOW_LEAD = 40  # lines shown before the line a file lookup opens at
EXCERPT_BEFORE, EXCERPT_AFTER = 8, 16  # lines around each place a long file names the finding's names
EXCERPTS_PER_NAME = 6
TELLING_NAMES = 6  # names of the finding searched for in a long file, to open its lookup where they are
# A file need: "path", "path:120" or "path:120-140" (the end is read as the window's, LOOKUP_LINES long).
_PATH_NEED = re.compile(r"(\S+?)(?::(\d+)(?:-\d+)?)?")
_MORE = re.compile(r"\n\[\d+ more lines: ask for start_line \d+\]$")  # read_file's tail: an excerpt is no read
_LINES_OF = re.compile(r"\S+: lines \d+-\d+ of (\d+)")  # the first line of the codebase's read_file
# "path:line" or "path:start-end" at a line's start (the codebase's find_definition answer), then, when the answer
# names it, the kind and the qualified name ("method IoRead.ignore_str").
_LOCATION = re.compile(r"^\s*(?:[-*]\s*)?([^\s:]+):(\d+)(?:-(\d+))?(?::\s+\w+\s+([\w.$]+))?", re.MULTILINE)
_WORD = re.compile(r"[A-Za-z_$][\w$]*")
# Words a language spells, not names of this code: searching for them finds everything.
_KEYWORDS = frozenset(
    "true false null nil none undefined self this return if elif else for while def func function const let var "
    "async await new class struct impl fn pub err error string int bool module exports require import from "
    "package not and".split()
)


def finding_context(
    codebase: Codebase | None, comments: Sequence[ModelComment], *, budget_tokens: int = RELATED_TOKENS
) -> dict[int, list[Snippet]]:
    """By index of ``comments``: the cross-file code each one's lines (the quote's span on the head side) depend on
    or are used by, nearest first; the budget is shared evenly, a finding on the base side (removed code) gets none.
    Empty without a codebase. A failure of the codebase costs the context, never the verification."""
    if codebase is None or not comments:
        return {}
    share = min(MAX_FINDING_TOKENS, budget_tokens // len(comments))
    if share < MIN_FINDING_TOKENS:
        share = MIN_FINDING_TOKENS
    out: dict[int, list[Snippet]] = {}
    spent = 0
    for index, comment in enumerate(comments):
        if comment.side == "LEFT" or spent + share > budget_tokens:
            continue
        first = comment.start_line or comment.line
        try:
            snippets, left_out = codebase.related(comment.path, first, comment.line, budget_tokens=share)
        except Exception as exc:  # an optimisation: the verifier judges without it
            log.warning("codebase context for %s:%d not available: %s", comment.path, comment.line, exc)
            continue
        own = [s for s in snippets if s.path != comment.path or not (s.start <= comment.line and first <= s.end)]
        if own:
            out[index] = own
            spent += share
        if left_out:
            log.info("verifier context for %s:%d: %d snippet(s) left out", comment.path, comment.line, left_out)
    return out


def look_up(codebase: Codebase, need: str, pointers: Sequence[str] = (), *, at: tuple[str, int] | None = None) -> str:
    """The answer to a verifier's "need": a repository path's lines (a long file's from the line it names, or the
    parts that name what the finding is about: see ``_long_file``), or a symbol's definitions (``Class.method``
    narrows to the class) with the code of LOOKUP_DEFINITIONS of them, those the finding points at first (see
    ``_pointed``); bounded text that says when nothing was found. ``pointers`` are the texts that say which one is
    meant, most telling first: the verifier's reason, then the finding itself; ``at`` is the finding's place (path,
    line)."""
    need = need.strip().strip("`").strip()
    try:
        place = _PATH_NEED.fullmatch(need)
        if place is not None and ("/" in place.group(1) or re.search(r"\.\w{1,5}$", place.group(1))):
            path = place.group(1).removeprefix("./").lstrip("/")  # ".github/..." keeps its dot
            text = codebase.read_file(path, 1, LOOKUP_LINES)
            if text is not None:
                total = _LINES_OF.match(text)  # "path: lines 1-200 of 638": a file longer than the window is moved
                if total is not None and int(total.group(1)) > LOOKUP_LINES:
                    text = (
                        _long_file(codebase, path, int(total.group(1)), int(place.group(2) or 0), pointers, at) or text
                    )
                return _bounded(text)
        name = re.split(r"[\s(]", need, maxsplit=1)[0]
        found = codebase.find_definition(name, limit=LOOKUP_CANDIDATES)
        parts = [found]
        for location in _pointed(list(_LOCATION.finditer(found)), pointers, at[0] if at else None)[:LOOKUP_DEFINITIONS]:
            path, start = location.group(1), int(location.group(2))
            end = min(int(location.group(3) or start + LOOKUP_LINES - 1), start + LOOKUP_LINES - 1)
            body = codebase.read_file(path, start, end)
            if body is not None:
                parts.append(f"{path}:\n{body}")
        return _bounded("\n\n".join(parts))
    except Exception as exc:  # the verdict is given without it
        log.warning("codebase lookup of %r failed: %s", need, exc)
        return "(the lookup failed: judge from what is shown)"


def _long_file(
    codebase: Codebase, path: str, total: int, line: int, pointers: Sequence[str], at: tuple[str, int] | None
) -> str | None:
    """What a lookup shows of a file longer than LOOKUP_LINES; None for its first lines. The need names a line
    ("path:120"): a window from WINDOW_LEAD lines before it. Else the parts of the file that matter, within
    LOOKUP_LINES in all: the finding's own lines and what follows them, when the need is the finding's own file (what
    it asks for is the rest of what it was shown), then each place that names what the finding is about (the names in
    its verifier's reason, then in its own words: a variable set in one place and reset, or not, in another far off),
    EXCERPT_BEFORE lines before and EXCERPT_AFTER after; None when there is none, or all of it is in the first lines."""
    if line:
        start = max(1, min(line - WINDOW_LEAD, total - LOOKUP_LINES + 1))
        return codebase.read_file(path, start, start + LOOKUP_LINES - 1)
    own = at is not None and at[0] == path
    spans: list[tuple[int, int]] = []
    if own:
        spans.append((max(1, at[1] - 2 * EXCERPT_BEFORE), min(total, at[1] + 3 * EXCERPT_AFTER)))
    names: list[str] = []
    for name in _telling_names(pointers, exclude=path.rsplit("/", 1)[-1].split(".", 1)[0]):
        found = codebase.search_code(name, path_glob=path, limit=EXCERPTS_PER_NAME)
        for hit in (int(m.group(1)) for m in re.finditer(rf"^{re.escape(path)}:(\d+):", found, re.M)):
            span = (max(1, hit - EXCERPT_BEFORE), min(total, hit + EXCERPT_AFTER))
            if sum(b - a + 1 for a, b in _merged([*spans, span])) > LOOKUP_LINES:
                break
            spans.append(span)
            names += [name] if name not in names else []
    if not spans or max(b for _, b in spans) <= LOOKUP_LINES:
        return None  # nothing to point at, or all of it in the first lines: those are shown
    parts = [_MORE.sub("", codebase.read_file(path, a, b) or "") for a, b in _merged(spans)]
    what = " and ".join(x for x in ("the finding's lines" if own else "", ", ".join(names)) if x)
    return f"{path}: {total} lines; the parts that show {what}:\n" + "\n".join(parts)


def _merged(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _telling_names(pointers: Sequence[str], *, exclude: str) -> list[str]:
    """Code names in the pointers, most telling first: those in backticks, then those only code spells (with an
    underscore, an inner capital or a call's parenthesis), the earlier pointer first; at most TELLING_NAMES."""
    quoted: list[str] = []
    spelled: list[str] = []
    for text in pointers:
        for span in re.findall(r"`([^`]+)`", text):
            quoted += [w for w in _WORD.findall(span) if len(w) > 2]
        spelled += [
            m.group(1)
            for m in re.finditer(r"([A-Za-z_$][\w$]*)(\()?", text)
            if "_" in m.group(1) or re.search(r"[a-z][A-Z]", m.group(1)) or m.group(2)
        ]
    out: list[str] = []
    for name in quoted + spelled:
        if name not in out and name != exclude and name.lower() not in _KEYWORDS and len(out) < TELLING_NAMES:
            out.append(name)
    return out


def _pointed(locations: list[re.Match[str]], pointers: Sequence[str], own: str | None = None) -> list[re.Match[str]]:
    """The definitions in the order the finding points at them: one whose owner (the class, type or trait before the
    name) a pointer names first, the earlier pointer first; then one in the finding's own file (``own``) or in a file
    a pointer names (``yargs.js's own reset``); then those with a body before one-line declarations (an interface's or
    trait's method: its signature is listed already); then as listed. Several classes often define the same method
    (serde's readers each have ``ignore_str``; yargs' helpers each have ``reset``): the finding says which one."""
    named = [set(_WORD.findall(text)) for text in pointers]
    said = " ".join(pointers)

    def key(item: tuple[int, re.Match[str]]) -> tuple[int, int, int, int]:
        index, location = item
        qualified = location.group(4) or ""
        owner = qualified.rsplit(".", 1)[0] if "." in qualified else None
        rank = next((k for k, words in enumerate(named) if owner and owner in words), len(named))
        path = location.group(1)
        base = re.escape(path.rsplit("/", 1)[-1])
        named_file = path in said or re.search(rf"(?<![\w./-]){base}(?!\w)", said) is not None
        elsewhere = path != own and not named_file
        declaration = location.group(3) is not None and location.group(3) == location.group(2)
        return rank, int(elsewhere), int(declaration), index

    return [location for _, location in sorted(enumerate(locations), key=key)]


def _bounded(text: str) -> str:
    if len(text) <= MAX_LOOKUP_CHARS:
        return text
    return text[:MAX_LOOKUP_CHARS] + f"\n... ({len(text) - MAX_LOOKUP_CHARS} more characters not shown)"
