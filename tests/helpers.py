"""Test helpers: waiting on conditions with a deadline, realistic signed webhook payloads."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

SECRET = "test-webhook-secret"


async def eventually(cond: Callable[[], Awaitable[Any]], *, timeout: float = 10.0, interval: float = 0.01) -> Any:
    """Poll ``cond`` until it returns a truthy value, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = await cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s (last value {value!r})")
        await asyncio.sleep(interval)


def sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def sha(n: int | str) -> str:
    return hashlib.sha1(str(n).encode()).hexdigest()


def pr_payload(
    *,
    action: str = "opened",
    number: int = 1,
    head: str | None = None,
    repo_id: int = 1001,
    repo: str = "octo/widgets",
    installation_id: int = 77,
    draft: bool = False,
    state: str = "open",
    updated_at: str = "2026-12-01T10:00:00Z",
    padding: int = 0,
) -> dict[str, Any]:
    """A pull_request payload shaped like GitHub's (``padding`` grows the body toward realistic sizes)."""
    owner, name = repo.split("/")
    user = {"login": "alice", "id": 1, "type": "User", "site_admin": False}
    return {
        "action": action,
        "number": number,
        "pull_request": {
            "url": f"https://api.github.com/repos/{repo}/pulls/{number}",
            "id": 500000 + number,
            "number": number,
            "state": state,
            "draft": draft,
            "title": "Add widget frobnication",
            "body": "This PR adds frobnication.\n" + ("lorem ipsum dolor sit amet " * padding),
            "user": user,
            "created_at": "2026-12-01T09:00:00Z",
            "updated_at": updated_at,
            "head": {
                "ref": "feature",
                "sha": head or sha(f"{repo}{number}"),
                "user": user,
                "repo": {"id": repo_id, "full_name": repo},
            },
            "base": {"ref": "main", "sha": sha("base"), "user": user, "repo": {"id": repo_id, "full_name": repo}},
            "author_association": "MEMBER",
        },
        "repository": {
            "id": repo_id,
            "name": name,
            "full_name": repo,
            "private": False,
            "owner": {"login": owner, "id": 2, "type": "Organization"},
            "default_branch": "main",
        },
        "sender": user,
        "installation": {"id": installation_id, "node_id": "MDIz"},
    }


def webhook_headers(
    body: bytes, *, event: str = "pull_request", delivery: str | None = None, secret: str | None = SECRET
) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "User-Agent": "GitHub-Hookshot/test",
    }
    if secret is not None:
        headers["X-Hub-Signature-256"] = sign(body, secret)
    return headers


def encode(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode()
