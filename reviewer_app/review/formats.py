"""What `reviewer-app review --format` prints, built from the review's data (pure): ``text`` for a terminal (each finding
once, severity first and coloured where the terminal takes colour, path:line, the fix), ``json`` (the findings as
data), ``sarif`` (SARIF 2.1.0 as GitHub code scanning takes it), and the cost line that counts every kind of token,
the verification's too. ``markdown`` is the review as the App posts it, rendered by the publish stage itself.

Everything here came from a pull request or from the model: text for a terminal is stripped of control characters
(no escape sequence of theirs reaches the terminal), and nothing is ever executed or followed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from reviewer_app.core.precision import ranked
from reviewer_app.core.pricing import Price, cost
from reviewer_app.core.review_model import SEVERITIES, ModelComment
from reviewer_app.core.terminal import for_terminal

FORMATS = ("text", "markdown", "json", "sarif")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
TOOL_URI = "https://github.com/reviewer-app/reviewer-app"
# GitHub code scanning's levels: error, warning, note.
LEVELS = {"critical": "error", "warning": "warning", "suggestion": "note", "nit": "note"}
RULES = {
    "critical": "A defect that will break something: a crash, data loss, a security hole.",
    "warning": "A likely bug or a risk worth fixing before merging.",
    "suggestion": "A better way to write it; optional.",
    "nit": "A small matter of style or naming.",
}
COLOURS = {"critical": "31;1", "warning": "33;1", "suggestion": "36", "nit": "2"}  # SGR: red, yellow, cyan, dim
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


@dataclass(frozen=True)
class Report:
    """One review, whatever it reviewed: a pull request, or a checkout's commits."""

    subject: str  # "octo-org/widgets#7 at 1a2b3c4d5e6f", "3 commits on topic since the merge base with origin/main"
    head_sha: str
    summary: str
    findings: tuple[ModelComment, ...]  # after the evidence check and the verification, in no particular order
    not_reviewed: tuple[tuple[str, str], ...] = ()  # (path, why)
    withheld: int = 0  # findings held back (no evidence, refuted, unconfident, what the team said not to flag)
    usage: tuple[Mapping[str, Any], ...] = ()  # the store's usage rows: the review's and the verification's
    extra: Mapping[str, Any] = field(default_factory=dict)  # more for the JSON (where it was reviewed, the review)


def in_order(findings: Sequence[ModelComment]) -> list[ModelComment]:
    """Most severe and most confident first, as the App ranks what it posts."""
    return list(ranked(findings))


def terminal_safe(text: str) -> str:
    """``text`` with no escape sequence, no control character but newline and tab (core/terminal.py), and no HTML
    comment: safe to print on a terminal, piece by piece, between the colours ``as_text`` adds itself."""
    return for_terminal(_HTML_COMMENT.sub("", text))


# -- text ----------------------------------------------------------------------------------------------------------


def as_text(report: Report, *, colour: bool) -> str:
    """The review for a person at a terminal: a line on what was reviewed, the summary, each finding once."""

    def paint(severity: str, text: str) -> str:
        return f"\x1b[{COLOURS[severity]}m{text}\x1b[0m" if colour else text

    findings = in_order(report.findings)
    counts = [f"{n} {s}" for s in SEVERITIES if (n := sum(1 for c in findings if c.rank == s))]
    lines = [f"Review of {terminal_safe(report.subject)}: {', '.join(counts) if counts else 'no findings'}"]
    if report.summary.strip():
        lines += ["", terminal_safe(report.summary.strip())]
    for c in findings:
        where = f"{c.path}:{c.start_line}-{c.line}" if c.start_line and c.start_line < c.line else f"{c.path}:{c.line}"
        if c.side == "LEFT":
            where += " (a removed line; old file)"
        lines += ["", f"{paint(c.rank, c.rank.upper())}  {terminal_safe(where)}"]
        lines += [f"  {line}" if line else "" for line in terminal_safe(c.body.strip()).split("\n")]
        if c.suggestion is not None:
            lines.append("  Fix (replaces the line(s) above):")
            lines += [f"  | {line}" for line in terminal_safe(c.suggestion.rstrip("\n")).split("\n")]
    if report.not_reviewed:
        lines += ["", f"Not reviewed ({len(report.not_reviewed)}):"]
        lines += [f"  {terminal_safe(p)}: {terminal_safe(why)}" for p, why in report.not_reviewed]
    if report.withheld:
        lines += ["", f"{report.withheld} finding(s) held back (no evidence in the code, refuted or unconfident)."]
    return "\n".join(lines) + "\n"


def wants_colour(env: Mapping[str, str], *, tty: bool) -> bool:
    """Colour on a terminal that takes it, unless NO_COLOR is set (https://no-color.org)."""
    return tty and not env.get("NO_COLOR") and env.get("TERM", "") != "dumb"


# -- json ----------------------------------------------------------------------------------------------------------


def finding_data(c: ModelComment) -> dict[str, Any]:
    return {
        "path": c.path,
        "line": c.line,
        "start_line": c.start_line,
        "side": c.side,
        "severity": c.rank,
        "body": c.body,
        "suggestion": c.suggestion,
        "quote": c.quote,
        "failure": c.failure,
        "verdict": c.verdict,
        "confidence": c.confidence,
    }


def as_json(report: Report, prices: Mapping[str, Price]) -> dict[str, Any]:
    return {
        "subject": report.subject,
        "head_sha": report.head_sha,
        "summary": report.summary,
        "findings": [finding_data(c) for c in in_order(report.findings)],
        "not_reviewed": [{"path": p, "reason": r} for p, r in report.not_reviewed],
        "withheld": report.withheld,
        **report.extra,
        "usage": spend(report.usage, prices).as_json(),
    }


# -- sarif ---------------------------------------------------------------------------------------------------------


def as_sarif(report: Report, *, version: str, repository_uri: str | None = None) -> dict[str, Any]:
    """SARIF 2.1.0 as GitHub code scanning takes it: one rule per severity, one result per finding with its level,
    message and physical location (a path relative to the repository's root)."""
    rule_ids = [f"reviewer-app/{s}" for s in SEVERITIES]
    rules = [
        {
            "id": rule_ids[i],
            "name": f"{s.capitalize()}Finding",
            "shortDescription": {"text": f"reviewer-app: {s}"},
            "fullDescription": {"text": RULES[s]},
            "defaultConfiguration": {"level": LEVELS[s]},
            "properties": {"tags": ["code-review", s]},
        }
        for i, s in enumerate(SEVERITIES)
    ]
    results = []
    for c in in_order(report.findings):
        location: dict[str, Any] = {"artifactLocation": {"uri": quote(c.path, safe="/"), "uriBaseId": "%SRCROOT%"}}
        text = c.body.strip() or "(no text)"
        if c.side == "LEFT":  # a removed line is in no file at the head: the finding is on the file
            text += f"\n\n(About line {c.line} of the old file, a line this change removes.)"
        else:
            start = c.start_line if c.start_line and c.start_line < c.line else c.line
            location["region"] = {"startLine": max(start, 1), "endLine": max(c.line, 1)}
        result: dict[str, Any] = {
            "ruleId": rule_ids[SEVERITIES.index(c.rank)],
            "ruleIndex": SEVERITIES.index(c.rank),
            "level": LEVELS[c.rank],
            "message": {"text": text},
            "locations": [{"physicalLocation": location}],
        }
        if c.suggestion is not None:
            result["properties"] = {"suggestion": c.suggestion}
        results.append(result)
    run: dict[str, Any] = {
        "tool": {"driver": {"name": "reviewer-app", "version": version, "informationUri": TOOL_URI, "rules": rules}},
        "results": results,
        "originalUriBaseIds": {"%SRCROOT%": {"description": {"text": "The root of the repository reviewed."}}},
    }
    if repository_uri:
        run["versionControlProvenance"] = [{"repositoryUri": repository_uri, "revisionId": report.head_sha}]
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


# -- what it cost --------------------------------------------------------------------------------------------------

TOKEN_KINDS = ("input_tokens", "output_tokens", "cache_creation_tokens", "cache_read_tokens")


@dataclass(frozen=True)
class Spend:
    """The tokens of each kind of request (the review, the verification), and their price when every model is known."""

    by_kind: Mapping[str, Mapping[str, int]]
    dollars: float | None

    def total(self, token_kind: str) -> int:
        return sum(k.get(token_kind, 0) for k in self.by_kind.values())

    def as_json(self) -> dict[str, Any]:
        return {
            **{t: self.total(t) for t in TOKEN_KINDS},
            "by_kind": {k: dict(v) for k, v in self.by_kind.items()},
            "dollars": None if self.dollars is None else round(self.dollars, 4),
        }

    def line(self) -> str:
        """ "1,204 input, 219 output, 2,297 cache-write and 0 cache-read tokens (verification: ...), about $0.01"."""
        if not self.by_kind:
            return "no model tokens"

        def tokens(t: Mapping[str, int]) -> str:
            i, o, w, r = (t.get(k, 0) for k in TOKEN_KINDS)
            return f"{i:,} input, {o:,} output, {w:,} cache-write and {r:,} cache-read tokens"

        parts = [f"{tokens(v)} ({k})" for k, v in self.by_kind.items()]
        money = "" if self.dollars is None else f", about ${self.dollars:.2f}"
        return "; ".join(parts) + money


def spend(rows: Sequence[Mapping[str, Any]], prices: Mapping[str, Price]) -> Spend:
    """The store's usage rows (admin usage's: kind, model, batched, the four token counts) added up by kind, and
    priced (None when a model has no price)."""
    by_kind: dict[str, dict[str, int]] = {}
    dollars: float | None = 0.0
    for row in rows:
        kind = "verification" if row.get("kind") == "verification" else "review"
        totals = by_kind.setdefault(kind, dict.fromkeys(TOKEN_KINDS, 0))
        counts = {t: int(row.get(t) or 0) for t in TOKEN_KINDS}
        for t, n in counts.items():
            totals[t] += n
        priced = cost(prices, str(row.get("model") or ""), batched=bool(row.get("batched")), **counts).dollars
        dollars = None if priced is None or dollars is None else dollars + priced
    return Spend(by_kind, dollars if by_kind else None)
