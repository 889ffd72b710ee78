"""Untrusted Markdown made publishable: neutralised, then the harmless HTML GitHub renders let through, balanced."""

from __future__ import annotations

import re
from collections.abc import Callable

from reviewer_app.core.markers import fenced_lines, safe_for_github, strip_markers

# Tags GitHub renders and that cannot hide, frame or ping anything; ``details`` may carry ``open``.
ALLOWED_TAGS = frozenset({"details", "summary", "sub", "sup", "br", "code"})
_VOID_TAGS = frozenset({"br"})
# What CommonMark would take for an HTML tag (and GitHub's sanitiser would then swallow when not allowed).
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)((?:\s[^<>]*)?)(/?)>")
_ESCAPED_LINE_START = re.compile(r"^( {0,3})&lt;")
_BACKTICKS = re.compile(r"`+")


def publishable(text: str, max_chars: int) -> str:
    """``text`` safe to publish (see ``safe_for_github``: no markers, no pings, no comments or stray HTML blocks) that
    still renders the harmless HTML in ALLOWED_TAGS, and shows any other tag as text instead of losing it to
    GitHub's sanitiser (``Optional<Path>``). Inline code spans and fenced code are left as they are.

    A line that starts with an allowed tag is followed by a blank line, so the HTML block CommonMark opens there ends
    on that line and our fence tracking agrees with GitHub's. Allowed tags are balanced: a closing tag without its
    opening one is shown as text, and tags left open are closed at the end, so the text cannot open or close a
    section of ours (a ``</details>`` in a folded comment would otherwise close our fold)."""
    budget = max_chars
    while True:
        out = _allow_html(safe_for_github(text, budget))
        if len(out) <= max_chars or budget <= 1:
            return out
        budget = max(1, budget - (len(out) - max_chars))


def inline_text(text: str, max_chars: int) -> str:
    """``text`` as one line of safe Markdown (for a list entry or a title): markers gone, mentions that do not ping,
    every tag shown as text outside code spans, cut at ``max_chars`` with an ellipsis."""
    flat = " ".join(strip_markers(text).split())
    if len(flat) > max_chars:
        flat = flat[: max(1, max_chars - 1)].rsplit(" ", 1)[0].rstrip()
        spans = _code_spans(flat)
        unmatched = [m.group(0) for m in _BACKTICKS.finditer(flat) if not any(a <= m.start() < b for a, b in spans)]
        flat += (unmatched[-1] if unmatched else "") + "…"  # cut inside a code span: close it
    line = safe_for_github(flat, max_chars + 8).replace("\n", " ")
    return _outside_code(line, lambda part: part.replace("<", "&lt;"))


def _allow_html(text: str) -> str:
    out: list[str] = []
    open_tags: list[str] = []
    lines = text.split("\n")
    flags, fence = fenced_lines(lines)
    for index, (line, fenced) in enumerate(zip(lines, flags, strict=True)):
        if fenced:
            out.append(line)
            continue
        leading = _ESCAPED_LINE_START.match(line)
        if leading:
            candidate = leading.group(1) + "<" + line[leading.end() :]
            tag = _TAG.match(candidate, len(leading.group(1)))
            if tag and _allowed(tag) and (not tag.group(1) or tag.group(2).lower() in open_tags):
                line = candidate
        line = _outside_code(line, lambda part: _tags(part, open_tags))
        out.append(line)
        next_line = lines[index + 1] if index + 1 < len(lines) else ""
        if line.lstrip(" ").startswith("<") and len(line) - len(line.lstrip(" ")) <= 3 and next_line.strip():
            out.append("")  # end the HTML block here
    if fence is None and open_tags:
        out.extend(["", "".join(f"</{name}>" for name in reversed(open_tags))])
    return "\n".join(out)


def _tags(part: str, open_tags: list[str]) -> str:
    """``part`` (prose outside code spans) with allowed tags kept while balanced and every other tag escaped."""

    def one(match: re.Match[str]) -> str:
        name = match.group(2).lower()
        if not _allowed(match):
            return "&lt;" + match.group(0)[1:]
        if name in _VOID_TAGS:
            return match.group(0)
        if match.group(1):  # a closing tag
            if name not in open_tags:
                return "&lt;" + match.group(0)[1:]
            while open_tags.pop() != name:
                pass
            return match.group(0)
        if match.group(4):  # <details/> is not a thing
            return "&lt;" + match.group(0)[1:]
        open_tags.append(name)
        return match.group(0)

    return _TAG.sub(one, part)


def _allowed(match: re.Match[str]) -> bool:
    name, attrs = match.group(2).lower(), match.group(3).strip()
    return name in ALLOWED_TAGS and (not attrs or (name == "details" and attrs.lower() == "open"))


def _code_spans(line: str) -> list[tuple[int, int]]:
    """The (start, end) of each inline code span on ``line``: a backtick run closed by the next run as long."""
    spans: list[tuple[int, int]] = []
    runs = list(_BACKTICKS.finditer(line))
    i = 0
    while i < len(runs):
        closer = next((j for j in range(i + 1, len(runs)) if len(runs[j].group(0)) == len(runs[i].group(0))), None)
        if closer is None:
            i += 1
            continue
        spans.append((runs[i].start(), runs[closer].end()))
        i = closer + 1
    return spans


def _outside_code(line: str, change: Callable[[str], str]) -> str:
    """``line`` with ``change`` applied to the text outside its inline code spans."""
    pieces: list[str] = []
    at = 0
    for start, end in _code_spans(line):
        pieces.append(change(line[at:start]))
        pieces.append(line[start:end])
        at = end
    pieces.append(change(line[at:]))
    return "".join(pieces)
