"""A finding's evidence checked against the code (pure): the lines the model quoted must be in the file, on the side it
comments on (the head for RIGHT, the base for LEFT), at the line it names or elsewhere. A finding whose quote sits
elsewhere is moved onto the nearest place that holds it; one whose quote is nowhere in the file is dropped as
invented."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from reviewer_app.core.diff import FileDiff
from reviewer_app.core.review_model import ModelComment, Side

MIN_QUOTE_CHARS = 4  # a quote shorter than this (without whitespace) proves nothing: "}" is in every file
SEGMENT_REACH = 300  # the parts of a quote elided with "..." are looked for this many lines after the previous one
_ELISIONS = frozenset({"...", "…", "# ...", "// ...", "/* ... */", "-- ...", "<!-- ... -->"})
# A line copied from the prompt with its numbers and marker (prompt.annotate_file: old, new, marker, text).
_NUMBERED = re.compile(r"^\s*(?:\d+\s+){1,2}[-+. ](?: |$)")


@dataclass(frozen=True)
class FileText:
    """A file's lines at the head and at the base of the change (None: not known, e.g. it could not be read)."""

    head: Sequence[str] | None
    base: Sequence[str] | None

    def side(self, side: Side) -> Sequence[str] | None:
        return self.base if side == "LEFT" else self.head


@dataclass(frozen=True)
class Evidence:
    """What the check made of an answer's comments, in their order."""

    kept: tuple[ModelComment, ...]  # checked (and moved where the quote showed the right line), or not checkable
    invented: tuple[ModelComment, ...]  # no quote, or a quote the file does not hold near the finding
    reanchored: int = 0
    unchecked: int = 0  # kept without a check: an older answer without quotes, or a file that could not be read


def base_lines(diff: FileDiff | None, head: Sequence[str] | None) -> list[str] | None:
    """The file before the change, rebuilt from the file after it and the diff (lines outside the hunks are the same
    on both sides); None when they do not fit together or the file is not known. A file with CRLF line ends fits its
    diff too: GitHub's patch carries no ``\r`` (core/diff.py drops any), the file read at the head keeps them, so the
    lines are compared, and the base given, without a line's closing ``\r``."""
    if diff is None:
        return list(head) if head is not None else None
    if diff.status == "added":
        return []
    if head is None:
        if diff.status != "removed":
            return None
        return [ln.text for h in diff.hunks for ln in h.lines if ln.kind != "added"]
    head = [line.removesuffix("\r") for line in head]
    out: list[str] = []
    after = 1  # the next head line not yet copied
    for hunk in diff.hunks:
        first = hunk.new_start if hunk.new_length else hunk.new_start + 1
        if first < after or first - 1 > len(head):
            return None
        out.extend(head[after - 1 : first - 1])
        if len(out) != (hunk.old_start - 1 if hunk.old_length else hunk.old_start):
            return None
        new_side = [ln.text for ln in hunk.lines if ln.kind != "removed"]
        if list(head[first - 1 : first - 1 + len(new_side)]) != new_side:
            return None  # the head is not the file this diff leads to
        out.extend(ln.text for ln in hunk.lines if ln.kind != "added")
        after = first + hunk.new_length
    out.extend(head[after - 1 :])
    return out


def added_lines(diff: FileDiff | None) -> list[str] | None:
    """The whole file at the head when the diff holds it (an added file's diff is its every line), else None."""
    if diff is None or diff.status != "added" or not diff.hunks:
        return None
    return [ln.text for h in diff.hunks for ln in h.lines if ln.kind != "removed"]


def check_evidence(comments: Sequence[ModelComment], files: Mapping[str, FileText]) -> Evidence:
    """Each comment's quote looked up in its file, on its side first (then on the other side: a quote of removed code
    on a RIGHT comment moves it to the LEFT). Kept as it is when the quote covers its line, else moved onto the nearest
    place that holds the quote (the model's line number was off, the code is real), dropped when the quote is missing,
    too short, or in neither side of the file."""
    kept: list[ModelComment] = []
    invented: list[ModelComment] = []
    moved = unchecked = 0
    for comment in comments:
        text = files.get(comment.path)
        own = text.side(comment.side) if text is not None else None
        if comment.quote is None or own is None:
            kept.append(comment)
            unchecked += 1
            continue
        placed = _place(comment, text) if text is not None and _segments(comment.quote) else None
        if placed is None:
            invented.append(comment)
        else:
            moved += placed != comment
            kept.append(placed)
    return Evidence(tuple(kept), tuple(invented), moved, unchecked)


def _place(comment: ModelComment, text: FileText) -> ModelComment | None:
    """The comment where its quote is, or None when the quote is not where it could be meant."""
    other: Side = "LEFT" if comment.side == "RIGHT" else "RIGHT"
    for side in (comment.side, other):
        lines = text.side(side)
        if lines is None:
            continue
        spans = find_quote(comment.quote or "", lines)
        if not spans:
            continue
        first = comment.start_line or comment.line
        if side == comment.side and any(_covers(comment, first, a, b) for a, b in spans):
            return comment  # the quote is where the finding says
        # Anywhere else, the quote is real code: the finding moves onto the nearest place that holds it (the model's
        # line number was off; a quote found in several places is no less real).
        return _moved(comment, side, min(spans, key=lambda s: (_distance(s, first, comment.line), s)))
    return None


def _covers(comment: ModelComment, first: int, a: int, b: int) -> bool:
    """The quote at lines ``a``..``b`` is where the comment says: it touches the lines the comment names, or, for a
    committable fix, it lies within the lines the fix replaces or holds them all (a quote off by one line from the
    fix's range says the fix would replace the wrong lines)."""
    if comment.suggestion is not None:
        return (first <= a and b <= comment.line) or (a <= first and comment.line <= b)
    return a <= comment.line and first <= b


def _distance(span: tuple[int, int], first: int, last: int) -> int:
    a, b = span
    return 0 if a <= last and first <= b else min(abs(a - last), abs(b - first))


def _moved(comment: ModelComment, side: Side, span: tuple[int, int]) -> ModelComment:
    """The comment on the quote's last line. A committable fix keeps its range only when it is as long as the quote
    (it replaces the quoted lines); otherwise the numbers it was written for are unknown, and it is not offered."""
    a, b = span
    keep = (
        comment.suggestion is not None
        and side == "RIGHT"
        and comment.line - (comment.start_line or comment.line) == b - a
    )
    return replace(
        comment,
        side=side,
        line=b,
        start_line=(a if a < b else None) if keep else None,
        suggestion=comment.suggestion if keep else None,
    )


def find_quote(quote: str, lines: Sequence[str]) -> list[tuple[int, int]]:
    """The 1-based (first, last) line spans of ``lines`` where ``quote`` sits, whitespace-insensitively: its first line
    may be the end of a line and its last the start of one, a one-line quote any part of a line, and "..." lines skip
    code between its parts. A quote copied with the prompt's line numbers or diff markers is found too."""
    flat = [(n, " ".join(line.split())) for n, line in enumerate(lines, start=1)]
    flat = [(n, t) for n, t in flat if t]
    for segments in _readings(quote):
        spans = _spans(segments, flat)
        if spans:
            return spans
    return []


def _readings(quote: str) -> list[list[list[str]]]:
    """The quote as written, without the prompt's numbers and markers, and without a leading diff marker."""
    raw = quote.replace("&lt;", "<").replace("\r\n", "\n").split("\n")
    readings = [raw]
    body = [line for line in raw if line.strip()]
    if body and all(_NUMBERED.match(line) for line in body):
        readings.append([_NUMBERED.sub("", line, count=1) if line.strip() else line for line in raw])
    if body and all(line[:1] in "+- " for line in body):
        readings.append([line[1:] for line in raw])
    return [s for s in (_segments_of(r) for r in readings) if s]


def _segments(quote: str) -> list[list[str]]:
    return _segments_of(quote.replace("\r\n", "\n").split("\n"))


def _segments_of(lines: Sequence[str]) -> list[list[str]]:
    """Non-blank lines, normalised, in runs split by elision lines; [] when too little is quoted to prove anything."""
    segments: list[list[str]] = [[]]
    for line in lines:
        text = " ".join(line.split())
        if not text:
            continue
        if text in _ELISIONS:
            segments.append([])
        else:
            segments[-1].append(text)
    segments = [s for s in segments if s]
    if sum(len(t.replace(" ", "")) for s in segments for t in s) < MIN_QUOTE_CHARS:
        return []
    return segments


def _spans(segments: list[list[str]], flat: Sequence[tuple[int, str]]) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    for start in range(len(flat)):
        end = _match(segments[0], flat, start)
        if end is None:
            continue
        last = end
        for segment in segments[1:]:
            last = next(
                (
                    e
                    for p in range(last + 1, min(len(flat), last + 1 + SEGMENT_REACH))
                    if (e := _match(segment, flat, p)) is not None
                ),
                -1,
            )
            if last < 0:
                break
        if last >= 0:
            found.append((flat[start][0], flat[last][0]))
    return found


def _match(segment: Sequence[str], flat: Sequence[tuple[int, str]], at: int) -> int | None:
    """The index of the last non-blank line of ``flat`` the segment covers when it starts at ``at``, or None."""
    k = len(segment)
    if at + k > len(flat):
        return None
    if k == 1:
        return at if segment[0] in flat[at][1] else None
    if not flat[at][1].endswith(segment[0]) or not flat[at + k - 1][1].startswith(segment[-1]):
        return None
    if any(flat[at + j][1] != segment[j] for j in range(1, k - 1)):
        return None
    return at + k - 1
