"""Plain data shared by the review pipeline: what the model answered and what gets published."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Side = Literal["RIGHT", "LEFT"]

# Most severe first. A finding without a known severity counts as a warning.
SEVERITIES: tuple[str, ...] = ("critical", "warning", "suggestion", "nit")
DEFAULT_SEVERITY = "warning"


def severity_of(value: str | None) -> str:
    """``value`` as one of SEVERITIES (case-insensitive); anything else is a warning."""
    value = (value or "").strip().lower()
    return value if value in SEVERITIES else DEFAULT_SEVERITY


@dataclass(frozen=True)
class ModelComment:
    """One comment as the model proposed it; not yet checked against the diff."""

    path: str
    line: int
    body: str
    side: Side = "RIGHT"
    severity: str | None = None
    # A committable fix: the new text of new-side lines start_line..line (start_line None: just ``line``).
    suggestion: str | None = None
    start_line: int | None = None
    # The evidence (core/evidence.py): the exact code the finding is about, as the model quoted it, and the failure it
    # predicts. None in answers stored before the model was asked for them (such a finding is published unchecked).
    quote: str | None = None
    failure: str | None = None
    # The verification pass's word on it (core/precision.py): confirmed, refuted or uncertain, a confidence 0-100 and
    # one line of reason; None when it was not verified.
    verdict: str | None = None
    confidence: int | None = None
    verdict_reason: str | None = None
    # In a review of several passes (core/passes.py): how many of them found it; None in a review of one pass.
    votes: int | None = None

    @property
    def rank(self) -> str:
        return severity_of(self.severity)


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
    """A comment anchored on a commentable diff line; render.inline_comment makes it a review comment for GitHub.

    ``body`` is already safe to publish. ``suggestion`` is set only when it passed validation (the whole range
    ``start_line``..``line`` is commentable on the RIGHT side in one hunk, and the text differs); ``fallback`` holds
    a proposed replacement that did not, to be shown as plain text."""

    path: str
    line: int
    body: str
    side: Side = "RIGHT"
    severity: str = DEFAULT_SEVERITY
    start_line: int | None = None
    suggestion: str | None = None
    fallback: str | None = None


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


@dataclass(frozen=True)
class ReviewCounts:
    """What a review covered, for the body's footer and the check run; findings counted by severity."""

    files_reviewed: int
    inline: int
    moved: int
    not_covered: int
    critical: int = 0
    warning: int = 0
    suggestion: int = 0
    nit: int = 0
    folded: int = 0  # of the findings, those listed folded in the body (suggestion-level, nits, past the cap)

    @property
    def findings(self) -> int:
        return self.critical + self.warning + self.suggestion + self.nit

    def by_severity(self) -> dict[str, int]:
        return {s: getattr(self, s) for s in SEVERITIES}

    def severities(self) -> str:
        """ "2 criticals, 1 nit": the severities found, most severe first."""
        return ", ".join(plural(n, s) for s, n in self.by_severity().items() if n)

    def line(self) -> str:
        """The one line that counts what a review covered (the review's footer, the check run's last line)."""
        parts = [f"{plural(self.files_reviewed, 'file')} reviewed"]
        if self.findings:
            parts.append(f"{plural(self.findings, 'finding')} ({self.severities()})")
        if self.inline:
            parts.append(f"{plural(self.inline, 'inline comment')}")
        if self.moved:
            parts.append(f"{plural(self.moved, 'comment')} outside the diff")
        if self.folded:
            parts.append(f"{self.folded} folded")
        if self.not_covered:
            parts.append(f"{plural(self.not_covered, 'file')} not reviewed")
        return " · ".join(parts)
