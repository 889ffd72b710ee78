"""Cross-host wake-ups: LISTEN on a dedicated PostgreSQL connection, reconnecting when it drops."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import asyncpg

log = logging.getLogger(__name__)

Connect = Callable[[], Awaitable[asyncpg.Connection]]

# A listener learns of a dead TCP connection only when it uses it: probe it this often.
KEEPALIVE_SECONDS = 30.0
RECONNECT_SECONDS = (0.1, 0.5, 1.0, 2.0, 5.0)


class WakeupListener:
    """Calls every subscribed callback on each notification whose payload is ``payload``.

    After a reconnect the callbacks are called once too: notifications sent while the connection was down are lost,
    and a spurious wake-up only costs the dispatcher one empty claim.
    """

    def __init__(self, connect: Connect, channel: str, payload: str, *, keepalive: float = KEEPALIVE_SECONDS) -> None:
        self._connect = connect
        self.channel = channel
        self.payload = payload
        self.keepalive = keepalive
        self.callbacks: list[Callable[[], None]] = []
        self.conn: asyncpg.Connection | None = None
        self.reconnects = 0
        self._lost = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def server_pid(self) -> int | None:
        """The backend process of the listening connection (None while disconnected)."""
        return self.conn.get_server_pid() if self.conn is not None and not self.conn.is_closed() else None

    async def start(self) -> None:
        """Listen now (so a notification committed after this returns is delivered), then keep listening."""
        if self._task is not None:
            return
        try:
            await self._listen()
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.error("wake-up listener: cannot connect yet (%s); retrying in the background", exc)
        self._task = asyncio.create_task(self._supervise(), name="pg-wakeup-listener")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self._drop()

    async def _listen(self) -> None:
        conn = await self._connect()
        self._lost = lost = asyncio.Event()
        conn.add_termination_listener(lambda _conn: lost.set())
        try:
            await conn.add_listener(self.channel, self._on_notify)
        except BaseException:
            conn.terminate()
            raise
        self.conn = conn

    async def _drop(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None and not conn.is_closed():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), timeout=2)
            if not conn.is_closed():
                conn.terminate()

    async def _supervise(self) -> None:
        failures = 0
        while True:
            if self.conn is None:
                try:
                    await self._listen()
                except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                    delay = RECONNECT_SECONDS[min(failures, len(RECONNECT_SECONDS) - 1)]
                    failures += 1
                    log.warning("wake-up listener: reconnect failed (%s); next try in %.1f s", exc, delay)
                    await asyncio.sleep(delay)
                    continue
                failures = 0
                self.reconnects += 1
                log.info("wake-up listener: listening again on %r", self.channel)
                self._fire()
            if await self._connection_lost():
                log.warning("wake-up listener: connection lost; reconnecting")
                await self._drop()

    async def _connection_lost(self) -> bool:
        """Wait until the connection ends, probing it every ``keepalive`` seconds; True once it is gone."""
        try:
            await asyncio.wait_for(self._lost.wait(), timeout=self.keepalive)
            return True
        except TimeoutError:
            pass
        assert self.conn is not None
        try:
            await self.conn.execute("SELECT 1", timeout=max(1.0, self.keepalive / 3))
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
            return True
        return False

    def _on_notify(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        if payload == self.payload:
            self._fire()

    def _fire(self) -> None:
        for callback in list(self.callbacks):
            try:
                callback()
            except Exception:  # a broken subscriber must not stop the others
                log.exception("wake-up callback %r failed", callback)
