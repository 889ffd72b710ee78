"""Pure builders for what we post: the review body and the check run's title and summary."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from reviewer_app.core.markers import neutralise, strip_markers
from reviewer_app.core.review_model import ModelComment

__all__ = [
    "ReviewCounts", "check_cancelled", "check_failed", "check_reviewed", "check_superseded", "neutralise",
    "render_review_body",
]

MAX_BODY_CHARS = 60_000  # GitHub refuses review bodies over 65,536 characters
MAX_SUMMARY_CHARS = 20_000
MAX_MOVED_COMMENT_CHARS = 4_000
MAX_REASON_CHARS = 1_000
_BACKTICKS = re.compile(r"`+")
_SHA = re.compile(r"[0-9a-fA-F]{7,64}")


@dataclass(frozen=True)
class ReviewCounts:
    """What a review covered, for the body's footer and the check run."""

    files_reviewed: int
    inline: int
    moved: int
    not_covered: int


def render_review_body(
    *,
    summary: str,
    moved_comments: Sequence[ModelComment],
    not_covered: Iterable[tuple[str, str]],
    incremental_note: str | None,
    marker: str,
    counts: ReviewCounts,
    max_chars: int = MAX_BODY_CHARS,
) -> str:
    """The review body: note, summary, comments outside the diff, files not reviewed, counts, marker last.

    Everything except ``marker`` is treated as untrusted. If the lists do not fit in ``max_chars``, the
    tail of each is replaced by a line saying how many entries were left out.
    """
    head: list[str] = []
    if incremental_note:
        head.append(f"_{neutralise(incremental_note, 500)}_")
    summary_chars = min(MAX_SUMMARY_CHARS, max_chars // 3)
    head.append(neutralise(summary.strip(), summary_chars) if summary.strip() else "_No summary._")
    foot = [f"<sub>{_counts_line(counts)}</sub>", marker]
    room = max_chars - len("\n\n".join(head + foot)) - 2

    moved = [_moved_entry(c) for c in moved_comments]
    skipped = [f"- {_code(path)}: {neutralise(reason, MAX_REASON_CHARS)}" for path, reason in not_covered]
    sections: list[str] = []
    for title, entries, joiner, noun in (
        ("### Comments outside the diff", moved, "\n\n", "comment"),
        ("### Not reviewed", skipped, "\n", "file"),
    ):
        if entries:
            section = _fit(title, entries, joiner, room // 2 if moved and skipped else room, noun)
            sections.append(section)
            room -= len(section) + 2
    return "\n\n".join(head + sections + foot)


def _moved_entry(comment: ModelComment) -> str:
    where = f"line {comment.line}" + (" of the old version" if comment.side == "LEFT" else "")
    return f"**{_code(comment.path)}, {where}**\n\n{neutralise(comment.body.strip(), MAX_MOVED_COMMENT_CHARS)}"


def _fit(title: str, entries: list[str], joiner: str, room: int, noun: str) -> str:
    """``title`` and as many ``entries`` as fit in ``room``, then a line counting those left out."""
    kept: list[str] = []
    size = len(title) + 2
    reserve = 80  # for the "...and N more" line
    for index, entry in enumerate(entries):
        last = index == len(entries) - 1
        if size + len(joiner) + len(entry) > room - (0 if last else reserve):
            left = len(entries) - index
            more = noun if left == 1 else f"{noun}s"
            kept.append(f"_…and {left} more {more}, left out to keep this review short._")
            break
        kept.append(entry)
        size += len(joiner) + len(entry)
    return title + "\n\n" + joiner.join(kept)


def _code(text: str) -> str:
    """``text`` as an inline code span that its own backticks cannot close (so mentions cannot ping)."""
    text = " ".join(strip_markers(text).split())
    fence = "`" * (1 + max((len(run) for run in _BACKTICKS.findall(text)), default=0))
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _counts_line(counts: ReviewCounts) -> str:
    return " · ".join([
        f"{_plural(counts.files_reviewed, 'file')} reviewed",
        f"{_plural(counts.inline, 'inline comment')}",
        f"{_plural(counts.moved, 'comment')} outside the diff",
        f"{_plural(counts.not_covered, 'file')} not reviewed",
    ])




def check_reviewed(counts: ReviewCounts, *, head_sha: str) -> tuple[str, str]:
    """Title and summary of a completed check run after the review was published (or found published)."""
    if counts.files_reviewed == 0:
        title = "No files to review"
    else:
        title = f"Reviewed {_plural(counts.files_reviewed, 'file')}: {_plural(counts.inline, 'comment')}"
    summary = f"Reviewed commit {head_sha}.\n\n{_counts_line(counts)}."
    if counts.not_covered:
        summary += "\n\nThe review lists each file that was not reviewed, with the reason."
    return title, summary


def check_superseded(new_sha: str | None) -> tuple[str, str]:
    """Title and summary when a newer head made this review pointless; ``new_sha`` may be unknown (None)."""
    if new_sha is None or not _SHA.fullmatch(new_sha):
        return "Superseded by a newer commit", "A newer commit was pushed before this review finished."
    return (
        f"Superseded by {new_sha[:7]}",
        f"A newer commit, {new_sha}, was pushed before this review finished. That commit is reviewed instead.",
    )


def check_cancelled(reason: str = "the pull request was closed") -> tuple[str, str]:
    """Title and summary when the review was cancelled (PR closed, app uninstalled, operator)."""
    return "Review cancelled", f"No review was posted: {neutralise(reason.rstrip('. '), MAX_REASON_CHARS)}."


def check_failed(attempts: int, reason: str, *, retry_hint: str | None = None) -> tuple[str, str]:
    """Title and summary when the review gave up; ``reason`` must already be free of secrets."""
    summary = f"The review failed after {_plural(attempts, 'attempt')}: {neutralise(reason, MAX_REASON_CHARS)}"
    if retry_hint:
        summary += f"\n\n{retry_hint}"
    return f"Review failed after {_plural(attempts, 'attempt')}", summary

