"""Several independent review passes over one pull request (pure): the order each pass reads the files in, and the
union of their findings, with findings that name the same place and the same problem merged into one."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from reviewer_app.core.review_model import SEVERITIES, ModelComment

MAX_PASSES = 5  # `passes:` in .github/reviewer.yml is at most this
NEAR_LINES = 3  # two findings this close (or overlapping) are at the same place
# With the vote on, a finding fewer than half the passes found is published only when its verifier is this sure of it.
VOTE_CONFIDENCE = 80
SAME_PROBLEM = 0.3  # the share of their significant words two findings' claims must have in common

_WORD = re.compile(r"[a-z_][a-z0-9_]{2,}")
_STOP = frozenset(
    "the and for that this with from are was were but not can may will when which into than then its it's has have "
    "been being there their they them does should could would also only any all each some one two here where what "
    "whose because before after while other".split()
)


def pass_order(paths: Sequence[str], review_pass: int) -> list[str]:
    """The order pass ``review_pass`` (1-based) reads ``paths`` in: the first as given, the second reversed, the later
    ones in an order of their own (stable: the same pass of the same files always reads them the same way, so its
    requests keep their names across attempts and batches)."""
    if review_pass <= 1:
        return list(paths)
    if review_pass == 2:
        return list(reversed(paths))
    return sorted(paths, key=lambda p: hashlib.sha256(f"{review_pass}\0{p}".encode()).hexdigest())


@dataclass(frozen=True)
class Merged:
    """The union of several passes' findings: each distinct finding once, with the number of passes that found it."""

    comments: tuple[ModelComment, ...]
    groups: tuple[tuple[ModelComment, ...], ...]  # by index of ``comments``: the findings merged into it, one a pass
    found: int  # findings before merging

    @property
    def votes(self) -> tuple[int, ...]:
        """By index of ``comments``: how many passes found it (a pass joins a merged finding at most once)."""
        return tuple(len(g) for g in self.groups)


def merge_passes(passes: Sequence[Sequence[ModelComment]]) -> Merged:
    """One finding per place and problem. A finding of a later pass joins the first earlier one at the same place
    (same file and side, lines overlapping or within NEAR_LINES) about the same problem (the same quoted code, or
    claims sharing SAME_PROBLEM of their words) that no finding of its own pass joined already; findings of one pass
    are never merged with each other. A merged finding keeps the first wording found and the highest severity any pass
    gave it; the first pass's findings come first, then each later pass's new ones."""
    groups: list[list[ModelComment]] = []
    passes_of: list[set[int]] = []
    for index, comments in enumerate(passes):
        for comment in comments:
            for group, seen in zip(groups, passes_of, strict=True):
                if index not in seen and same_finding(group[0], comment):
                    group.append(comment)
                    seen.add(index)
                    break
            else:
                groups.append([comment])
                passes_of.append({index})
    merged = tuple(_strongest(group) for group in groups)
    return Merged(merged, tuple(tuple(g) for g in groups), sum(len(c) for c in passes))


def outvoted(comments: Sequence[ModelComment], passes: int) -> tuple[list[ModelComment], list[ModelComment]]:
    """The vote between ``passes`` passes: (kept, outvoted). A finding is kept when more than half the passes found it
    (``votes``), or when its verifier confirmed it at VOTE_CONFIDENCE or more; a finding of a single-pass review (no
    votes) is always kept. What one pass alone noticed is more often a reader's distraction than what several agree on
    (bench/quality_votes.py estimates both)."""
    kept: list[ModelComment] = []
    out: list[ModelComment] = []
    for c in comments:
        agreed = c.votes is None or passes < 2 or 2 * c.votes > passes
        sure = c.verdict == "confirmed" and (c.confidence or 0) >= VOTE_CONFIDENCE
        (kept if agreed or sure else out).append(c)
    return kept, out


def same_finding(a: ModelComment, b: ModelComment) -> bool:
    """Whether ``a`` and ``b`` name the same place and the same problem."""
    if a.path != b.path or a.side != b.side:
        return False
    a_first, b_first = a.start_line or a.line, b.start_line or b.line
    if a_first - NEAR_LINES > b.line or b_first - NEAR_LINES > a.line:
        return False
    quote_a, quote_b = _code(a.quote), _code(b.quote)
    if quote_a and quote_a == quote_b:
        return True
    words_a, words_b = _words(a.body), _words(b.body)
    if not words_a or not words_b:
        return False
    return len(words_a & words_b) / len(words_a | words_b) >= SAME_PROBLEM


def _strongest(group: Sequence[ModelComment]) -> ModelComment:
    first = group[0]
    rank = min((SEVERITIES.index(c.rank) for c in group), default=SEVERITIES.index(first.rank))
    return first if SEVERITIES.index(first.rank) == rank else replace(first, severity=SEVERITIES[rank])


def _code(quote: str | None) -> str:
    return " ".join((quote or "").split())


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def pass_line(passes: Sequence[tuple[int, int, int]], merged: int) -> str:
    """What several passes (each: input tokens, output tokens, findings) cost and found, for the check run: "3 review
    passes (input/output tokens 12,000/800, 11,950/760, 12,100/910): 14 findings, 9 after merging"."""
    each = ", ".join(f"{i:,}/{o:,}" for i, o, _ in passes)
    found = sum(n for _, _, n in passes)
    return f"{len(passes)} review passes (input/output tokens {each}): {found} findings, {merged} after merging"
