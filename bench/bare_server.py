"""A bare aiohttp server for the admission benchmark's baseline: reads the body, answers 202, verifies and stores nothing."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal

from aiohttp import web

WEBHOOK_PATH = "/api/github/webhooks"
ANSWER = json.dumps({"outcome": "enqueued", "job_id": 0})


async def webhook(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(status=202, text=ANSWER, content_type="application/json")


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def make_app() -> web.Application:
    # Same body limit as reviewer-app (25 MB) so both servers read bodies the same way.
    app = web.Application(client_max_size=25 * 1024 * 1024)
    app.router.add_post(WEBHOOK_PATH, webhook)
    app.router.add_get("/healthz", healthz)
    return app


async def main(host: str, port: int) -> None:
    runner = web.AppRunner(make_app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    asyncio.run(main(args.host, args.port))
