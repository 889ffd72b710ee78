"""`reviewer-app config`: every setting as this process reads it, secrets masked, and what is wrong or missing
marked. It prints what it can when the configuration is incomplete or wrong, which is when it is needed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from reviewer_app.redaction import redact_url
from reviewer_app.settings.config import (
    Config,
    ConfigError,
    missing_for_reviews,
    parse_setting,
    problems,
    unknown_settings,
    with_private_key,
)
from reviewer_app.settings.table import SETTINGS


@dataclass(frozen=True)
class ConfigReport:
    values: dict[str, str]  # every setting's variable -> its value as shown (secrets masked)
    marks: dict[str, str]  # variable -> what is wrong with it or missing ("invalid: ...", "missing: ...")
    problems: list[str]  # what stops `serve` from starting beyond one value, each one line

    @property
    def broken(self) -> bool:
        """Whether `serve` would refuse to start with this configuration."""
        return bool(self.problems) or any(mark.startswith("invalid") for mark in self.marks.values())

    def lines(self) -> list[str]:
        return [
            f"{env}={value}" + (f"  # {self.marks[env]}" if env in self.marks else "")
            for env, value in self.values.items()
        ]


def inspect_config(env: Mapping[str, str]) -> ConfigReport:
    """Read ``env`` setting by setting, keeping what is valid and marking the rest; never raises ConfigError."""
    parsed: dict[str, object] = {}
    marks: dict[str, str] = {}
    shown_raw: dict[str, str] = {}
    for s in SETTINGS:
        raw = env.get(s.env, "")
        if raw == "":
            continue
        try:
            parsed[s.attr] = parse_setting(s, raw)
        except ConfigError as exc:
            marks[s.env] = f"invalid: {exc}"
            shown_raw[s.env] = "***" if s.secret else redact_url(raw)
    known = {f.name for f in fields(Config)}
    cfg = Config(**{k: v for k, v in parsed.items() if k in known})
    found = unknown_settings(env) + problems(cfg, require_webhook_secret=not cfg.needs_setup)
    try:
        with_private_key(cfg)
    except ConfigError as exc:
        found.append(str(exc))
    if cfg.needs_setup:
        marks.setdefault("GITHUB_APP_ID", "not set: `reviewer-app serve` starts the setup page to register an App")
    elif not cfg.webhook_secret and not cfg.insecure_no_signature:
        marks.setdefault("GITHUB_WEBHOOK_SECRET", "missing: `serve` does not start without it once an App is set")
    for missing in missing_for_reviews(cfg):
        marks.setdefault(missing.env, "missing: no review runs until it is set")
    values = {env_name: shown_raw.get(env_name, shown) for env_name, shown in cfg.masked().items()}
    return ConfigReport(values=values, marks=marks, problems=found)
