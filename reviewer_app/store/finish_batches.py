"""Fenced finishes that arrive while a batch is being written go out together in the next one.

A worker's last write (complete, fail, cancel, supersede) is the drain's commonest statement pair: one job leaves
`running` under its lease token, and its attempt's history row is closed. Written one job at a time, each pair pays
its own statement overhead (and on PostgreSQL its own round trip and commit); written as a batch, each dialect runs
one or two statements for all of them (procedures.finish_together), every job still changed only under its own
token. Both drivers use this: a finish waits at most for the batch in flight before it."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Sequence

from reviewer_app.store.base import StoreUnavailable
from reviewer_app.store.procedures import Finish

WriteBatch = Callable[[Sequence[Finish]], Awaitable[set[str]]]


class FinishBatches:
    """Collects finishes; one task writes them, a batch at a time, with ``write`` (the tokens that held their job)."""

    def __init__(self, write: WriteBatch, *, name: str) -> None:
        self._write = write
        self._name = name
        self._waiting: list[tuple[Finish, asyncio.Future[bool]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def finish(self, item: Finish) -> bool:
        """True if ``item``'s lease still held its job (and the job was finished), after the commit."""
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, done))
        if self._writer is None or self._writer.done():
            # A clean context: the batch is nobody's job in the logs.
            self._writer = asyncio.create_task(self._write_all(), name=self._name, context=contextvars.Context())
        return await done

    async def settle(self, timeout: float) -> None:
        """Wait for the finishes already handed over (callers normally awaited them all before closing)."""
        if self._writer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._writer), timeout=timeout)

    async def _write_all(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, []
            try:
                held = await self._write([item for item, _ in batch])
            except Exception as exc:  # noqa: BLE001 - every waiter gets it (StoreUnavailable, mostly)
                for _, done in batch:
                    if not done.done():
                        done.set_exception(exc)
                continue
            except BaseException:
                for _, done in batch:
                    if not done.done():
                        done.set_exception(StoreUnavailable("store closed while finishing"))
                raise
            for item, done in batch:
                if not done.done():
                    done.set_result(item.lease.token in held)
