"""A pull request's memory of its findings: where a finding's code is now, and which new comments repeat one (pure)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

NEIGHBOURHOOD = 2  # lines kept above and below the commented line
MAX_TITLE_CHARS = 200
SIMILAR_TITLES = 0.5  # word-set overlap (Jaccard) from which two titles on the same code name the same finding
_WORD = re.compile(r"[a-z0-9_]+")


def normalise(line: str) -> str:
    """A line as findings compare it: runs of whitespace as one space, no leading or trailing whitespace."""
    return " ".join(line.split())


@dataclass(frozen=True)
class Snippet:
    """The commented line's content and the lines around it, normalised: what a finding sits on, wherever it is."""

    line: str
    before: tuple[str, ...]
    after: tuple[str, ...]


def snippet_at(lines: Sequence[str], line: int, *, around: int = NEIGHBOURHOOD) -> Snippet | None:
    """The snippet of 1-based ``line`` of a file given as its lines; None when the file has no such line."""
    if not 1 <= line <= len(lines):
        return None
    at = line - 1
    return Snippet(
        normalise(lines[at]),
        tuple(normalise(x) for x in lines[max(0, at - around) : at]),
        tuple(normalise(x) for x in lines[at + 1 : at + 1 + around]),
    )


class FileLines:
    """A file's lines normalised once, indexed by content, to locate many snippets in it."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.flat = [normalise(x) for x in lines]
        self.at: dict[str, list[int]] = {}
        for index, text in enumerate(self.flat):
            self.at.setdefault(text, []).append(index)

    def locate(self, snippet: Snippet, *, near: int = 1) -> int | None:
        """The 1-based line where ``snippet`` sits now (the same line with the same neighbourhood), the one closest
        to ``near`` when it sits in several places; None when its code changed or went away."""
        flat = self.flat
        found = [
            at + 1
            for at in self.at.get(snippet.line, ())
            if at >= len(snippet.before)
            and tuple(flat[at - len(snippet.before) : at]) == snippet.before
            and tuple(flat[at + 1 : at + 1 + len(snippet.after)]) == snippet.after
        ]
        return min(found, key=lambda n: (abs(n - near), n)) if found else None


def locate(snippet: Snippet, lines: Sequence[str], *, near: int = 1) -> int | None:
    """``FileLines(lines).locate(snippet, near=near)``: where ``snippet`` sits in ``lines`` now, or None."""
    return FileLines(lines).locate(snippet, near=near)


def title_of(body: str) -> str:
    """A finding's title: the first line of prose of its comment (raw: rendered where it is shown), cut short."""
    for line in body.strip().splitlines():
        text = line.strip().lstrip("#>*- ").rstrip("* ").strip()
        if text and not text.startswith(("```", "~~~")):
            return " ".join(text.split())[:MAX_TITLE_CHARS]
    return ""


def body_digest(body: str) -> str:
    """The digest of a comment's text up to whitespace and case."""
    return hashlib.sha256(" ".join(body.lower().split()).encode()).hexdigest()[:32]


def similar(title_a: str, digest_a: str, title_b: str, digest_b: str) -> bool:
    """Two findings on the same code say the same thing: the same text, or titles that share most of their words."""
    if digest_a == digest_b:
        return True
    a, b = set(_WORD.findall(title_a.lower())), set(_WORD.findall(title_b.lower()))
    return bool(a and b) and len(a & b) / len(a | b) >= SIMILAR_TITLES


@dataclass(frozen=True)
class Earlier:
    """A finding an earlier review posted and that is still open, as the filter compares it."""

    path: str
    snippet: Snippet
    title: str
    digest: str


@dataclass(frozen=True)
class Candidate:
    """A comment the model proposes now: its file, the snippet of its line at the head (None: not a line of the head,
    e.g. a removed line), and its text."""

    path: str
    snippet: Snippet | None
    body: str


def repeats(candidates: Sequence[Candidate], earlier: Sequence[Earlier]) -> list[int]:
    """Indexes of the ``candidates`` that repeat an ``earlier`` finding: same file, same line content and
    neighbourhood (so moved code still matches), and a similar text."""
    out: list[int] = []
    for index, candidate in enumerate(candidates):
        if candidate.snippet is None:
            continue
        title, digest = title_of(candidate.body), body_digest(candidate.body)
        if any(
            e.path == candidate.path and e.snippet == candidate.snippet and similar(e.title, e.digest, title, digest)
            for e in earlier
        ):
            out.append(index)
    return out
