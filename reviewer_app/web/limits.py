"""Limits of the HTTP server against slow and idle connections: a deadline for a request's headers, a cap on open
connections (aiohttp has neither), and the idle keep-alive timeout aiohttp takes (its default is an hour).

A connection that sends its headers a byte at a time, or opens and sends nothing, holds a socket and a little
memory; enough of them starve the server of file descriptors. Headers must be complete within ``header_seconds`` of
the connection's start; past ``max_connections`` open ones, a new connection is closed at once. A webhook's body has
its own deadline in the receiver (``REVIEWER_HTTP_BODY_TIMEOUT_SECONDS``).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from collections.abc import Callable
from typing import Any

from aiohttp import web

from reviewer_app.settings.config import Config

log = logging.getLogger(__name__)

_END_OF_HEADERS = b"\r\n\r\n"
_HEAD_LIMIT = 64 * 1024  # bytes kept to look for the end of the headers (aiohttp refuses larger headers itself)


class ConnectionGuard:
    """Wraps the server's protocol factory: each connection's headers on a deadline, the open ones counted."""

    def __init__(self, *, header_seconds: float, max_connections: int) -> None:
        self.header_seconds = header_seconds
        self.max_connections = max_connections
        self.open = 0
        self.refused = 0
        self.timed_out = 0

    def wrap(self, factory: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        return lambda: _Guarded(self, factory())


class _Guarded(asyncio.Protocol):
    """Passes every event to aiohttp's handler; closes the connection when its first request's headers are late."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self.guard, self.inner = guard, inner
        self.transport: asyncio.BaseTransport | None = None
        self.head = bytearray()
        self.timer: asyncio.TimerHandle | None = None
        self.counted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.inner.connection_made(transport)
        if self.guard.open >= self.guard.max_connections:
            self.guard.refused += 1
            if self.guard.refused == 1 or self.guard.refused % 1000 == 0:
                log.warning("http: %d open connections, the cap: new ones are closed", self.guard.open)
            transport.close()
            return
        self.guard.open += 1
        self.counted = True
        if self.guard.header_seconds > 0:
            self.timer = asyncio.get_running_loop().call_later(self.guard.header_seconds, self._late)

    def _late(self) -> None:
        self.timer = None
        self.guard.timed_out += 1
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.timer is not None:
            self.head += data[:_HEAD_LIMIT]
            if _END_OF_HEADERS in self.head:
                self.timer.cancel()
                self.timer, self.head = None, bytearray()
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.counted:
            self.guard.open -= 1
            self.counted = False
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


class GuardedSite(web.TCPSite):
    """aiohttp's TCP site with a ConnectionGuard in front of its protocol factory."""

    def __init__(self, runner: web.BaseRunner, host: str | None, port: int | None, *, guard: ConnectionGuard) -> None:
        super().__init__(runner, host, port)
        self._guard = guard

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_server(
            self._guard.wrap(server),
            self._host,
            self._port,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            reuse_port=self._reuse_port,
        )
        sockets: Any = getattr(self._server, "sockets", None) or []
        if sockets:
            self._bound_port = sockets[0].getsockname()[1]


class CannotListen(RuntimeError):
    """The server could not bind its address (in use, not this host's, not permitted): a one-line reason."""


async def start_site(app: web.Application, cfg: Config, host: str, port: int) -> tuple[web.AppRunner, web.TCPSite]:
    """The app served on ``host``:``port`` within the HTTP limits (web/limits.py): headers on a deadline, idle
    keep-alive connections closed, open connections capped. Raises CannotListen when the address cannot be bound."""
    runner = web.AppRunner(app, access_log=None, keepalive_timeout=cfg.http_keepalive_seconds)
    await runner.setup()
    guard = ConnectionGuard(header_seconds=cfg.http_header_timeout_seconds, max_connections=cfg.http_max_connections)
    site = GuardedSite(runner, host, port, guard=guard)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        hint = " (is another reviewer-app running? set --port or PORT)" if exc.errno == errno.EADDRINUSE else ""
        raise CannotListen(f"cannot listen on {host}:{port}: {reason}{hint}") from None
    except BaseException:
        await runner.cleanup()
        raise
    return runner, site
