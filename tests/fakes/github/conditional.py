"""Conditional requests, as GitHub documents them ("Use conditional requests if appropriate"): every ``200`` answer to
a ``GET`` carries an ``ETag``; a request whose ``If-None-Match`` names the current one is answered ``304 Not
Modified`` with no body, and does not count against the rate limit. GitHub's answers vary by ``Authorization``
(``Vary: Accept, Authorization, Cookie``), so the fake's ETag does too: a copy kept under another token (an
installation token renewed an hour later) is answered in full, the harsher reading. The ETag is over the body only:
a full page of a list that grew since answers 304 although its ``Link`` now names a next page."""

from __future__ import annotations

import hashlib

from aiohttp import web


def etag(request: web.Request, body: bytes) -> str:
    """A weak ETag of the answer ``body`` as the caller's credentials see it."""
    digest = hashlib.sha256(request.headers.get("Authorization", "").encode() + b"\n" + body).hexdigest()
    return f'W/"{digest[:40]}"'


def not_modified(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    """``response`` with its ETag, or ``304`` when the request's ``If-None-Match`` names it."""
    if request.method != "GET" or response.status != 200 or not isinstance(response, web.Response):
        return response
    tag = etag(request, response.body if isinstance(response.body, bytes) else b"")
    response.headers["ETag"] = tag
    response.headers["Vary"] = "Accept, Authorization, Cookie, X-GitHub-OTP"
    wanted = {t.strip() for t in request.headers.get("If-None-Match", "").split(",") if t.strip()}
    if tag not in wanted and "*" not in wanted:
        return response
    # A 304 carries the validators and the rate-limit headers, not the body's metadata: no ``Link`` (the ETag does
    # not cover it, so a client must not take a kept page's links for the current ones).
    dropped = ("content-type", "content-length", "link")
    headers = {k: v for k, v in response.headers.items() if k.lower() not in dropped}
    return web.Response(status=304, headers=headers)
