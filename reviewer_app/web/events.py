"""Webhook routing: one gidgethub router per concern; handlers only decide, they never call GitHub."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gidgethub import routing, sansio

from reviewer_app.core.admission import Decision, Enqueue, Ignore, decide_pull_request


@dataclass
class Decisions:
    """Collects what the routed handlers decided for one delivery."""

    debounce_seconds: float = 0.0
    items: list[Decision] = field(default_factory=list)


pull_requests = routing.Router()


def _event_at(payload: dict[str, Any]) -> float | None:
    stamp = (payload.get("pull_request") or {}).get("updated_at")
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@pull_requests.register("pull_request")
async def on_pull_request(event: sansio.Event, decisions: Decisions) -> None:
    action = event.data.get("action")
    if not isinstance(action, str):
        decisions.items.append(Ignore("pull_request event without an action"))
        return
    decision = decide_pull_request(action, event.data, debounce_seconds=decisions.debounce_seconds)
    if isinstance(decision, Enqueue):
        event_at = _event_at(event.data)
        if event_at is not None:
            decision.job.details["event_at"] = event_at
    decisions.items.append(decision)


pings = routing.Router()


@pings.register("ping")
async def on_ping(event: sansio.Event, decisions: Decisions) -> None:
    decisions.items.append(Ignore("pong"))


def make_router() -> routing.Router:
    return routing.Router(pull_requests, pings)
