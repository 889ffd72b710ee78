"""Admission decisions: what a webhook asks of the queue, decided over the payload alone (no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

AUTO_ACTIONS = frozenset({"opened", "reopened", "synchronize", "ready_for_review"})

# Lower number, earlier claim. Manual requests go ahead of automatic work.
PRIORITY_MANUAL = 0
PRIORITY_AUTO = 10


@dataclass(frozen=True)
class JobSpec:
    """Everything a job needs to run, taken from the webhook; the revision key makes it unique."""

    repo_id: int
    repo_full_name: str
    installation_id: int | None
    pr_number: int
    head_sha: str
    trigger: str = "auto"
    priority: int = PRIORITY_AUTO
    delay_seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def revision_key(self) -> str:
        return f"{self.repo_id}:{self.pr_number}:{self.head_sha}:{self.trigger}"


@dataclass(frozen=True)
class Enqueue:
    job: JobSpec
    supersede_older_heads: bool = True


@dataclass(frozen=True)
class CancelPR:
    repo_id: int
    pr_number: int
    reason: str


@dataclass(frozen=True)
class Ignore:
    reason: str


Decision = Enqueue | CancelPR | Ignore


class MalformedPayload(ValueError):
    """The payload lacks a field the event must carry; the receiver answers 400."""


def _get(payload: dict[str, Any], *path: str) -> Any:
    node: Any = payload
    for key in path:
        if not isinstance(node, dict) or key not in node:
            raise MalformedPayload(f"payload has no {'.'.join(path)}")
        node = node[key]
    return node


def _int(payload: dict[str, Any], *path: str) -> int:
    value = _get(payload, *path)
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedPayload(f"payload field {'.'.join(path)} is not an integer")
    return value


def _str(payload: dict[str, Any], *path: str) -> str:
    value = _get(payload, *path)
    if not isinstance(value, str) or not value:
        raise MalformedPayload(f"payload field {'.'.join(path)} is not a non-empty string")
    return value


def decide_pull_request(action: str, payload: dict[str, Any], *, debounce_seconds: float = 0.0) -> Decision:
    """The decision for a ``pull_request`` event."""
    repo_id = _int(payload, "repository", "id")
    number = _int(payload, "pull_request", "number")
    if action == "closed":
        return CancelPR(repo_id, number, "pull request closed")
    if action not in AUTO_ACTIONS:
        return Ignore(f"pull_request action {action!r} does not start a review")
    if _get(payload, "pull_request").get("draft") is True:
        return Ignore("draft pull request: waiting for ready_for_review")
    if _get(payload, "pull_request").get("state", "open") != "open":
        return Ignore("pull request is not open")
    installation = payload.get("installation")
    installation_id = installation.get("id") if isinstance(installation, dict) else None
    spec = JobSpec(
        repo_id=repo_id,
        repo_full_name=_str(payload, "repository", "full_name"),
        installation_id=installation_id if isinstance(installation_id, int) else None,
        pr_number=number,
        head_sha=_str(payload, "pull_request", "head", "sha"),
        trigger="auto",
        priority=PRIORITY_AUTO,
        delay_seconds=debounce_seconds if action == "synchronize" else 0.0,
        details={
            "action": action,
            "base_ref": _get(payload, "pull_request").get("base", {}).get("ref"),
            "base_sha": _get(payload, "pull_request").get("base", {}).get("sha"),
            "title": _get(payload, "pull_request").get("title"),
        },
    )
    return Enqueue(spec)
