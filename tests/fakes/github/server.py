"""The fake GitHub served: the aiohttp app that wires every area's routes behind one middleware (headers, auth, faults,
rate-limit headers, the record of requests), and the ways to run it (in a test's loop, on a thread, standalone)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web

from tests.fakes.github.api import AUTH, ApiError
from tests.fakes.github.auth import check_api_headers, identify
from tests.fakes.github.conditional import not_modified
from tests.fakes.github.faults import PRE_FAULTS, Fault, fault_response, take_fault
from tests.fakes.github.graphql import COST, register_graphql
from tests.fakes.github.model import RecordedRequest
from tests.fakes.github.routes import (
    admin,
    apps,
    archives,
    checks,
    collaborators,
    compare,
    contents,
    deliveries,
    issues,
    pulls,
    reviews,
    threads,
)
from tests.fakes.github.state import GitHubState

T = TypeVar("T")
Handler = Callable[[GitHubState, web.Request], Awaitable[web.StreamResponse]]

ROUTES: list[tuple[str, str, Handler]] = [
    *apps.ROUTES,
    *deliveries.ROUTES,
    *pulls.ROUTES,
    *reviews.ROUTES,
    *checks.ROUTES,
    *issues.ROUTES,
    *threads.ROUTES,
    *contents.ROUTES,
    *compare.ROUTES,
    *archives.ROUTES,
    *collaborators.ROUTES,
    *admin.ROUTES,
]


class FakeGitHub(GitHubState):
    """GitHub's state for one app (see GitHubState), served by the app ``make_app`` builds."""

    def make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware])
        add = {"GET": app.router.add_get, "POST": app.router.add_post, "PATCH": app.router.add_patch}
        for method, path, handler in ROUTES:
            add[method](path, self._bind(handler))
        app.router.add_get(archives.DOWNLOAD_ROUTE, self._bind(archives.download))  # codeload: not the API
        register_graphql(self, app)  # POST /graphql, checked against GitHub's published schema (graphql.py)
        return app

    def _bind(self, handler: Handler) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            return await handler(self, request)

        return handle

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
        if request.path.startswith("/_fake/"):
            return await handler(request)
        arrived = time.time()
        auth = identify(self, request)
        request[AUTH] = auth
        refusal = check_api_headers(self, request)
        fault = None if refusal is not None else self._take_fault(request)
        self.counters["requests"] += 1
        is_write = request.method in ("POST", "PATCH", "PUT", "DELETE")
        if is_write:
            self.writes_in_flight[auth.installation_id] += 1
            in_flight = self.writes_in_flight[auth.installation_id]
            self.max_concurrent_writes[auth.installation_id] = max(
                in_flight, self.max_concurrent_writes[auth.installation_id]
            )
        try:
            if fault is not None and fault.kind == "hang":
                await self.hangs.wait(fault.params.get("delay"))
            response: web.StreamResponse
            if refusal is not None:
                response = refusal.response()
            elif fault is not None and fault.kind in PRE_FAULTS:
                response = fault_response(
                    fault, auth, self.clock(), self.rate_limits, graphql=request.path == "/graphql"
                )
            else:
                try:
                    response = await handler(request)
                except ApiError as exc:
                    response = exc.response()
                except web.HTTPException as exc:  # no such route / method
                    response = ApiError(exc.status, exc.reason).response()
        finally:
            if is_write:
                self.writes_in_flight[auth.installation_id] -= 1
        if request.path == "/graphql":
            self.rate_limits.count(response, auth, self.clock(), resource="graphql", cost=request.get(COST, 1))
        else:
            response = not_modified(request, response)
            self.rate_limits.count(response, auth, self.clock(), cost=0 if response.status == 304 else 1)
        self.requests.append(
            RecordedRequest(
                method=request.method,
                path=request.path,
                query=dict(request.query),
                auth=auth.kind,
                installation_id=auth.installation_id,
                token_expired=auth.expired,
                status=response.status,
                fault=fault.kind if fault else None,
                route=request.match_info.route.resource.canonical if request.match_info.route.resource else "",
                request_json=_json_or_none(await request.read()) if is_write else None,
                response_json=_json_or_none(response.body) if isinstance(response, web.Response) else None,
                arrived=arrived,
            )
        )
        if fault is not None and fault.kind == "advance_head":
            self._fault_advance_head(request, fault)
        if fault is not None and fault.kind == "lost_response":
            if fault.params.get("mode", "drop") == "502":
                return ApiError(502, "Bad Gateway").response()
            if fault.params.get("mode") == "slow":
                # The write is applied; the answer comes only after `delay` seconds (or when released).
                await self.hangs.wait(fault.params.get("delay"))
                return response
            assert request.transport is not None
            request.transport.close()  # the write happened; the client sees a dropped connection
            raise web.HTTPInternalServerError()  # never delivered: the transport is gone
        return response

    def _take_fault(self, request: web.Request) -> Fault | None:
        fault = take_fault(self.faults, request)
        if fault is not None:
            self.counters["faults"] += 1
        return fault

    def _fault_advance_head(self, request: web.Request, fault: Fault) -> None:
        """An ``advance_head`` fault: after serving, push to the pull request (the fault's, or the request's)."""
        repo = fault.params.get("repo") or f"{request.match_info.get('owner')}/{request.match_info.get('repo')}"
        number = fault.params.get("number") or int(request.match_info.get("number", "0"))
        if (repo, number) in self.pulls:
            self.advance_head(repo, number, fault.params.get("new_sha"))


# ----------------------------------------------------------------------------------------- running it


@contextlib.asynccontextmanager
async def running(fake: FakeGitHub, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve ``fake`` on loopback for the duration of the block; yields its base URL (no trailing slash)."""
    # As GitHub: a request it received is carried out even if the client goes away meanwhile (a process stopped
    # while its write was on the way); only what the client is told is lost.
    runner = web.AppRunner(fake.make_app(), handler_cancellation=False, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound_port = runner.addresses[0][1]
    fake.base_url = f"http://{host}:{bound_port}"
    try:
        yield fake.base_url
    finally:
        fake.release_hangs()
        await runner.cleanup()
        fake.base_url = None


start_fake_github = running


class FakeGitHubThread:
    """Serves a fake from a background thread with its own loop, for tests that run the app as a subprocess.

    Arrange or inspect state with ``call(fn, ...)``, which runs ``fn`` on the server's loop.
    """

    def __init__(self, fake: FakeGitHub, host: str = "127.0.0.1", port: int = 0) -> None:
        self.fake = fake
        self._host, self._port = host, port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-github", daemon=True)
        self.base_url = ""

    def start(self) -> str:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake GitHub did not start")
        return self.base_url

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        assert self._loop is not None

        async def invoke() -> T:
            return fn(*args, **kwargs)

        return asyncio.run_coroutine_threadsafe(invoke(), self._loop).result(10)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def __enter__(self) -> FakeGitHubThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with running(self.fake, self._host, self._port) as url:
            self.base_url = url
            self._ready.set()
            await self._stop.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a fake GitHub REST API on loopback.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state-file", help="JSON state to load at start (see FakeGitHub.load_state)")
    args = parser.parse_args(argv)
    fake = FakeGitHub()
    if args.state_file:
        with open(args.state_file, encoding="utf-8") as fh:
            fake.load_state(json.load(fh))

    async def serve() -> None:
        async with running(fake, args.host, args.port) as url:
            print(f"fake GitHub listening on {url}", flush=True)
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


def _json_or_none(body: Any) -> Any:
    if not isinstance(body, bytes | bytearray) or not body:
        return None
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
