"""Decide, for each comment the model proposed, whether it can sit on a diff line or must move to the body."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from reviewer_app.core.diff import FileDiff
from reviewer_app.core.markers import neutralise
from reviewer_app.core.review_model import InlineComment, ModelComment

DEFAULT_MAX_INLINE = 50
DEFAULT_MAX_BODY_CHARS = 4000
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

    A comment goes inline only when it names a RIGHT-side line that is commentable in its file's diff
    (GitHub rejects the whole review with 422 if one comment misses the diff). LEFT-side comments, comments
    outside the diff, and those past ``max_inline`` move to the body, so nothing the model said is lost.
    Exact repeats (same place, same text up to whitespace) are dropped, and so are blank comments.
    Inline bodies are neutralised here; moved ones are neutralised when the body is rendered.
    """
    seen: set[tuple[str, int, str, str]] = set()
    inline: list[InlineComment] = []
    moved: list[ModelComment] = []
    for comment in comments:
        text = " ".join(comment.body.split())
        comment = replace(comment, path=_resolve_path(comment.path, diffs))
        key = (comment.path, comment.line, comment.side, text)
        if not text or key in seen:
            continue
        seen.add(key)
        if len(inline) < max_inline and _is_anchorable(comment, diffs):
            body = neutralise(comment.body.strip(), max_body_chars)
            inline.append(InlineComment(comment.path, comment.line, body, "RIGHT"))
        else:
            moved.append(comment)
    return AnchorResult(tuple(inline), tuple(moved))


def _is_anchorable(comment: ModelComment, diffs: Mapping[str, FileDiff]) -> bool:
    diff = diffs.get(comment.path)
    return comment.side == "RIGHT" and diff is not None and comment.line in diff.commentable_lines("RIGHT")


def _resolve_path(path: str, diffs: Mapping[str, FileDiff]) -> str:
    """The diff's own spelling of ``path`` when the model added a "./", "/", "a/" or "b/" prefix."""
    if path in diffs:
        return path
    for prefix in _PATH_PREFIXES:
        if path.startswith(prefix) and path[len(prefix) :] in diffs:
            return path[len(prefix) :]
    return path
