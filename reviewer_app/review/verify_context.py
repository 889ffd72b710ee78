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
# "path:line" or "path:start-end" at a line's start (the codebase's find_definition answer), then, when the answer
# names it, the kind and the qualified name ("method IoRead.ignore_str").
_LOCATION = re.compile(r"^\s*(?:[-*]\s*)?([^\s:]+):(\d+)(?:-(\d+))?(?::\s+\w+\s+([\w.$]+))?", re.MULTILINE)
_WORD = re.compile(r"[A-Za-z_$][\w$]*")


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


def look_up(codebase: Codebase, need: str, pointers: Sequence[str] = ()) -> str:
    """The answer to a verifier's "need": a repository path's first lines, or a symbol's definitions (``Class.method``
    narrows to the class) with the code of LOOKUP_DEFINITIONS of them, those the finding points at first (see
    ``_pointed``); bounded text that says when nothing was found. ``pointers`` are the texts that say which one is
    meant, most telling first: the verifier's reason, then the finding itself."""
    need = need.strip().strip("`").strip()
    try:
        if "/" in need or re.search(r"\.\w{1,5}$", need):
            text = codebase.read_file(need.lstrip("./"), 1, LOOKUP_LINES)
            if text is not None:
                return _bounded(text)
        name = re.split(r"[\s(]", need, maxsplit=1)[0]
        found = codebase.find_definition(name, limit=LOOKUP_CANDIDATES)
        parts = [found]
        for location in _pointed(list(_LOCATION.finditer(found)), pointers)[:LOOKUP_DEFINITIONS]:
            path, start = location.group(1), int(location.group(2))
            end = min(int(location.group(3) or start + LOOKUP_LINES - 1), start + LOOKUP_LINES - 1)
            body = codebase.read_file(path, start, end)
            if body is not None:
                parts.append(f"{path}:\n{body}")
        return _bounded("\n\n".join(parts))
    except Exception as exc:  # the verdict is given without it
        log.warning("codebase lookup of %r failed: %s", need, exc)
        return "(the lookup failed: judge from what is shown)"


def _pointed(locations: list[re.Match[str]], pointers: Sequence[str]) -> list[re.Match[str]]:
    """The definitions in the order the finding points at them: one whose owner (the class, type or trait before the
    name) a pointer names first, the earlier pointer first; then those with a body before one-line declarations (an
    interface's or trait's method: its signature is listed already); then as listed. Several classes often define the
    same method (serde's readers each have ``ignore_str``): the finding says which one it is about."""
    named = [set(_WORD.findall(text)) for text in pointers]

    def key(item: tuple[int, re.Match[str]]) -> tuple[int, int, int]:
        index, location = item
        qualified = location.group(4) or ""
        owner = qualified.rsplit(".", 1)[0] if "." in qualified else None
        rank = next((k for k, words in enumerate(named) if owner and owner in words), len(named))
        declaration = location.group(3) is not None and location.group(3) == location.group(2)
        return rank, int(declaration), index

    return [location for _, location in sorted(enumerate(locations), key=key)]


def _bounded(text: str) -> str:
    if len(text) <= MAX_LOOKUP_CHARS:
        return text
    return text[:MAX_LOOKUP_CHARS] + f"\n... ({len(text) - MAX_LOOKUP_CHARS} more characters not shown)"
