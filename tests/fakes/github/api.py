"""What every route shares: the API's headers, GitHub's error shape, who is calling, rate-limit headers, JSON bodies
and pagination."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.github.shapes import Json

REPO_PATH = "/repos/{owner}/{repo}"
PER_PAGE_DEFAULT = 30
PER_PAGE_MAX = 100
RATE_LIMIT = 5000
DOCS_URL = "https://docs.github.com/rest"
# GitHub documents one media type for its REST API and versions it by header; the fake insists on both, so a client
# that forgets them (gidgethub's helpers send an older Accept and no version) fails here rather than on github.com.
API_MEDIA_TYPE = "application/vnd.github+json"
API_VERSIONS = {"2022-11-28"}
API_HEADERS = {"Accept": API_MEDIA_TYPE, "X-GitHub-Api-Version": "2022-11-28"}  # for tests that call the fake


class ApiError(Exception):
    """Raised inside a handler; becomes a GitHub-shaped JSON error response."""

    def __init__(
        self, status: int, message: str, *, errors: list[Any] | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors
        self.headers = headers or {}

    def response(self) -> web.Response:
        body: Json = {"message": self.message, "documentation_url": DOCS_URL, "status": str(self.status)}
        if self.errors is not None:
            body["errors"] = self.errors
        return web.json_response(body, status=self.status, headers=self.headers)


@dataclass(frozen=True)
class AuthInfo:
    kind: str  # "none", "jwt", "bad_jwt", "token" (an installation's), "user" (a person's token), "bad_token"
    installation_id: int | None = None
    expired: bool = False
    repositories: frozenset[str] | None = None  # a token's repositories by name (None: all of the installation's)
    permissions: tuple[tuple[str, str], ...] = ()  # a token's (permission, level) pairs
    user: str | None = None  # whom a person's token acts as


AUTH = web.RequestKey("auth", AuthInfo)  # who made the request (set by the middleware)


@dataclass
class RateLimits:
    """What each caller (installation, or the kind of credential) used of each of GitHub's resources per hourly window:
    ``core`` counts REST requests, ``graphql`` counts points (a query's cost, graphql_cost.py). A ``304 Not
    Modified`` costs nothing: GitHub does not count a conditional request it answers from the client's copy."""

    used: Counter[tuple[str, str, int]] = field(default_factory=Counter)

    def left(self, auth: AuthInfo, now: float, resource: str = "core") -> int:
        return max(RATE_LIMIT - self.used[(_caller(auth), resource, int(now) // 3600)], 0)

    def headers(
        self,
        auth: AuthInfo,
        now: float,
        *,
        remaining: int | None = None,
        reset: int | None = None,
        resource: str = "core",
    ) -> dict[str, str]:
        window = int(now) // 3600
        used = self.used[(_caller(auth), resource, window)]
        return {
            "x-ratelimit-limit": str(RATE_LIMIT),
            "x-ratelimit-remaining": str(max(RATE_LIMIT - used, 0) if remaining is None else remaining),
            "x-ratelimit-reset": str((window + 1) * 3600 if reset is None else reset),
            "x-ratelimit-used": str(used),
            "x-ratelimit-resource": resource,
        }

    def count(
        self, response: web.StreamResponse, auth: AuthInfo, now: float, *, resource: str = "core", cost: int = 1
    ) -> None:
        """Count the request (``cost``: 1 for REST, the query's points for GraphQL, 0 for a 304), then give its
        response the headers (a fault's own headers win)."""
        self.used[(_caller(auth), resource, int(now) // 3600)] += cost
        for key, value in self.headers(auth, now, resource=resource).items():
            response.headers.setdefault(key, value)


def _caller(auth: AuthInfo) -> str:
    return str(auth.installation_id) if auth.installation_id is not None else auth.kind


async def read_body(request: web.Request) -> Json:
    try:
        data = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(400, "Problems parsing JSON") from exc
    if not isinstance(data, dict):
        raise ApiError(400, "Problems parsing JSON")
    return data


def per_page(request: web.Request) -> int:
    return min(max(int(request.query.get("per_page", PER_PAGE_DEFAULT)), 1), PER_PAGE_MAX)


def page(request: web.Request, items: list[Any], wrap: Callable[[list[Any]], Any] | None = None) -> web.Response:
    """One page of ``items`` (``per_page``, ``page``) with GitHub's Link header; ``wrap`` shapes the page's body."""
    try:
        size = per_page(request)
        number = max(int(request.query.get("page", 1)), 1)
    except ValueError:
        size, number = PER_PAGE_DEFAULT, 1
    chunk = items[(number - 1) * size : number * size]
    last = max(1, math.ceil(len(items) / size))
    links = []
    if number < last:
        links += [(number + 1, "next"), (last, "last")]
    if number > 1:
        links += [(number - 1, "prev"), (1, "first")]
    headers = {}
    if links:
        headers["Link"] = ", ".join(f'<{request.url.update_query(page=str(n))}>; rel="{rel}"' for n, rel in links)
    return web.json_response(wrap(chunk) if wrap else chunk, headers=headers)
