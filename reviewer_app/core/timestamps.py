"""GitHub's timestamps (pure)."""

from __future__ import annotations

from datetime import datetime


def parse_time(stamp: object) -> float | None:
    """Epoch seconds of a GitHub timestamp (``2026-01-02T03:04:05Z``); None when absent or malformed."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
