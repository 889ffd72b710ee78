"""The aiohttp application: webhook receiver, health, readiness and metrics endpoints."""

from __future__ import annotations

from aiohttp import web

from reviewer_app.web.app_registration import WEBHOOK_PATH
from reviewer_app.web.health import Probes
from reviewer_app.web.webhooks import Receiver

RECEIVER = web.AppKey("receiver", Receiver)


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def home(request: web.Request) -> web.Response:
    """The App's homepage: the setup page is gone once an App is configured."""
    return web.Response(text="reviewer-app is running; its GitHub App is already configured.\n")


def make_app(receiver: Receiver, probes: Probes | None = None) -> web.Application:
    # The limit is enforced here too, so a chunked body over it is refused while it streams in.
    app = web.Application(client_max_size=receiver.max_body_bytes)
    app[RECEIVER] = receiver
    app.router.add_post(WEBHOOK_PATH, receiver.handle)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/", home)
    (probes or Probes(receiver.store)).register(app)
    return app
