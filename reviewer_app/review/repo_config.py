"""Per-repository settings from `.github/reviewer.yml` on the base branch, validated within the operator's limits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from reviewer_app.core.experiments import Experiment, assign, parse_experiment
from reviewer_app.core.gate import CONFIG_PATH
from reviewer_app.core.passes import MAX_PASSES
from reviewer_app.core.precision import DEFAULT_MAX_COMMENTS, DEFAULT_MIN_CONFIDENCE
from reviewer_app.github.check_run_text import CONCLUSIONS, DEFAULT_CONCLUSIONS
from reviewer_app.review.selection import compile_ignore

MAX_INSTRUCTIONS_CHARS = 2000
MAX_PATH_INSTRUCTIONS = 30  # entries of the per-path list
MAX_MATCHING_INSTRUCTIONS_CHARS = 4000  # per-path text one review's prompt carries, the first matching entries first
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
        "codebase",
        "nits",
        "conclusions",
        "resolve_outdated",
        "dry_run",
        "verify",
        "min_confidence",
        "max_comments",
        "experiment",
        "passes",
        "passes_vote",
    }
)
MAX_COMMENTS_LIMIT = 50
NITS = ("fold", "off")
SEVERITY_NAMES = ("critical", "warning", "suggestion", "nit")


@dataclass(frozen=True)
class PathInstructions:
    """Review guidance for the files a gitignore-style pattern matches (``instructions`` as a list)."""

    path: str
    instructions: str


@dataclass(frozen=True)
class RepoConfig:
    auto: bool = True  # automatic reviews of pushes; `/review` works either way
    drafts: bool = False  # automatic reviews of draft pull requests too (otherwise they wait for ready_for_review)
    context: bool = True  # show the model the code around each change (read at the head commit)
    repository_tools: bool | None = None  # let the model read the repository before it submits; None: server default
    codebase: bool | None = None  # cross-file code from the repository at the head (codebase/); None: server default
    # Automatic reviews through Message Batches (half price, within 24 hours): true always, false never (not even the
    # sweep's), None: the server decides (core/batching.py).
    batch: bool | None = None
    ignore: tuple[str, ...] = ()
    instructions: str | None = None  # for every file
    path_instructions: tuple[PathInstructions, ...] = ()  # for the files each one's pattern matches
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
    # Independent review passes over the same context (files in different orders), their findings merged and verified
    # once (core/passes.py); each pass is paid for.
    passes: int = 1
    # With several passes, publish only what most of them found or the verifier is sure of (core/passes.outvoted);
    # off, every finding of every pass is kept (more found, and more that is not wanted).
    passes_vote: bool = False
    errors: tuple[str, ...] = field(default=())  # what was wrong with the file; defaults applied for those keys
    # The `experiment:` block (core/experiments.py), and the variant this pull request is in once assigned.
    experiment: Experiment | None = None
    variant: str | None = None


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
    cfg = _from_mapping(data, max_input_tokens=max_input_tokens, max_parts=max_parts)
    if "experiment" in data:
        experiment, errors = parse_experiment(data["experiment"])
        for variant in ("a", "b"):
            if experiment is not None:
                settings = experiment.settings_of(variant)
                wrong = _from_mapping(settings, max_input_tokens=max_input_tokens, max_parts=max_parts).errors
                errors += [f"experiment variant {variant}: {e}" for e in wrong]
        if errors:
            return replace(cfg, errors=(*cfg.errors, *errors, "the experiment is not run"))
        cfg = replace(cfg, experiment=experiment)
    return cfg


def with_variant(
    cfg: RepoConfig,
    experiment: Experiment | None,
    repo_id: int,
    pr_number: int,
    *,
    max_input_tokens: int,
    max_parts: int,
) -> RepoConfig:
    """``cfg`` with the settings of the variant ``experiment`` assigns this pull request (the repository's own
    experiment, else the operator's); ``cfg`` itself when there is none. A variant whose settings are not valid (the
    operator's block is checked here, against the operator's limits) is not applied, and says why."""
    if experiment is None:
        return cfg
    variant = assign(experiment.name, repo_id, pr_number)
    settings = experiment.settings_of(variant)
    parsed = _from_mapping(settings, max_input_tokens=max_input_tokens, max_parts=max_parts)
    if parsed.errors:
        wrong = [f"experiment {experiment.name} variant {variant}: {e}; not applied" for e in parsed.errors]
        return replace(cfg, errors=(*cfg.errors, *wrong))
    return replace(cfg, **{key: getattr(parsed, key) for key in settings}, experiment=experiment, variant=variant)


def _from_mapping(data: Mapping[str, Any], *, max_input_tokens: int, max_parts: int) -> RepoConfig:
    """The settings of a mapping (the file's, or one experiment variant's), errors included."""
    cfg = RepoConfig()
    errors: list[str] = [f"unknown setting {key!r} ignored" for key in data if key not in KNOWN_KEYS]
    value: Any
    bools = (
        "auto",
        "drafts",
        "context",
        "repository_tools",
        "codebase",
        "resolve_outdated",
        "batch",
        "dry_run",
        "verify",
        "passes_vote",
    )
    for key in bools:
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
        cfg = _instructions(cfg, data["instructions"], errors)
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
    for key, low, high in (
        ("min_confidence", 0, 100),
        ("max_comments", 1, MAX_COMMENTS_LIMIT),
        ("passes", 1, MAX_PASSES),
    ):
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


def _cut_instructions(text: str, what: str, errors: list[str]) -> str:
    if len(text) > MAX_INSTRUCTIONS_CHARS:
        errors.append(f"{what} longer than {MAX_INSTRUCTIONS_CHARS} characters were cut")
    return text[:MAX_INSTRUCTIONS_CHARS]


def _instructions(cfg: RepoConfig, value: Any, errors: list[str]) -> RepoConfig:
    """``instructions``: one text for every file, or a list of texts (every file) and ``{path, instructions}``
    entries (the files a gitignore-style ``path`` matches). An invalid entry is reported and left out."""
    if isinstance(value, str):
        return replace(cfg, instructions=_cut_instructions(value, "instructions", errors))
    if not isinstance(value, list):
        errors.append("instructions must be text, or a list of {path: pattern, instructions: text} entries")
        return cfg
    if len(value) > MAX_PATH_INSTRUCTIONS:
        errors.append(f"instructions has more than {MAX_PATH_INSTRUCTIONS} entries; the rest were ignored")
    general: list[str] = []
    by_path: list[PathInstructions] = []
    for index, entry in enumerate(value[:MAX_PATH_INSTRUCTIONS], start=1):
        what = f"instructions entry {index}"
        if isinstance(entry, str):
            general.append(_cut_instructions(entry, what, errors))
            continue
        if (
            not isinstance(entry, dict)
            or set(entry) != {"path", "instructions"}
            or not isinstance(entry["path"], str)
            or not entry["path"].strip()
            or not isinstance(entry["instructions"], str)
        ):
            errors.append(f"{what} must be text or {{path: pattern, instructions: text}}; ignored")
            continue
        try:
            compile_ignore([entry["path"]])
        except ValueError:
            errors.append(f"{what}: path {entry['path']!r} is not a gitignore-style pattern; ignored")
            continue
        by_path.append(PathInstructions(entry["path"], _cut_instructions(entry["instructions"], what, errors)))
    text = "\n\n".join(t for t in general if t.strip())
    return replace(cfg, instructions=text[:MAX_INSTRUCTIONS_CHARS] or None, path_instructions=tuple(by_path))


def matching_instructions(cfg: RepoConfig, paths: Sequence[str]) -> tuple[PathInstructions, ...]:
    """The per-path instructions whose pattern matches one of ``paths`` (the pull request's changed files), in the
    file's order, as many as fit ``MAX_MATCHING_INSTRUCTIONS_CHARS`` of text (pure)."""
    chosen: list[PathInstructions] = []
    spent = 0
    for entry in cfg.path_instructions:
        text = entry.instructions.strip()
        spec = compile_ignore([entry.path])
        if not text or not any(spec.match_file(p) for p in paths):
            continue
        if spent + len(text) > MAX_MATCHING_INSTRUCTIONS_CHARS:
            continue  # a shorter entry further down may still fit
        chosen.append(entry)
        spent += len(text)
    return tuple(chosen)
