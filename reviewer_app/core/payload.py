"""Reading a webhook's payload (pure): the objects each event carries, and its fields, checked as they are read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reviewer_app.core.github_formats import is_login, is_number, is_repo_full_name, is_sha


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
    require_formats(payload)


# The fields that reach GitHub's URLs (or name whom a permission is asked for), by the format GitHub gives them. A
# field is checked where the payload carries it; ``required`` ones must be there whenever their object is.
_FORMATS: tuple[tuple[tuple[str, ...], Callable[[Any], bool], str, bool], ...] = (
    (("repository", "full_name"), is_repo_full_name, "a repository's OWNER/NAME", True),
    (("repository", "id"), is_number, "a positive integer", False),
    (("sender", "login"), is_login, "a GitHub login", True),
    (("installation", "id"), is_number, "a positive integer", False),
    (("installation", "account", "login"), is_login, "a GitHub login", False),
    (("pull_request", "number"), is_number, "a positive integer", True),
    (("pull_request", "head", "sha"), is_sha, "a commit SHA (40 or 64 hex digits)", True),
    (("pull_request", "base", "sha"), is_sha, "a commit SHA (40 or 64 hex digits)", False),
    (("pull_request", "user", "login"), is_login, "a GitHub login", False),
    (("issue", "number"), is_number, "a positive integer", True),
    (("issue", "user", "login"), is_login, "a GitHub login", False),
    (("comment", "id"), is_number, "a positive integer", True),
    (("comment", "in_reply_to_id"), is_number, "a positive integer", False),
    (("comment", "user", "login"), is_login, "a GitHub login", True),
    (("check_run", "head_sha"), is_sha, "a commit SHA (40 or 64 hex digits)", True),
    (("check_suite", "head_sha"), is_sha, "a commit SHA (40 or 64 hex digits)", True),
    (("before",), is_sha, "a commit SHA (40 or 64 hex digits)", False),
    (("after",), is_sha, "a commit SHA (40 or 64 hex digits)", False),
)


def require_formats(payload: dict[str, Any]) -> None:
    """Raise MalformedPayload (one line naming the field, never quoting it) when a field that reaches a URL is not in
    GitHub's format: an empty login, a head SHA that is not hex, a repository name with ``/..``, a number below 1."""
    for path, valid, what, required in _FORMATS:
        node: Any = payload
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            continue  # the object is not there (a type problem of its own is the decisions' to find)
        if path[-1] not in node:
            if required:
                raise MalformedPayload(f"payload has no {'.'.join(path)}")
            continue
        if node[path[-1]] is None and not required:
            continue
        if not valid(node[path[-1]]):
            raise MalformedPayload(f"payload field {'.'.join(path)} is not {what}")


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
