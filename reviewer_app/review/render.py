"""Pure builders for the review we post: its body, its inline comments, its index of findings (the check run's
texts are in github/check_run_text.py)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote

from reviewer_app.core.learnings import Learning
from reviewer_app.core.markdown import inline_text, publishable
from reviewer_app.core.markers import safe_for_github, strip_markers
from reviewer_app.core.passes import VOTE_CONFIDENCE
from reviewer_app.core.precision import (
    INVENTED,
    LOW_CONFIDENCE,
    OUTVOTED,
    PAST_CAP,
    REFUTED,
    TEAM_LEARNING,
    Withheld,
    withheld_counts,
)
from reviewer_app.core.review_model import SEVERITIES, InlineComment, ModelComment, ReviewCounts, plural

MAX_BODY_CHARS = 60_000  # GitHub refuses review bodies over 65,536 characters
MAX_SUMMARY_CHARS = 20_000
MAX_MOVED_COMMENT_CHARS = 4_000
MAX_REASON_CHARS = 1_000
MAX_HEADLINE_CHARS = 120
MAX_FALLBACK_CHARS = 4_000
TOP_FINDINGS = 5
MAX_WITHHELD_ENTRIES = 20  # findings withheld listed one by one in the check run
_BACKTICKS = re.compile(r"`+")
_LINK = re.compile(r"https?://[A-Za-z0-9.:-]+/[A-Za-z0-9._~/#%?=&+-]*")  # a source link that cannot leave its ( )
LABELS = {"critical": "🔴 Critical", "warning": "🟠 Warning", "suggestion": "🔵 Suggestion", "nit": "⚪ Nit"}


@dataclass(frozen=True)
class Links:
    """Where a finding points: its line in the pull request's diff, or its line at the head commit."""

    pr_url: str  # https://github.com/{owner}/{repo}/pull/{number} (or the GHES equivalent)
    head_sha: str

    def diff_line(self, path: str, line: int, side: str) -> str:
        digest = hashlib.sha256(path.encode()).hexdigest()
        return f"{self.pr_url}/files#diff-{digest}{'L' if side == 'LEFT' else 'R'}{line}"

    def permalink(self, path: str, line: int) -> str:
        repo_url = self.pr_url.rsplit("/pull/", 1)[0]
        return f"{repo_url}/blob/{self.head_sha}/{quote(path)}#L{line}"

    def of(self, comment: ModelComment | InlineComment, *, inline: bool) -> str:
        """Inline findings link into the diff; the rest to the new file's line (the diff for old-side lines)."""
        if inline or comment.side == "LEFT":
            return self.diff_line(comment.path, comment.line, comment.side)
        return self.permalink(comment.path, comment.line)


@dataclass(frozen=True)
class Finding:
    """One finding for an index (the body's list, the check run's top findings): already rendered, with its rank."""

    severity: str
    entry: str


def inline_comment(comment: InlineComment) -> dict[str, object]:
    """The review comment GitHub gets: severity first, the text, then the fix (a suggestion block, or plain text
    when it could not be one). A multi-line range is sent only with a suggestion, as start_line/line on RIGHT."""
    body = f"**{LABELS[comment.severity]}**\n\n{comment.body}"
    if comment.suggestion is not None:
        body += "\n\n" + _block("suggestion", comment.suggestion)
    elif comment.fallback is not None:
        body += "\n\n" + _fallback(comment.fallback)
    out: dict[str, object] = {"path": comment.path, "line": comment.line, "side": comment.side, "body": body}
    if comment.start_line is not None:
        out.update(start_line=comment.start_line, start_side="RIGHT")
    return out


def render_review_body(
    *,
    summary: str,
    inline: Sequence[InlineComment],
    moved_comments: Sequence[ModelComment],
    folded: Sequence[ModelComment],
    not_covered: Iterable[tuple[str, str]],
    incremental_note: str | None,
    marker: str,
    counts: ReviewCounts,
    links: Links,
    max_chars: int = MAX_BODY_CHARS,
    earlier: Sequence[str] = (),
    learnings: Sequence[str] = (),
) -> str:
    """The review body: note, the one summary, findings by severity with links, comments outside the diff (with
    permalinks), earlier findings still open (``earlier``: entries from ``earlier_finding_entry``), one folded list of
    the findings not shown as comments (``folded``: suggestion-level ones, nits, those past the cap), folded files not
    reviewed (grouped by reason), the team learnings the review applied, folded (``learnings``: entries from
    ``learning_entry``), counts, marker last.

    Everything except ``marker`` is treated as untrusted. Sections that do not fit in ``max_chars`` keep their
    first entries and a line saying how many were left out; empty sections are not shown.
    """
    head: list[str] = []
    if incremental_note:
        head.append(f"_{safe_for_github(incremental_note, 500)}_")
    summary_chars = min(MAX_SUMMARY_CHARS, max_chars // 3)
    head.append(publishable(summary.strip(), summary_chars) if summary.strip() else "_No summary._")
    foot = [f"<sub>{counts.line()}</sub>", marker]
    room = max_chars - len("\n\n".join(head + foot)) - 2

    findings = [f.entry for f in top_findings(inline, moved_comments, links, limit=None)]
    moved = [_moved_entry(c, links) for c in moved_comments]
    only_nits = all(c.rank == "nit" for c in folded)
    listed = [_index_entry(c, links.of(c, inline=False), with_label=not only_nits) for c in folded]
    fold_title = plural(len(folded), "nit" if only_nits else "more finding") + ", folded"
    groups = group_by_reason(not_covered)
    skipped = [line for reason, paths in groups for line in _group_lines(reason, paths)]
    sections: list[str] = []
    parts = [
        ("### Findings", findings, "\n", "finding", None),
        ("### Outside the diff", moved, "\n\n", "comment", None),
        (f"### Still open from earlier reviews: {len(earlier)}", list(earlier), "\n", "finding", None),
        ("", listed, "\n", "nit" if only_nits else "finding", fold_title),
        ("", skipped, "\n", "line", not_reviewed_line(groups)),
        ("", list(learnings), "\n", "learning", f"{plural(len(learnings), 'team learning')} applied"),
    ]
    wanted = [p for p in parts if p[1]]
    for index, (title, entries, joiner, noun, fold) in enumerate(wanted):
        share = room // (len(wanted) - index)
        section = _fit(title, entries, joiner, share - (len(fold) + 45 if fold else 0), noun)
        if fold:
            section = f"<details>\n<summary>{fold}</summary>\n\n{section.lstrip()}\n\n</details>"
        sections.append(section)
        room -= len(section) + 2
    return "\n\n".join(head + sections + foot)


def top_findings(
    inline: Sequence[InlineComment], moved: Sequence[ModelComment], links: Links, limit: int | None = TOP_FINDINGS
) -> list[Finding]:
    """Findings (no nits: those are folded) most severe first, in the model's order within a severity."""
    found = [Finding(c.severity, _index_entry(c, links.of(c, inline=True))) for c in inline if c.severity != "nit"]
    found += [Finding(c.rank, _index_entry(c, links.of(c, inline=False))) for c in moved if c.rank != "nit"]
    found.sort(key=lambda f: SEVERITIES.index(f.severity))
    return found if limit is None else found[:limit]


def withheld_lines(
    withheld: Sequence[Withheld],
    past_cap: int,
    links: Links,
    *,
    min_confidence: int,
    max_comments: int,
    limit: int = MAX_WITHHELD_ENTRIES,
    learnings: Mapping[int, Learning] | None = None,
) -> list[str]:
    """The check run's folded account of the findings held back: how many for each reason, then each one withheld
    (its place, its headline and the verifier's reason, or the team learning that withheld it, linked to where it was
    taught), at most ``limit``."""
    labels = {
        INVENTED: "quoted code that is not in the file (invented)",
        TEAM_LEARNING: "withheld by team learnings",
        REFUTED: "refuted by the verification pass",
        LOW_CONFIDENCE: f"below the confidence threshold ({min_confidence} of 100)",
        OUTVOTED: f"found by fewer than half of the review passes (and verified under {VOTE_CONFIDENCE})",
        PAST_CAP: f"past the cap of {max_comments} comments (listed folded in the review)",
    }
    lines = [f"- {n} {labels[reason]}" for reason, n in withheld_counts(withheld, past_cap)]
    if withheld:
        lines.append("")
    for w in withheld[:limit]:
        c = w.comment
        why = w.reason if c.confidence is None else f"{w.reason}, confidence {c.confidence}"
        if w.learning is not None:
            why = learning_ref(w.learning, (learnings or {}).get(w.learning))
        elif c.verdict_reason:
            why += f": {inline_text(c.verdict_reason, MAX_HEADLINE_CHARS)}"
        where = f"line {c.line}" + (" (old)" if c.side == "LEFT" else "")
        url = links.of(c, inline=False)
        lines.append(f"- {LABELS[c.rank]} · [{_code(c.path)} {where}]({url}): {_headline(c.body)} _({why})_")
    if len(withheld) > limit:
        lines.append(f"- _…and {len(withheld) - limit} more_")
    return lines


def learning_ref(learning_id: int, learning: Learning | None) -> str:
    """A learning named in a review or a check run: its id, linked to where it was taught when that is known."""
    if learning is None:
        return f"team learning {learning_id} (forgotten since)"
    if learning.source_url and _LINK.fullmatch(learning.source_url):
        return f"[team learning {learning_id}]({learning.source_url})"
    return f"team learning {learning_id}"


def learning_entry(learning_id: int, learning: Learning | None) -> str:
    """One learning a review applied, for its folded footer: its reference, kind, glob and sentence."""
    if learning is None:
        return f"- {learning_ref(learning_id, None)}"
    where = f" · {_code(learning.path_glob)}" if learning.path_glob else ""
    text = inline_text(learning.text, 2 * MAX_HEADLINE_CHARS)
    return f"- {learning_ref(learning_id, learning)} ({learning.kind}{where}): {text}"


def earlier_finding_entry(severity: str, path: str, line: int, title: str, url: str) -> str:
    """One earlier finding that is still open (its code did not change), linked to where it was raised."""
    label = LABELS.get(severity, LABELS["warning"])
    return f"- {label} · [{_code(path)} line {line}]({url}): {inline_text(title, MAX_HEADLINE_CHARS) or '(see the comment)'}"


def not_reviewed_line(groups: Sequence[tuple[str, Sequence[str]]]) -> str:
    """ "Not reviewed: 25 files (23 deleted, 1 lock file, 1 generated)"; empty when nothing was left out."""
    total = sum(len(paths) for _, paths in groups)
    if not total:
        return ""
    reasons = ", ".join(f"{len(paths)} {inline_text(reason, 60)}" for reason, paths in groups)
    return f"Not reviewed: {plural(total, 'file')} ({reasons})"


def _index_entry(comment: ModelComment | InlineComment, url: str, *, with_label: bool = True) -> str:
    severity = comment.severity if isinstance(comment, InlineComment) else comment.rank
    label = f"{LABELS[severity]} · " if with_label else ""
    where = f"line {comment.line}" + (" (old)" if comment.side == "LEFT" else "")
    return f"- {label}[{_code(comment.path)} {where}]({url}): {_headline(comment.body)}"


def _headline(body: str) -> str:
    """The first line of prose of a comment, as one short line."""
    for line in body.strip().splitlines():
        text = line.strip().lstrip("#>*- ").strip()
        if text and not text.startswith(("```", "~~~")):
            return inline_text(text, MAX_HEADLINE_CHARS)
    return "(see the comment)"


def _moved_entry(comment: ModelComment, links: Links) -> str:
    where = f"line {comment.line}" + (" of the old version" if comment.side == "LEFT" else "")
    url = links.of(comment, inline=False)
    text = publishable(comment.body.strip(), MAX_MOVED_COMMENT_CHARS)
    if comment.suggestion is not None:
        text += "\n\n" + _fallback(comment.suggestion)
    return f"**{LABELS[comment.rank]} · [{_code(comment.path)}, {where}]({url})**\n\n{text}"


def _fallback(replacement: str) -> str:
    """A proposed fix that cannot be a suggestion block, as plain code (cut when long; no markers)."""
    text = strip_markers(replacement.replace("\r\n", "\n").removesuffix("\n"))
    if len(text) > MAX_FALLBACK_CHARS:
        text = text[:MAX_FALLBACK_CHARS].rsplit("\n", 1)[0] + "\n…(cut)"
    return "Suggested replacement:\n\n" + _block("", text)


def _block(info: str, text: str) -> str:
    """A fenced block of ``text`` whose fence no line of it can close."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}" if text else f"{fence}{info}\n{fence}"


def group_by_reason(not_covered: Iterable[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """Files not reviewed grouped by reason, largest group first (ties: first seen first)."""
    groups: dict[str, list[str]] = {}
    for path, reason in not_covered:
        groups.setdefault(reason, []).append(path)
    return sorted(groups.items(), key=lambda item: -len(item[1]))


def _group_lines(reason: str, paths: Sequence[str]) -> list[str]:
    """A group's lines: its reason and count, then one line per file (a blank line ends the list)."""
    return [f"\n**{inline_text(reason, MAX_REASON_CHARS)}** ({len(paths)})\n", *(f"- {_code(p)}" for p in paths)]


def _fit(title: str, entries: list[str], joiner: str, room: int, noun: str) -> str:
    """``title`` and as many ``entries`` as fit in ``room``, then a line counting those left out."""
    kept: list[str] = []
    size = len(title) + 2
    reserve = 80  # for the "...and N more" line
    for index, entry in enumerate(entries):
        last = index == len(entries) - 1
        if size + len(joiner) + len(entry) > room - (0 if last else reserve):
            left = len(entries) - index
            if noun == "line":  # files not reviewed: count the files, not the group headings
                left, noun = sum(1 for e in entries[index:] if e.startswith("- ")), "file"
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
