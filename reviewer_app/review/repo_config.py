"""Per-repository settings from `.github/reviewer.yml` on the base branch, validated within the operator's limits."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from reviewer_app.core.gate import CONFIG_PATH
from reviewer_app.core.precision import DEFAULT_MAX_COMMENTS, DEFAULT_MIN_CONFIDENCE
from reviewer_app.github.check_run_text import CONCLUSIONS, DEFAULT_CONCLUSIONS
from reviewer_app.review.selection import compile_ignore

MAX_INSTRUCTIONS_CHARS = 2000
MAX_IGNORE_PATTERNS = 200
KNOWN_KEYS = frozenset(
    {
        "auto",
        "batch",
        "drafts",
        "ignore",
        "instructions",
        "language",
        "max_input_tokens",
        "max_parts",
        "context",
        "repository_tools",
        "nits",
        "conclusions",
        "resolve_outdated",
        "dry_run",
        "verify",
        "min_confidence",
        "max_comments",
    }
)
MAX_COMMENTS_LIMIT = 50
NITS = ("fold", "off")
SEVERITY_NAMES = ("critical", "warning", "suggestion", "nit")


@dataclass(frozen=True)
class RepoConfig:
    auto: bool = True  # automatic reviews of pushes; `/review` works either way
    drafts: bool = False  # automatic reviews of draft pull requests too (otherwise they wait for ready_for_review)
    context: bool = True  # show the model the code around each change (read at the head commit)
    repository_tools: bool | None = None  # let the model read the repository before it submits; None: server default
    # Automatic reviews through Message Batches (half price, within 24 hours): true always, false never (not even the
    # sweep's), None: the server decides (core/batching.py).
    batch: bool | None = None
    ignore: tuple[str, ...] = ()
    instructions: str | None = None
    language: str | None = None
    max_input_tokens: int | None = None  # at most the operator's REVIEWER_MAX_INPUT_TOKENS
    max_parts: int | None = None  # at most the operator's REVIEWER_MAX_PARTS
    nits: str = "off"  # "fold": the model may report nits, listed folded in the review body; "off": none shown
    # The check run's conclusion per severity found (the strongest wins; severities not named give success).
    conclusions: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_CONCLUSIONS))
    resolve_outdated: bool = True  # resolve the app's own review threads whose code changed in a later push
    dry_run: bool = False  # review, but post nothing: what would have been posted is kept on the job (dry_run.py)
    # The verification pass (a second model call that confirms or refutes each finding); None: the server's default.
    verify: bool | None = None
    min_confidence: int = DEFAULT_MIN_CONFIDENCE  # findings the verifier gives less are not published (0-100)
    max_comments: int = DEFAULT_MAX_COMMENTS  # critical and warning findings shown; the rest are listed folded
    errors: tuple[str, ...] = field(default=())  # what was wrong with the file; defaults applied for those keys


def parse_repo_config(text: str | None, *, max_input_tokens: int, max_parts: int) -> RepoConfig:
    """Parse the file's text (None: no file). Invalid parts are reported in ``errors`` and fall back to defaults."""
    if text is None or not text.strip():
        return RepoConfig()
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        return RepoConfig(errors=(f"{CONFIG_PATH} is not valid YAML{where}; defaults apply",))
    if data is None:
        return RepoConfig()
    if not isinstance(data, dict):
        return RepoConfig(errors=(f"{CONFIG_PATH} must be a mapping of settings; defaults apply",))
    cfg = RepoConfig()
    errors: list[str] = [f"unknown setting {key!r} ignored" for key in data if key not in KNOWN_KEYS]
    value: Any
    for key in ("auto", "drafts", "context", "repository_tools", "resolve_outdated", "batch", "dry_run", "verify"):
        if key in data:
            if isinstance(data[key], bool):
                cfg = replace(cfg, **{key: data[key]})
            else:
                errors.append(f"{key} must be true or false")
    if "ignore" in data:
        value = data["ignore"]
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
            errors.append("ignore must be a list of gitignore-style patterns")
        elif len(value) > MAX_IGNORE_PATTERNS:
            errors.append(f"ignore has more than {MAX_IGNORE_PATTERNS} patterns")
        else:
            try:
                compile_ignore(value)
                cfg = replace(cfg, ignore=tuple(value))
            except ValueError as exc:
                errors.append(str(exc))
    if "instructions" in data:
        value = data["instructions"]
        if not isinstance(value, str):
            errors.append("instructions must be text")
        else:
            if len(value) > MAX_INSTRUCTIONS_CHARS:
                errors.append(f"instructions longer than {MAX_INSTRUCTIONS_CHARS} characters were cut")
            cfg = replace(cfg, instructions=value[:MAX_INSTRUCTIONS_CHARS])
    if "language" in data:
        value = data["language"]
        if isinstance(value, str) and 0 < len(value) <= 40:
            cfg = replace(cfg, language=value)
        else:
            errors.append("language must be a language name such as German")
    for key, ceiling in (("max_input_tokens", max_input_tokens), ("max_parts", max_parts)):
        if key in data:
            value = data[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                errors.append(f"{key} must be a positive whole number")
            elif value > ceiling:
                errors.append(f"{key} {value} is above the operator's limit {ceiling}; the limit applies")
                cfg = replace(cfg, **{key: ceiling})
            else:
                cfg = replace(cfg, **{key: value})
    for key, low, high in (("min_confidence", 0, 100), ("max_comments", 1, MAX_COMMENTS_LIMIT)):
        if key in data:
            value = data[key]
            if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
                cfg = replace(cfg, **{key: value})
            else:
                errors.append(f"{key} must be a whole number from {low} to {high}")
    if "nits" in data:
        if data["nits"] in NITS:
            cfg = replace(cfg, nits=data["nits"])
        else:
            errors.append("nits must be fold or off")
    if "conclusions" in data:
        value = data["conclusions"]
        if (
            isinstance(value, dict)
            and all(k in SEVERITY_NAMES for k in value)
            and all(v in CONCLUSIONS for v in value.values())
        ):
            cfg = replace(cfg, conclusions={str(k): str(v) for k, v in value.items()})
        else:
            errors.append("conclusions must map critical, warning, suggestion or nit to success, neutral or failure")
    return replace(cfg, errors=tuple(errors))
