"""Decide, for each comment the model proposed, whether it can sit on a diff line or must move to the body."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from reviewer_app.core.diff import FileDiff
from reviewer_app.core.markdown import publishable
from reviewer_app.core.review_model import InlineComment, ModelComment

DEFAULT_MAX_INLINE = 50
DEFAULT_MAX_BODY_CHARS = 4000
MAX_SUGGESTION_CHARS = 10_000  # a longer "small fix" is shown (cut) as text, never posted as a suggestion
_PATH_PREFIXES = ("./", "/", "a/", "b/")


@dataclass(frozen=True)
class AnchorResult:
    """Comments GitHub will accept inline, and the rest, in the model's order, for the review body."""

    inline: tuple[InlineComment, ...]
    moved: tuple[ModelComment, ...]


def anchor(
    comments: Sequence[ModelComment],
    diffs: Mapping[str, FileDiff],
    *,
    max_inline: int = DEFAULT_MAX_INLINE,
    max_body_chars: int = DEFAULT_MAX_BODY_CHARS,
) -> AnchorResult:
    """Split ``comments`` into inline ones and moved ones.

    A comment goes inline only when it names a line that is commentable on its side of its file's diff: a new-side
    line of a hunk (RIGHT), or a removed or context line by its old number (LEFT). GitHub rejects the whole review
    with 422 if one comment misses the diff. Comments outside the diff, and those past ``max_inline``, move to the
    body, so nothing the model said is lost. Exact repeats (same place, same text up to whitespace) are dropped, and
    so are blank comments. Inline bodies are made publishable here; moved ones when the body is rendered.

    A proposed replacement becomes a committable suggestion only when GitHub would apply it as the model meant:
    RIGHT side, the whole range ``start_line``..``line`` in one hunk, and text that differs from those lines.
    Otherwise it is kept as ``fallback``, to be shown as plain text.
    """
    seen: set[tuple[str, int, str, str]] = set()
    inline: list[InlineComment] = []
    moved: list[ModelComment] = []
    for comment in comments:
        text = " ".join(comment.body.split())
        comment = replace(comment, path=resolve_path(comment.path, diffs))
        key = (comment.path, comment.line, comment.side, text)
        if not text or key in seen:
            continue
        seen.add(key)
        if len(inline) < max_inline and _is_anchorable(comment, diffs):
            body = publishable(comment.body.strip(), max_body_chars)
            suggestion = None if comment.suggestion is None else _suggestion(comment, diffs[comment.path])
            start = comment.start_line if suggestion is not None and (comment.start_line or 0) < comment.line else None
            fallback = comment.suggestion if suggestion is None else None
            inline.append(
                InlineComment(comment.path, comment.line, body, comment.side, comment.rank, start, suggestion, fallback)
            )
        else:
            moved.append(comment)
    return AnchorResult(tuple(inline), tuple(moved))


def _is_anchorable(comment: ModelComment, diffs: Mapping[str, FileDiff]) -> bool:
    diff = diffs.get(comment.path)
    return diff is not None and comment.line in diff.commentable_lines(comment.side)


def _suggestion(comment: ModelComment, diff: FileDiff) -> str | None:
    """The replacement as a suggestion block's content, or None when GitHub would not apply it as proposed."""
    text = (comment.suggestion or "").replace("\r\n", "\n").removesuffix("\n")
    start = comment.start_line or comment.line
    if comment.side != "RIGHT" or start > comment.line or len(text) > MAX_SUGGESTION_CHARS:
        return None
    for hunk in diff.hunks:
        new = {ln.new_line: ln.text for ln in hunk.lines if ln.kind != "removed" and ln.new_line is not None}
        if comment.line in new:
            wanted = range(start, comment.line + 1)
            if not all(n in new for n in wanted) or "\n".join(new[n] for n in wanted) == text:
                return None
            return text
    return None


def resolve_path(path: str, diffs: Mapping[str, object]) -> str:
    """The diff's own spelling of ``path`` when the model added a "./", "/", "a/" or "b/" prefix."""
    if path in diffs:
        return path
    for prefix in _PATH_PREFIXES:
        if path.startswith(prefix) and path[len(prefix) :] in diffs:
            return path[len(prefix) :]
    return path
