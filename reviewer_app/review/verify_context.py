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
MAX_LOOKUP_CHARS = 9_000
# "path:line" or "path:start-end" at a line's start (the codebase's find_definition answer).
_LOCATION = re.compile(r"^\s*(?:[-*]\s*)?([^\s:]+):(\d+)(?:-(\d+))?", re.MULTILINE)


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


def look_up(codebase: Codebase, need: str) -> str:
    """The answer to a verifier's "need": a repository path's first lines, or a symbol's definitions (``Class.method``
    narrows to the class) with the code of the first LOOKUP_DEFINITIONS; bounded text that says when nothing was
    found."""
    need = need.strip().strip("`").strip()
    try:
        if "/" in need or re.search(r"\.\w{1,5}$", need):
            text = codebase.read_file(need.lstrip("./"), 1, LOOKUP_LINES)
            if text is not None:
                return _bounded(text)
        name = re.split(r"[\s(]", need, maxsplit=1)[0]
        found = codebase.find_definition(name, limit=5)
        parts = [found]
        for location in list(_LOCATION.finditer(found))[:LOOKUP_DEFINITIONS]:
            path, start = location.group(1), int(location.group(2))
            end = min(int(location.group(3) or start + LOOKUP_LINES - 1), start + LOOKUP_LINES - 1)
            body = codebase.read_file(path, start, end)
            if body is not None:
                parts.append(f"{path}:\n{body}")
        return _bounded("\n\n".join(parts))
    except Exception as exc:  # the verdict is given without it
        log.warning("codebase lookup of %r failed: %s", need, exc)
        return "(the lookup failed: judge from what is shown)"


def _bounded(text: str) -> str:
    if len(text) <= MAX_LOOKUP_CHARS:
        return text
    return text[:MAX_LOOKUP_CHARS] + f"\n... ({len(text) - MAX_LOOKUP_CHARS} more characters not shown)"
