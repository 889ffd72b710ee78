"""A repository's learnings: what its team taught the app, as records with a source and an undo (pure).

A learning is one sentence from a person with write access (a command, a disputing reply, a reaction, a thread they
resolved, or an operator's CLI), optionally bound to a path glob. Reviews use the relevant ones: they go into the
prompt as the team's rules (framed as data), and a finding a do-not-flag learning covers is withheld.

``repo`` is the repository's GitHub id in decimal, the identity the findings table keys on (``repo_id``): it
survives a rename, and the CLI and dashboard name the repository by the full name the jobs table records for it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from reviewer_app.core.globs import check_glob, path_matches

KINDS = ("do-not-flag", "prefer", "always-check")
DEFAULT_KIND = "do-not-flag"
SOURCE_KINDS = ("command", "reply", "reaction", "resolved", "cli")
MAX_TEXT = 300  # characters of one learning (a setting may lower it)
MIN_TEXT = 3
PENDING, ACTIVE = "pending", "active"  # a learning proposed from a reply waits on a writer's confirmation
STATUSES = (PENDING, ACTIVE)
# The share of a do-not-flag learning's distinctive words a finding must carry for the pure rule to call it covered;
# a learning the verifier names (it judged the meaning) needs half of them, never less than MIN_COVER_WORDS.
COVER_SHARE = 0.75
NAMED_SHARE = 0.5
MIN_COVER_WORDS = 2
NEVER_WITHHELD = frozenset({"critical"})  # severities no learning withholds

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")
_WORD = re.compile(r"[a-z0-9_]+")
# Words that say how to treat a finding, not what it is about: they never make a learning cover a finding.
_RULE_WORDS = frozenset(
    """a an the and or of in on at to for from by with without into is are be been being it its this that these
    those do does don dont not no never nor flag flagged flagging report reported reporting comment comments
    mention warn about here there we our us you your they them their should shouldn must always check prefer
    please any all every only when where which who what why how as if than then so such can cannot may might
    will would also just use using used code pr pull request""".split()
)


@dataclass(frozen=True)
class LearningDraft:
    """A learning before it is stored; ``created_at`` is timezone-aware UTC."""

    repo: str
    path_glob: str | None
    text: str
    kind: str
    source_kind: str
    source_url: str | None
    author: str
    created_at: datetime
    status: str = ACTIVE


@dataclass(frozen=True)
class Learning:
    """A stored learning: its id, the draft's fields, and how often reviews applied it (and when last)."""

    id: int
    repo: str
    path_glob: str | None
    text: str
    kind: str
    source_kind: str
    source_url: str | None
    author: str
    created_at: datetime
    times_applied: int = 0
    last_applied: datetime | None = None
    status: str = ACTIVE
    ack_comment_id: int | None = None  # the app's comment a writer's 👍 confirms a pending learning on

    @property
    def active(self) -> bool:
        return self.status == ACTIVE


class LearningLimitReached(Exception):
    """The repository holds as many learnings as its limit allows: forget one first."""


def make_draft(
    *,
    repo: str | int,
    text: str,
    kind: str = DEFAULT_KIND,
    path_glob: str | None = None,
    source_kind: str,
    source_url: str | None = None,
    author: str,
    created_at: datetime,
    max_text: int = MAX_TEXT,
    status: str = ACTIVE,
) -> LearningDraft:
    """A validated draft: one line of bounded length, a known kind and source, a sane glob. Raises ValueError with a
    one-line reason a person can act on."""
    repo_text = str(repo).strip()
    if not repo_text.isdigit() or int(repo_text) <= 0:
        raise ValueError("the repository is not named by its GitHub repository id")
    clean = " ".join(str(text).split()) if not _CONTROL.search(str(text).strip()) else None
    if clean is None:
        raise ValueError("a learning is one line: no line breaks or control characters")
    if len(clean) < MIN_TEXT:
        raise ValueError("a learning needs a sentence saying what to do")
    limit = min(max_text, MAX_TEXT)
    if len(clean) > limit:
        raise ValueError(f"a learning is at most {limit} characters (this one has {len(clean)})")
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
    if source_kind not in SOURCE_KINDS:
        raise ValueError(f"source {source_kind!r} is not one of {', '.join(SOURCE_KINDS)}")
    author = str(author).strip()
    if not author or _CONTROL.search(author) or len(author) > 100:
        raise ValueError("a learning needs its author's GitHub login")
    if source_url is not None and not re.match(r"^https?://[^\s]+$", source_url):
        raise ValueError("the source link is not an http(s) URL")
    if created_at.tzinfo is None:
        raise ValueError("created_at must be timezone-aware")
    if status not in STATUSES:
        raise ValueError(f"status {status!r} is not one of {', '.join(STATUSES)}")
    return LearningDraft(
        repo=str(int(repo_text)),
        path_glob=check_glob(path_glob),
        text=clean,
        kind=kind,
        source_kind=source_kind,
        source_url=source_url,
        author=author,
        created_at=created_at,
        status=status,
    )


def prompt_line(learning: Learning) -> str:
    """A learning as the prompt lists it (raw: the prompt escapes and frames it)."""
    where = f", files {learning.path_glob}" if learning.path_glob else ""
    return f"- [learning {learning.id}] ({learning.kind}{where}) {learning.text}"


def relevant(
    learnings: Iterable[Learning], paths: Sequence[str], token_bound: int, *, estimate: Callable[[str], int]
) -> list[Learning]:
    """The learnings a review of ``paths`` uses: those whose glob matches one of the paths (or that have none), the
    path-bound ones first, then the most recently applied, then the newest, as many as fit ``token_bound`` tokens
    of prompt lines (``estimate``: the prompt's own token estimate)."""

    def rank(learning: Learning) -> tuple[int, float, float, int]:
        applied = learning.last_applied.timestamp() if learning.last_applied else float("-inf")
        return (learning.path_glob is None, -applied, -learning.created_at.timestamp(), -learning.id)

    matching = [
        x for x in learnings if x.active and (x.path_glob is None or any(path_matches(x.path_glob, p) for p in paths))
    ]
    chosen, spent = [], 0
    for learning in sorted(matching, key=rank):
        cost = estimate(prompt_line(learning)) + 1
        if spent + cost <= token_bound:
            chosen.append(learning)
            spent += cost
    return chosen


def _stem(word: str) -> str:
    for end in ("ing", "ed", "es", "s"):
        if len(word) > len(end) + 3 and word.endswith(end):
            return word[: -len(end)]
    return word


def distinctive_words(text: str) -> set[str]:
    """What a text is about, for the pure cover rule: its words, lower-cased and stemmed, less the rule words."""
    return {_stem(w) for w in _WORD.findall(text.lower()) if w not in _RULE_WORDS and len(w) > 2}


_REASON_START = re.compile(r"[:;(]|\s[-–—]\s|\b(?:because|since|as we|as our|as the)\b", re.IGNORECASE)


def subject_of(text: str) -> str:
    """What a learning is about: its text up to where its reason starts (a colon, a semicolon, a dash, a parenthesis,
    "because", "since"): "Do not flag unclosed files: our scripts exit at once" is about unclosed files."""
    return _REASON_START.split(text, 1)[0]


def covers(
    learning: Learning, path: str, text: str, *, severity: str | None = None, share: float = COVER_SHARE
) -> bool:
    """Whether a do-not-flag ``learning`` covers a finding on ``path`` whose title is ``text``: it is active, the
    finding is not critical (``severity``), its glob matches the path, and the finding carries most of what the
    learning is about (at least two of the distinctive words of its subject, and ``share`` of them: COVER_SHARE for
    the pure rule, NAMED_SHARE for a learning the verifier names). Conservative by design: a finding it misses is
    published, never one of another subject withheld."""
    if learning.kind != "do-not-flag" or not learning.active or severity in NEVER_WITHHELD:
        return False
    if not path_matches(learning.path_glob, path):
        return False
    about = distinctive_words(subject_of(learning.text))
    if len(about) < MIN_COVER_WORDS:
        return False
    shared = about & distinctive_words(text)
    return len(shared) >= MIN_COVER_WORDS and len(shared) >= share * len(about)


def covering(learnings: Iterable[Learning], path: str, text: str, *, severity: str | None = None) -> Learning | None:
    """The first do-not-flag learning (lowest id) that covers the finding, or None."""
    return next((x for x in sorted(learnings, key=lambda x: x.id) if covers(x, path, text, severity=severity)), None)


def drawn_from(sentence: str, source: str) -> bool:
    """Whether a proposed learning says nothing its source does not: each of its distinctive words is one of the
    source's (a reply's own words), so a model's paraphrase of other comments is refused."""
    return bool(distinctive_words(sentence)) and distinctive_words(sentence) <= distinctive_words(source)


_GLOB_WORD = re.compile(r"`([^`\s]+)`|(?<![\w`])((?:[\w.@+=~-]*/)*[\w.@+=~-]*[*?{][^\s`,;:()]*)")


def glob_in(text: str) -> str | None:
    """The first path glob a person wrote in ``text`` (``src/legacy/**`` or `` `*.sql` ``), if it is a valid one."""
    for m in _GLOB_WORD.finditer(text):
        word = (m.group(1) or m.group(2) or "").rstrip(".")
        if not any(c in word for c in "*?{/"):
            continue
        try:
            return check_glob(word)
        except ValueError:
            continue
    return None


def withheld_by(learning: Learning, findings: Iterable[Any]) -> list[Any]:
    """The findings (with ``path``, ``title`` and ``severity``) ``learning`` would have withheld were it active: its
    preview, shown before it applies."""
    as_active = replace(learning, status=ACTIVE)
    return [f for f in findings if covers(as_active, f.path, f.title, severity=f.severity)]


PREVIEW_FINDINGS = 200  # the repository's most recent findings a preview reads
PREVIEW_SHOWN = 5  # of those a learning would have withheld, the ones its acknowledgement names


def preview_text(found: Sequence[Any], read: int) -> str:
    """What a learning would have withheld of the ``read`` most recent findings (``found``: each with ``path``,
    ``line``, ``pr_number`` and ``title``), as its acknowledgement says it (pure; the text is the app's own)."""
    if not found:
        return f"Preview: it would have withheld none of this repository's {read} most recent findings."
    lines = [f"Preview: it would have withheld {len(found)} of this repository's {read} most recent findings:"]
    for f in found[:PREVIEW_SHOWN]:
        title = " ".join(str(f.title).split())[:120].replace("`", "'")
        lines.append(f"- `{str(f.path).replace('`', '')}` line {f.line} (#{f.pr_number}): {title}")
    if len(found) > PREVIEW_SHOWN:
        lines.append(f"- and {len(found) - PREVIEW_SHOWN} more")
    return "\n".join(lines)


def finding_key(path: str, line_text: str, body_digest: str) -> str:
    """A finding's content key, for feedback counted across pull requests: its file, its commented line (normalised,
    as the findings memory keeps it: ``Finding.line_text``) and its text's digest (``Finding.body_digest``), so the
    same finding posted again on another pull request counts on the same key."""
    content = "\x00".join((path, " ".join(line_text.split()), body_digest))
    return hashlib.sha256(content.encode()).hexdigest()[:32]


def source_label(learning: Learning) -> str:
    """Where a learning came from, in a few words: ``/review learn by alice``."""
    how = {
        "command": "/review learn",
        "reply": "a reply",
        "reaction": "a reaction",
        "resolved": "a resolved thread",
        "cli": "the CLI",
    }.get(learning.source_kind, learning.source_kind)
    return f"{how} by {learning.author}"
