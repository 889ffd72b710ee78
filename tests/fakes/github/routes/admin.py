"""The standalone server's own endpoints (not GitHub's): look at the state, inject a fault, load state."""

from __future__ import annotations

from aiohttp import web

from tests.fakes.github.state import GitHubState


async def admin_state(gh: GitHubState, request: web.Request) -> web.Response:
    return web.json_response(gh.snapshot())


async def admin_inject(gh: GitHubState, request: web.Request) -> web.Response:
    data = await request.json()
    fault = gh.inject(data["method"], data["path"], data["fault"], data.get("times", 1), **data.get("params", {}))
    return web.json_response({"kind": fault.kind}, status=201)


async def admin_load(gh: GitHubState, request: web.Request) -> web.Response:
    gh.load_state(await request.json())
    return web.json_response({})


ROUTES = [
    ("GET", "/_fake/state", admin_state),
    ("POST", "/_fake/inject", admin_inject),
    ("POST", "/_fake/load", admin_load),
]
