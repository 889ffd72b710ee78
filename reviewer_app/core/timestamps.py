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


def event_time(event: str, payload: object) -> float | None:
    """When the thing a delivery reports happened, by the payload (pure): a pull request's ``updated_at``, a
    comment's ``created_at``. None for events whose payload carries no such time of the event itself (a Re-run's
    check run keeps its old timestamps, an installation its own), which are never taken for replays."""
    if not isinstance(payload, dict):
        return None
    node = payload.get("pull_request" if event == "pull_request" else "comment")
    if event not in ("pull_request", "issue_comment", "pull_request_review_comment") or not isinstance(node, dict):
        return None
    return parse_time(node.get("updated_at" if event == "pull_request" else "created_at"))


def replay_reason(event: str, payload: object, *, now: float, window_seconds: float) -> str | None:
    """Why a delivery is taken for a replay (its event older than the window in which delivery ids are remembered,
    so a captured signed body sent again after that would pass the duplicate check), or None."""
    at = event_time(event, payload)
    if not window_seconds or at is None or now - at <= window_seconds:
        return None
    days = window_seconds / 86400
    return f"the event is {(now - at) / 86400:.0f} days old, older than the {days:g}-day delivery window: a replay"
