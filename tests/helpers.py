"""Test helpers: waiting on conditions with a deadline, signed webhook deliveries of payloads as GitHub sends them."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from tests.payloads import DEFAULT_STAMP, pull_request_event, validate
from tests.payloads import sha as sha  # tests import it from here

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


def pr_payload(
    *,
    action: str = "opened",
    number: int = 1,
    head: str | None = None,
    repo_id: int = 1001,
    repo: str = "octo/widgets",
    installation_id: int = 77,
    draft: bool = False,
    state: str | None = None,
    updated_at: str = DEFAULT_STAMP,
    padding: int = 0,
) -> dict[str, Any]:
    """A pull_request payload as GitHub sends it (``padding`` grows the body toward realistic sizes)."""
    return pull_request_event(
        action,
        number=number,
        head=head,
        repo_id=repo_id,
        repo=repo,
        installation_id=installation_id,
        draft=draft,
        state=state,
        updated_at=updated_at,
        body="This PR adds frobnication.\n" + ("lorem ipsum dolor sit amet " * padding),
    )


def webhook_headers(
    body: bytes,
    *,
    event: str = "pull_request",
    delivery: str | None = None,
    secret: str | None = SECRET,
    as_github_sends: bool = True,
) -> dict[str, str]:
    """The headers of a delivery of ``body``. Every test sends its webhooks with these, so every body a test builds
    is held here to GitHub's schema for its event and action (tests.payloads.validate); ``as_github_sends=False``
    only for a body that is meant not to be one GitHub sends (a relabelled, truncated or malformed one)."""
    if as_github_sends:
        validate(event, json.loads(body))
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
