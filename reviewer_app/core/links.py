"""Text the app publishes, confined once, at the end (pure: no I/O): in everything written to GitHub (reviews and
their comments, answers, acknowledgements, check runs: ``confine_write``, applied by the GitHub client's one write
path), links and images that lead off GitHub's own host become plain text; in answers, ``suggestion`` fences plain
code.

Why: an answer repeats what the model read, and the model reads what anyone wrote in a thread; a review quotes the
model, a footer or an acknowledgement quotes a learning someone taught. A link or an image can carry a tracking pixel
or a phishing page under the App's name; a ``suggestion`` block is a committable change that went through none of the
anchoring checks a review's suggestions get (core/anchoring.py). Code is left as it is: nothing renders inside it.
The terminal's confinement is core/terminal.py.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

from reviewer_app.core.markdown import _outside_code
from reviewer_app.core.markers import fenced_lines

_FENCE_INFO = re.compile(r"^(`{3,}|~{3,})(\s*)suggestion\b(.*)$", re.IGNORECASE)
_LINK = re.compile(r"(!?)\[([^\]\n]*)\]\(\s*<?([^)\s>]*)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
_AUTOLINK = re.compile(r"<((?:https?|ftp|mailto):[^>\s]+)>", re.IGNORECASE)
_BARE = re.compile(r"(?<![\w/`])((?:https?://|www\.)[^\s<>`]+)", re.IGNORECASE)
_DEFINITION = re.compile(r"^( {0,3})\[[^\]\n]+\]:\s*\S+.*$")
_BACKTICKS = re.compile(r"`+")


# The Markdown fields of the REST writes the app makes: a review's or comment's body, each inline comment's body,
# a check run's output (its title is plain text, never rendered).
_TEXT_FIELDS = ("body",)
_OUTPUT_FIELDS = ("summary", "text")


def carries_text(data: Any) -> bool:
    """Whether a write's JSON ``data`` has Markdown that GitHub renders (``confine_write`` would look at it)."""
    return isinstance(data, Mapping) and (
        any(isinstance(data.get(f), str) for f in _TEXT_FIELDS)
        or isinstance(data.get("comments"), list)
        or isinstance(data.get("output"), Mapping)
    )


def confine_write(data: Mapping[str, Any], host: str) -> dict[str, Any]:
    """A copy of a write's JSON ``data`` whose rendered text (``body``, each ``comments[].body``, ``output.summary``
    and ``output.text``) has its links confined to ``host`` (``confine_links``); everything else as it was."""
    out = dict(data)
    for f in _TEXT_FIELDS:
        if isinstance(out.get(f), str):
            out[f] = confine_links(out[f], host)
    if isinstance(out.get("comments"), list):
        out["comments"] = [confine_write(c, host) if isinstance(c, Mapping) else c for c in out["comments"]]
    if isinstance(out.get("output"), Mapping):
        output = dict(out["output"])
        for f in _OUTPUT_FIELDS:
            if isinstance(output.get(f), str):
                output[f] = confine_links(output[f], host)
        out["output"] = output
    return out


def plain_suggestions(text: str) -> str:
    """Every fenced ``suggestion`` block shown as plain code (same content, no "Commit suggestion" button)."""
    lines = text.split("\n")
    flags, _ = fenced_lines(lines)
    out: list[str] = []
    for i, (line, fenced) in enumerate(zip(lines, flags, strict=True)):
        # A fenced line opens a block when the line before it is outside one, or closed the one before.
        opens = fenced and (i == 0 or not flags[i - 1] or fenced_lines(lines[:i])[1] is None)
        out.append(_FENCE_INFO.sub(r"\1", line) if opens else line)
    return "\n".join(out)


def confine_links(text: str, host: str) -> str:
    """Links and images to ``host`` (the repository's GitHub host, e.g. ``github.com``) kept; every other one as
    its text followed by the address in code, which GitHub neither links nor loads."""
    lines = text.split("\n")
    flags, _ = fenced_lines(lines)
    out: list[str] = []
    for line, fenced in zip(lines, flags, strict=True):
        if fenced:
            out.append(line)
        elif _DEFINITION.match(line):
            out.append(_code(line.strip()))  # a reference definition would turn [text][ref] into a link
        else:
            out.append(_outside_code(line, lambda part: _confine(part, host.lower())))
    return "\n".join(out)


def _own(url: str, host: str) -> bool:
    parsed = urllib.parse.urlsplit(url)
    return parsed.scheme == "https" and (parsed.hostname or "").lower() == host


def _confine(part: str, host: str) -> str:
    def link(m: re.Match[str]) -> str:
        image, label, url = m.group(1), m.group(2), m.group(3)
        if _own(url, host):
            return m.group(0)
        shown = label.strip() or ("image" if image else "link")
        return f"{shown} ({_code(url)})" if url else shown

    for _ in range(8):  # inside out: an image inside a link, a link inside a label
        confined = _LINK.sub(link, part)
        if confined == part:
            break
        part = confined
    part = _AUTOLINK.sub(lambda m: m.group(0) if _own(m.group(1), host) else _code(m.group(1)), part)
    return _outside_code(
        part, lambda rest: _BARE.sub(lambda m: m.group(1) if _own(m.group(1), host) else _code(m.group(1)), rest)
    )


def _code(text: str) -> str:
    """``text`` as an inline code span, with a fence longer than any backtick run inside it."""
    longest = max((len(r) for r in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"
