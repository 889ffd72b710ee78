"""One setting of reviewer-app: its environment variable, type, default, limits and help text (the table is
`reviewer_app/settings/table.py`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    env: str
    attr: str
    kind: type
    default: object
    help: str
    secret: bool = False
    minimum: float | None = None
    maximum: float | None = None
