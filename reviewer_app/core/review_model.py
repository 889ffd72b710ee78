"""Plain data shared by the review pipeline: what the model answered and what gets published."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Side = Literal["RIGHT", "LEFT"]


@dataclass(frozen=True)
class ModelComment:
    """One comment as the model proposed it; not yet checked against the diff."""

    path: str
    line: int
    body: str
    side: Side = "RIGHT"
    severity: str | None = None


@dataclass(frozen=True)
class ModelAnswer:
    """The model's structured answer (the input of its tool call), plus what it cost."""

    summary: str
    comments: tuple[ModelComment, ...] = ()
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


@dataclass(frozen=True)
class InlineComment:
    """A comment anchored on a commentable diff line, ready for POST .../pulls/{n}/reviews."""

    path: str
    line: int
    body: str
    side: Side = "RIGHT"

    def to_github(self) -> dict[str, object]:
        return {"path": self.path, "line": self.line, "side": self.side, "body": self.body}


@dataclass(frozen=True)
class ReviewDraft:
    """A review ready to publish: body (with marker) and inline comments."""

    body: str
    comments: tuple[InlineComment, ...] = field(default_factory=tuple)
