"""The HTTP server's limits (reviewer_app/web/limits.py): slow or idle connections are closed, open connections are
capped, idle keep-alive connections end, and a webhook body sent too slowly is answered 408. Measured from outside,
over raw sockets, as an attacker holds them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from reviewer_app.settings.config import load_config
from reviewer_app.web.limits import start_site

ENV = {"GITHUB_WEBHOOK_SECRET": "s", "REVIEWER_HTTP_KEEPALIVE_SECONDS": "1"}


@pytest.fixture
async def served(request) -> AsyncIterator[tuple[int, object]]:
    env = {**ENV, **getattr(request, "param", {})}
    app = web.Application()

    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_get("/healthz", ok)
    runner, site = await start_site(app, load_config(env), "127.0.0.1", 0)
    try:
        yield site.port, site
    finally:
        await runner.cleanup()


async def closed_by_server(reader: asyncio.StreamReader, within: float = 10.0) -> bytes:
    """Everything the server sent until it closed the connection (a deadline, never a sleep)."""
    return await asyncio.wait_for(reader.read(), timeout=within)


@pytest.mark.parametrize("served", [{"REVIEWER_HTTP_HEADER_TIMEOUT_SECONDS": "0.3"}], indirect=True)
async def test_headers_sent_a_byte_at_a_time_or_not_at_all_get_the_connection_closed(served) -> None:
    port, _ = served
    loop = asyncio.get_running_loop()
    idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", port)
    slow_reader, slow_writer = await asyncio.open_connection("127.0.0.1", port)
    started = loop.time()
    slow_writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # never finished
    assert await closed_by_server(idle_reader) == b""
    assert await closed_by_server(slow_reader) == b""
    assert loop.time() - started >= 0.3 - 0.05  # not before the deadline
    for w in (idle_writer, slow_writer):
        w.close()
    # A request whose headers come in parts, in time, is served.
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /healthz HTTP/1.1\r\n")
    await writer.drain()
    writer.write(b"Host: x\r\nConnection: close\r\n\r\n")
    answer = await closed_by_server(reader)
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"ok")
    writer.close()


@pytest.mark.parametrize(
    "served", [{"REVIEWER_HTTP_MAX_CONNECTIONS": "3", "REVIEWER_HTTP_HEADER_TIMEOUT_SECONDS": "30"}], indirect=True
)
async def test_connections_past_the_cap_are_closed_at_once(served) -> None:
    port, _ = served
    held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
    extra_reader, extra_writer = await asyncio.open_connection("127.0.0.1", port)
    assert await closed_by_server(extra_reader, within=5) == b""
    # The three held ones are still open and served.
    reader, writer = held[0]
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert (await closed_by_server(reader)).startswith(b"HTTP/1.1 200")
    for _, w in [*held, (extra_reader, extra_writer)]:
        w.close()


async def test_an_idle_keep_alive_connection_is_closed(served) -> None:
    port, _ = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    answer = await closed_by_server(reader)  # aiohttp's default would keep it an hour
    assert answer.startswith(b"HTTP/1.1 200")
    writer.close()


def test_the_limits_have_defaults_and_one_line_errors() -> None:
    cfg = load_config({"GITHUB_WEBHOOK_SECRET": "s"})
    assert (cfg.http_header_timeout_seconds, cfg.http_body_timeout_seconds) == (10.0, 60.0)
    assert (cfg.http_keepalive_seconds, cfg.http_max_connections) == (15.0, 1000)
    with pytest.raises(ValueError, match="REVIEWER_HTTP_MAX_CONNECTIONS"):
        load_config({"GITHUB_WEBHOOK_SECRET": "s", "REVIEWER_HTTP_MAX_CONNECTIONS": "0"})
