"""The aiohttp application: webhook receiver, health, readiness and metrics endpoints."""

from __future__ import annotations

from aiohttp import web

from reviewer_app.web.health import Probes
from reviewer_app.web.webhooks import Receiver

RECEIVER = web.AppKey("receiver", Receiver)
WEBHOOK_PATH = "/api/github/webhooks"


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def make_app(receiver: Receiver, probes: Probes | None = None) -> web.Application:
    # The limit is enforced here too, so a chunked body over it is refused while it streams in.
    app = web.Application(client_max_size=receiver.max_body_bytes)
    app[RECEIVER] = receiver
    app.router.add_post(WEBHOOK_PATH, receiver.handle)
    app.router.add_get("/healthz", healthz)
    (probes or Probes(receiver.store)).register(app)
    return app
