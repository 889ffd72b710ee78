"""GET /readyz and GET /metrics: may this process take traffic now, and what is it doing."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from reviewer_app.metrics import Metrics
from reviewer_app.store.base import Store, StoreUnavailable

PING_TIMEOUT_SECONDS = 2.0


@dataclass
class Probes:
    store: Store
    # None when this process runs no workers (`serve --no-worker`, or no runner configured).
    workers_running: Callable[[], bool] | None = None
    metrics: Metrics | None = None
    metrics_token: str = ""
    # Why this process can never do the work it is for (a worker without its model key), or None.
    cannot_work: str | None = None

    async def not_ready_because(self) -> str | None:
        """Why this process should not get traffic now, or None when it is ready."""
        try:
            await asyncio.wait_for(self.store.ping(), timeout=PING_TIMEOUT_SECONDS)
            pending = await self.store.migrations_pending()
        except TimeoutError:
            return f"database did not answer within {PING_TIMEOUT_SECONDS:g} s"
        except StoreUnavailable as exc:
            return f"database unavailable: {exc}"
        if pending:
            return f"migrations not applied: {', '.join(pending)}"
        if self.cannot_work is not None:
            return self.cannot_work
        if self.workers_running is not None and not self.workers_running():
            return "dispatcher is not running"
        return None

    async def readyz(self, request: web.Request) -> web.Response:
        reason = await self.not_ready_because()
        if reason is not None:
            return web.json_response({"status": "unavailable", "reason": reason}, status=503)
        return web.json_response({"status": "ready"})

    async def metrics_page(self, request: web.Request) -> web.Response:
        assert self.metrics is not None
        if self.metrics_token:
            given = request.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {self.metrics_token}".encode()):
                return web.json_response(
                    {"error": "a bearer token is required (REVIEWER_METRICS_TOKEN)"},
                    status=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
        return web.Response(body=await self.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    def register(self, app: web.Application) -> None:
        app.router.add_get("/readyz", self.readyz)
        if self.metrics is not None:
            app.router.add_get("/metrics", self.metrics_page)
