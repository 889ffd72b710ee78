"""Hidden markers in our published reviews and replies, and making untrusted text safe to publish beside them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_KEYWORD = "reviewer-app:review"
_REPLY_KEYWORD = "reviewer-app:reply"
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1, or SHA-256 repositories
_MARKER = re.compile(
    r"<!--\s*reviewer-app:review\s+job=(?P<job>\d+)\s+sha=(?P<sha>[0-9a-f]{64}|[0-9a-f]{40})\s*-->",
    re.IGNORECASE,
)
_KEYWORD_RE = re.compile(re.escape(_KEYWORD), re.IGNORECASE)


@dataclass(frozen=True)
class Marker:
    """What a marker says: which job published the review, for which head commit."""

    job_id: int
    head_sha: str


def make_marker(job_id: int, head_sha: str) -> str:
    """The marker for one job's review; raises ValueError on a malformed job id or sha."""
    sha = head_sha.lower()
    if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id < 1:
        raise ValueError(f"job id must be a positive integer, got {job_id!r}")
    if not _SHA.fullmatch(sha):
        raise ValueError(f"head sha must be 40 (or 64) hex digits, got {head_sha!r}")
    return f"<!-- {_KEYWORD} job={job_id} sha={sha} -->"


def parse_markers(text: str | None) -> list[Marker]:
    """Every marker in ``text``, in order of appearance."""
    if not text:
        return []
    return [Marker(int(m["job"]), m["sha"].lower()) for m in _MARKER.finditer(text)]


def reviewed_by_bot(reviews: Iterable[Mapping[str, Any]], *, bot_login: str, head_sha: str) -> bool:
    """Whether the app's own bot already reviewed ``head_sha``: a marker naming it, or a review pinned to it.

    Reviews by anyone else never count (anyone can paste a marker)."""
    login, head = bot_login.casefold(), head_sha.lower()
    for review in reviews:
        user = review.get("user") or {}
        author = user.get("login") if isinstance(user, Mapping) else None
        if not isinstance(author, str) or author.casefold() != login:
            continue
        if str(review.get("commit_id") or "").lower() == head:
            return True
        if any(marker.head_sha == head for marker in parse_markers(review.get("body"))):
            return True
    return False


def find_published_review(
    reviews: Iterable[Mapping[str, Any]], *, bot_login: str, job_id: int, head_sha: str
) -> Mapping[str, Any] | None:
    """The first review by ``bot_login`` whose body carries this job's marker, or None.

    Only the app's own reviews count: anyone can paste a marker into a review of their own, and trusting
    it would let them suppress our review.
    """
    wanted = Marker(job_id, head_sha.lower())
    login = bot_login.casefold()
    for review in reviews:
        user = review.get("user") or {}
        author = user.get("login") if isinstance(user, Mapping) else None
        if not isinstance(author, str) or author.casefold() != login:
            continue
        if wanted in parse_markers(review.get("body")):
            return review
    return None


def review_naming_head(reviews: Iterable[Mapping[str, Any]], *, login: str, head_sha: str) -> Mapping[str, Any] | None:
    """The first review by ``login`` whose marker names ``head_sha``, whichever job wrote it, or None. Only a marker
    counts here (`reviewer-app review --post` acts as a person, whose own review of the same commit is no review of
    the app's), and only by ``login`` (anyone can paste a marker)."""
    head, who = head_sha.lower(), login.casefold()
    for review in reviews:
        user = review.get("user") or {}
        author = user.get("login") if isinstance(user, Mapping) else None
        if isinstance(author, str) and author.casefold() == who:
            if any(marker.head_sha == head for marker in parse_markers(review.get("body"))):
                return review
    return None


def make_reply_marker(effect_id: int, created_at: float) -> str:
    """The marker that ends a reply the outbox posts: its outbox row's id and creation time (in milliseconds).

    The id alone could name two effects: SQLite hands out ``MAX(id) + 1``, so a row id comes back once the cleaner
    has pruned the newest rows."""
    return f"<!-- {_REPLY_KEYWORD} effect={effect_id} created={round(created_at * 1000)} -->"


def make_answer_marker(comment_id: int) -> str:
    """The marker that ends a reply to one comment (help): the comment it answers. A copy of that comment's webhook
    sent again under a new delivery id makes a new outbox row, whose reply finds this one and is not posted."""
    return f"<!-- {_REPLY_KEYWORD} answers={comment_id} -->"


_ANSWER_MARKER = re.compile(rf"<!-- {re.escape(_REPLY_KEYWORD)} answers=[0-9]+ -->\Z")


def answer_marker_of(content: str) -> str | None:
    """The answer marker that ends ``content`` (see make_answer_marker), or None."""
    found = _ANSWER_MARKER.search(content)
    return found.group(0) if found else None


def find_posted_reply(
    comments: Iterable[Mapping[str, Any]], *, bot_login: str, marker: str
) -> Mapping[str, Any] | None:
    """The first comment by ``bot_login`` whose body ends with ``marker``, or None.

    Only the app's own comments count, and only a marker at the very end, where the outbox puts it: a reply may
    quote what someone typed (an unknown command), and a marker in that quote must not count."""
    login = bot_login.casefold()
    for comment in comments:
        user = comment.get("user") or {}
        author = user.get("login") if isinstance(user, Mapping) else None
        if not isinstance(author, str) or author.casefold() != login:
            continue
        if str(comment.get("body") or "").rstrip().endswith(marker):
            return comment
    return None


def strip_markers(text: str) -> str:
    """``text`` with every marker, and the marker keyword itself, removed.

    Untrusted text (model output, PR titles, file names) ends up inside our own review; if it could carry
    a marker, a contributor could make a later job believe its review was already published.
    Removing the keyword until none is left also defeats markers nested to reassemble after one pass.
    """
    previous = None
    while previous != text:
        previous = text
        text = _MARKER.sub("", text)
        text = _KEYWORD_RE.sub("", text)
    return text


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ZWSP = "\u200b"
# Every "@", whatever comes before or after it, and every HTML entity that spells one (&#64;, &#x40;, &commat;, any
# case, leading zeros, with or without the ";"): GitHub finds mentions in the rendered text, after emphasis and
# entities are gone, so "_@octocat_", "**@org/team**", "a*@x*" and "&#64;octocat" all ping. An "@" already
# followed by our zero-width space is left alone, so neutralising twice changes nothing.
_AT = re.compile(r"@(?!\u200b)|&(?:#0*64(?![0-9])|#x0*40(?![0-9a-f])|commat);?", re.IGNORECASE)
_HTML_BLOCK_START = re.compile(r"^( {0,3})<")
_FENCE_OPEN = re.compile(r"^(?:(`{3,})[^`]*|(~{3,}).*)$")
_TRUNCATED = "\n\n…(truncated)"


def safe_for_github(text: str, max_chars: int) -> str:
    """Untrusted text made safe to publish on GitHub (a review, a check run): no markers, no pings, no HTML, at
    most ``max_chars`` long. (Untrusted text in the model's prompt is escaped by review/prompt.escape_frame_tags.)

    Every "@" (and every entity spelling one) becomes "@" and a zero-width space, so GitHub resolves no mention
    whatever surrounds it; e-mail addresses too, since GitHub tells them from mentions only after rendering, where
    we cannot follow. Fenced code blocks that open in column 0 are left alone (mentions never ping there, and
    suggestion blocks must stay valid code); everything else is prose. Line-leading "<" and every "<!--" are escaped, so the text can neither hide
    what follows it nor open an HTML block that would make our fence detection disagree with GitHub's.
    A fence left open (by the text itself or by truncation) is closed, so it cannot swallow what we add.
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be positive, got {max_chars}")
    # CommonMark ends lines at \r too; splitting only at \n would let us misplace fences.
    text = _CONTROL.sub("", strip_markers(text.replace("\r\n", "\n").replace("\r", "\n")))
    lines, fence = _safe_lines(text.split("\n"))
    out = "\n".join(lines)
    if len(out) + len(_closing(fence)) <= max_chars:
        return out + _closing(fence)
    if max_chars <= len(_TRUNCATED):
        return out[:max_chars]
    cut = max_chars - len(_TRUNCATED)
    while cut > 0:
        head = out[:cut].rstrip()
        closing = _closing(_open_fence(head.split("\n")))
        if len(head) + len(closing) + len(_TRUNCATED) <= max_chars:
            return head + closing + _TRUNCATED
        cut -= len(closing)
    return _TRUNCATED.strip()


def fenced_lines(lines: list[str]) -> tuple[list[bool], str | None]:
    """For each line, whether it belongs to a fenced code block (its opening and closing lines included), and the
    fence still open after the last line (None when closed). The one fence reading of everything we publish."""
    flags: list[bool] = []
    fence: str | None = None
    for line in lines:
        if fence is not None:
            flags.append(True)
            if _closes(line, fence):
                fence = None
            continue
        opened = _FENCE_OPEN.match(line)
        if opened:
            fence = opened.group(1) or opened.group(2)
        flags.append(opened is not None)
    return flags, fence


def _safe_lines(lines: list[str]) -> tuple[list[str], str | None]:
    """Each line neutralised, and the fence still open at the end (None when closed)."""
    flags, fence = fenced_lines(lines)
    out = [
        line if fenced else _AT.sub("@" + _ZWSP, _HTML_BLOCK_START.sub(r"\1&lt;", line).replace("<!--", "&lt;!--"))
        for line, fenced in zip(lines, flags, strict=True)
    ]
    return out, fence


def _open_fence(lines: list[str]) -> str | None:
    return fenced_lines(lines)[1]


def _closes(line: str, fence: str) -> bool:
    """Whether ``line`` closes ``fence``; deliberately at least as lenient as CommonMark."""
    stripped = line.rstrip(" \t\r")
    body = stripped.lstrip(" ")
    return len(stripped) - len(body) <= 3 and len(body) >= len(fence) and set(body) == {fence[0]}


def _closing(fence: str | None) -> str:
    return "" if fence is None else "\n" + fence
