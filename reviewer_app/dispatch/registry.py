"""The worker registry's client side: this process registers itself, beats, and deregisters on a clean stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import replace

from reviewer_app.core.queues import HOUSEKEEPING
from reviewer_app.dispatch.context import Clock
from reviewer_app.dispatch.dispatcher import Dispatcher
from reviewer_app.dispatch.duty import Slots
from reviewer_app.store.base import Store, StoreUnavailable, WorkerInfo

log = logging.getLogger(__name__)


def app_version() -> str:
    """The installed version (reviewer_app.__version__, from pyproject.toml through the package's metadata)."""
    from reviewer_app import __version__

    return __version__


class Registration:
    """One row of the workers table, kept fresh: written at start and on every beat (the lease-renewal interval),
    deleted on a clean stop. A process that stops beating (SIGKILL, a crash, a lost network) stays listed, and is
    shown as gone once its heartbeat is older than its lease: then its running jobs' leases are expiring too, and
    the rescuer hands them back."""

    def __init__(
        self,
        store: Store,
        *,
        worker_id: str,
        role: str,
        slots: int,
        lease_seconds: float,
        interval: float,
        clock: Clock,
        jobs_running: Callable[[], int] = lambda: 0,
        queues: Callable[[], dict[str, dict[str, int]]] = dict,
    ) -> None:
        self.store = store
        self.interval = interval
        self.clock = clock
        self.jobs_running = jobs_running
        self.queues = queues
        now = clock()
        self.info = WorkerInfo(
            id=worker_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            role=role,
            version=app_version(),
            slots=slots,
            lease_seconds=lease_seconds,
            started_at=now,
            heartbeat_at=now,
        )
        self.beats = 0

    async def beat(self) -> None:
        """Register, or refresh the heartbeat, the number of jobs running here and each queue's busy slots."""
        self.info = replace(
            self.info, heartbeat_at=self.clock(), jobs_running=self.jobs_running(), queues=self.queues()
        )
        await self.store.register_worker(self.info)
        self.beats += 1

    async def run(self) -> None:
        """Beat now and every ``interval`` until cancelled; a beat the database refuses is tried at the next."""
        while True:
            try:
                await self.beat()
            except StoreUnavailable as exc:
                log.warning("worker registry: heartbeat not recorded, trying again next beat: %s", exc)
            except Exception:  # noqa: BLE001 - the heartbeat must outlive a bug in one round
                log.exception("worker registry: heartbeat failed unexpectedly")
            await asyncio.sleep(self.interval)

    async def deregister(self) -> None:
        """A clean stop: the row goes (a process that cannot reach the database stays listed, and turns gone)."""
        with contextlib.suppress(StoreUnavailable):
            await self.store.deregister_worker(self.info.id)


def queue_loads_of(dispatcher: Dispatcher | None, housekeeping: Slots | None) -> dict[str, dict[str, int]]:
    """A process's slots and busy slots per queue, as its registration records them on each beat."""
    loads = dispatcher.loads() if dispatcher is not None else {}
    if housekeeping is not None:
        loads[HOUSEKEEPING] = {"slots": housekeeping.size, "running": housekeeping.running}
    return loads
