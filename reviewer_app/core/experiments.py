"""Experiments: two variants of a repository's review settings, each pull request assigned to one by a stable hash
(pure). The block is read from `.github/reviewer.yml` (`experiment:`) or the operator's REVIEWER_EXPERIMENT; which
settings a variant may set, and their values, are checked by the repository settings' own parser."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

VARIANTS = ("a", "b")
# The settings a variant may change: those that change what a review publishes, not where or whether it runs.
EXPERIMENT_KEYS = frozenset(
    {"min_confidence", "verify", "max_comments", "nits", "context", "repository_tools", "max_parts", "max_input_tokens"}
)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class Experiment:
    """A named comparison of two variants; ``a`` and ``b`` are the settings each one sets."""

    name: str
    a: Mapping[str, Any]
    b: Mapping[str, Any]

    def settings_of(self, variant: str) -> Mapping[str, Any]:
        return self.a if variant == "a" else self.b


def parse_experiment(value: object) -> tuple[Experiment | None, list[str]]:
    """The experiment a block describes, and what is wrong with it (an experiment with an error is not run: its
    variants would not be what the team meant to compare)."""
    if value is None:
        return None, []
    if not isinstance(value, Mapping):
        return None, ["experiment must be a mapping with name, a and b"]
    errors = [f"experiment: unknown key {k!r}" for k in value if k not in ("name", "a", "b")]
    name = value.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        errors.append("experiment name must be 1-64 letters, digits, dots, dashes or underscores")
    variants: dict[str, dict[str, Any]] = {}
    for variant in VARIANTS:
        settings = value.get(variant)
        if settings is None:
            settings = {}
        if not isinstance(settings, Mapping):
            errors.append(f"experiment variant {variant} must be a mapping of settings")
            continue
        unknown = sorted(str(k) for k in settings if k not in EXPERIMENT_KEYS)
        if unknown:
            allowed = ", ".join(sorted(EXPERIMENT_KEYS))
            errors.append(f"experiment variant {variant} may not set {', '.join(unknown)} (only {allowed})")
        variants[variant] = {str(k): v for k, v in settings.items()}
    if not errors and variants["a"] == variants["b"]:
        errors.append("experiment variants a and b set the same settings: nothing would be compared")
    if errors:
        return None, errors
    assert isinstance(name, str)
    return Experiment(name, variants["a"], variants["b"]), []


def assign(name: str, repo_id: int, pr_number: int) -> str:
    """The variant of pull request ``pr_number`` in ``name``: the same on every host and every review of it, and
    independent between experiments (a new name shuffles the pull requests afresh)."""
    digest = hashlib.sha256(f"{name}\0{repo_id}\0{pr_number}".encode()).digest()
    return VARIANTS[digest[0] & 1]


def operator_experiment(text: str) -> tuple[Experiment | None, list[str]]:
    """The operator's experiment (REVIEWER_EXPERIMENT: the same block as JSON), or None when the text is empty."""
    if not text.strip():
        return None, []
    try:
        value = json.loads(text)
    except ValueError:
        return None, ['REVIEWER_EXPERIMENT is not valid JSON: {"name": ..., "a": {...}, "b": {...}}']
    experiment, errors = parse_experiment(value)
    return experiment, [f"REVIEWER_EXPERIMENT: {e}" for e in errors]
