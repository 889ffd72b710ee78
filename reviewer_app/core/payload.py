"""Reading a webhook's payload (pure): the objects each event carries, and its fields, checked as they are read."""

from __future__ import annotations

from typing import Any


class MalformedPayload(ValueError):
    """The payload lacks a field the event must carry; the receiver answers 400."""


# The signature covers the body, not the X-GitHub-Event header: a captured body relabelled as another event must not
# be read as that event (an issue_comment sent as `installation` was read as "uninstalled"). Each event's top-level
# objects as GitHub sends them, and the objects of the other events, which it never carries.
_EVENT_OBJECTS: dict[str, tuple[str, ...]] = {
    "pull_request": ("pull_request", "repository"),
    "issue_comment": ("issue", "comment", "repository"),
    "pull_request_review_comment": ("pull_request", "comment", "repository"),
    "check_run": ("check_run", "repository"),
    "check_suite": ("check_suite", "repository"),
    "installation": ("installation",),
    "installation_repositories": ("installation", "repositories_added", "repositories_removed"),
}
# `repository` belongs to every repository event and to no installation event.
_FOREIGN_OBJECTS = frozenset(
    {
        "pull_request",
        "issue",
        "comment",
        "check_run",
        "check_suite",
        "review",
        "repository",
        "repositories_added",
        "repositories_removed",
    }
)


def require_shape(event: str, payload: dict[str, Any]) -> None:
    """Raise MalformedPayload unless the payload has the objects ``event`` carries and none that only other events
    carry (pure)."""
    expected = _EVENT_OBJECTS.get(event)
    if expected is None:
        return
    missing = [key for key in expected if key not in payload]
    foreign = sorted(key for key in _FOREIGN_OBJECTS - set(expected) if key in payload)
    if missing or foreign:
        problem = f"has no {', '.join(missing)}" if missing else f"carries {', '.join(foreign)}"
        raise MalformedPayload(f"not a {event} payload: it {problem}")


def as_text(value: Any) -> str | None:
    """``value`` when it is a non-empty string (an optional part of a payload), else None."""
    return value if isinstance(value, str) and value else None


def as_whole(value: Any) -> int | None:
    return value if is_int(value) else None


def as_obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one: for the optional parts of a payload."""
    return value if isinstance(value, dict) else {}


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def at(payload: dict[str, Any], *path: str) -> Any:
    node: Any = payload
    for key in path:
        if not isinstance(node, dict) or key not in node:
            raise MalformedPayload(f"payload has no {'.'.join(path)}")
        node = node[key]
    return node


def int_at(payload: dict[str, Any], *path: str) -> int:
    value = at(payload, *path)
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedPayload(f"payload field {'.'.join(path)} is not an integer")
    return value


def str_at(payload: dict[str, Any], *path: str) -> str:
    value = at(payload, *path)
    if not isinstance(value, str) or not value:
        raise MalformedPayload(f"payload field {'.'.join(path)} is not a non-empty string")
    return value


def installation_of(payload: dict[str, Any]) -> int | None:
    installation = payload.get("installation")
    value = installation.get("id") if isinstance(installation, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
