"""Fault injection: the faults a test can inject, which request takes one, the answer a failed request gets, and the
hangs a test releases."""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.fakes.github.api import ApiError, AuthInfo, RateLimits

FAULT_KINDS = {
    "error",  # respond `status` (default 500) without touching state
    "hang",  # wait `delay` seconds (default: until the client gives up or the fake stops), then serve
    "secondary_rate_limit",  # 403 (or `status`) "You have exceeded a secondary rate limit", retry-after
    "primary_rate_limit",  # 403 (or `status`) with x-ratelimit-remaining 0 and x-ratelimit-reset `reset`
    "too_many_requests",  # 429 with retry-after
    "unauthorized",  # 401 Bad credentials, as if the token had been revoked
    "lost_response",  # apply the request, then drop the connection (`mode="drop"`), answer 502, or answer late ("slow")
    "advance_head",  # serve the request, then move the PR's head to `new_sha` (or a random sha)
}
PRE_FAULTS = {"error", "secondary_rate_limit", "primary_rate_limit", "too_many_requests", "unauthorized"}  # no handler


@dataclass
class Fault:
    """One injected fault; ``remaining`` None means every matching request, ``hits`` counts matches."""

    method: str
    path: re.Pattern[str]
    kind: str
    remaining: int | None
    params: dict[str, Any]
    hits: int = 0
    after: int = 0  # matching requests let through before the fault starts

    def matches(self, method: str, path: str) -> bool:
        if self.remaining is not None and self.remaining <= 0:
            return False
        return self.method in ("*", method.upper()) and self.path.search(path) is not None


def new_fault(method: str, path_regex: str, kind: str, times: int | None, params: dict[str, Any]) -> Fault:
    if kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault {kind!r}; one of {sorted(FAULT_KINDS)}")
    after = int(params.pop("after", 0))
    return Fault(method.upper(), re.compile(path_regex), kind, times, params, after=after)


def take_fault(faults: list[Fault], request: web.Request) -> Fault | None:
    """The first fault that matches the request, counted as hit."""
    for fault in faults:
        if fault.matches(request.method, request.path):
            if fault.after > 0:
                fault.after -= 1
                continue
            fault.hits += 1
            if fault.remaining is not None:
                fault.remaining -= 1
            return fault
    return None


SECONDARY_LIMIT_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID."
)


def fault_response(
    fault: Fault, auth: AuthInfo, now: float, rate_limits: RateLimits, *, graphql: bool = False
) -> web.Response:
    """The answer to a request a fault of PRE_FAULTS fails before any handler runs.

    On the GraphQL endpoint (``graphql``) the rate limits take GitHub's GraphQL shapes: a primary limit is ``200``
    with an error of type ``RATE_LIMITED`` and ``x-ratelimit-remaining: 0``; a secondary limit ``403`` (or, with
    ``status=200``, ``200`` with an error) saying so, with ``retry-after`` unless ``retry_after=None``."""
    p = fault.params
    if fault.kind == "error":
        status = int(p.get("status", 500))
        return ApiError(status, p.get("message", "Server Error")).response()
    if fault.kind == "unauthorized":
        return ApiError(401, "Bad credentials").response()
    if fault.kind == "primary_rate_limit":
        headers = rate_limits.headers(
            auth,
            now,
            remaining=0,
            reset=int(p.get("reset", now + 60)),
            resource="graphql" if graphql else "core",
        )
        who = f"installation ID {auth.installation_id}" if auth.installation_id else "this app"
        if graphql and int(p.get("status", 200)) == 200:
            error = {
                "type": "RATE_LIMITED",
                "code": "graphql_rate_limit",
                "message": f"API rate limit exceeded for {who}.",
            }
            return web.json_response({"data": None, "errors": [error]}, headers=headers)
        return ApiError(int(p.get("status", 403)), f"API rate limit exceeded for {who}.", headers=headers).response()
    headers = {}
    if p.get("retry_after", 60) is not None:
        headers["retry-after"] = str(p.get("retry_after", 60))
    if fault.kind == "too_many_requests":
        return ApiError(429, "Too Many Requests", headers=headers).response()
    if graphql and int(p.get("status", 403)) == 200:
        return web.json_response({"data": None, "errors": [{"message": SECONDARY_LIMIT_MESSAGE}]}, headers=headers)
    return ApiError(int(p.get("status", 403)), SECONDARY_LIMIT_MESSAGE, headers=headers).response()


class Hangs:
    """Requests held by a ``hang`` (or a slow ``lost_response``) until their delay passes or the test releases them."""

    def __init__(self) -> None:
        self._release: asyncio.Event | None = None

    async def wait(self, delay: float | None) -> None:
        if self._release is None:
            self._release = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._release.wait(), delay)

    def release(self) -> None:
        """Let the held requests go on; a hang met after this holds again until the next release."""
        if self._release is not None:
            self._release.set()
            self._release = None
