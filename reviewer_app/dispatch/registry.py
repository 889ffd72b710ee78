"""The worker registry's client side: this process registers itself, beats, deregisters on a clean stop, and ends
the leases and claims of this host's processes that are known dead."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable, Iterable
from dataclasses import replace

from reviewer_app.core.queues import HOUSEKEEPING
from reviewer_app.dispatch.context import Clock
from reviewer_app.dispatch.dispatcher import Dispatcher
from reviewer_app.dispatch.duty import Slots
from reviewer_app.store.base import Store, StoreUnavailable, WorkerInfo, is_gone

log = logging.getLogger(__name__)


def app_version() -> str:
    """The installed version (reviewer_app.__version__, from pyproject.toml through the package's metadata)."""
    from reviewer_app import __version__

    return __version__


# How long a request a dead process sent may still be in flight at GitHub: the client's request timeout
# (github/api_transport.py). Its jobs are rescued after that, not at once: the next attempt must find a review it
# posted by its marker.
IN_FLIGHT_SECONDS = 30.0

# The registrations beating in this Python process (a test may run several services in one process; a process runs
# one). A registration of this pid that is not among them is a former life: a service abandoned without its clean stop.
_BEATING_HERE: set[str] = set()


def pid_running(pid: int) -> bool:
    """Whether a process with ``pid`` runs on this host (one we may not signal runs too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def dead_on_this_host(
    me: WorkerInfo,
    registered: Iterable[WorkerInfo],
    *,
    now: float,
    beating_here: set[str],
    running: Callable[[int], bool],
) -> list[WorkerInfo]:
    """The registered processes of ``me``'s host that are known dead: the host restarted them (``me`` has their pid
    now: a container's process is pid 1 in each life) or their pid runs nothing any more. A pid that runs again (an
    unrelated process took it) proves nothing: that process is left to its heartbeat. One already gone (its heartbeat
    older than its lease, or ended here before) is not named again. Pure but for ``running``.

    Host names must be unique among live hosts (a machine's or a pod's name is): two containers sharing one host name
    but not one process table would take each other for dead."""
    dead = []
    for other in registered:
        if other.id == me.id or other.host != me.host or is_gone(other, now):
            continue
        if other.pid == me.pid:
            if other.id not in beating_here:
                dead.append(other)
        elif not running(other.pid):
            dead.append(other)
    return dead


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
        _BEATING_HERE.add(self.info.id)
        self.beats += 1
        await self.void_dead_on_this_host()

    async def void_dead_on_this_host(self) -> list[str]:
        """End what this host's dead processes held (a restart, or a kill -9 next to this one): their duties' passes,
        check-run creations and redeliveries are taken over now, their jobs once nothing they sent can still be in
        flight, not when their leases run out. Their ids."""
        now = self.clock()
        registered = [status.info for status in await self.store.workers(now=now)]
        dead = dead_on_this_host(self.info, registered, now=now, beating_here=_BEATING_HERE, running=pid_running)
        for gone in dead:
            now = self.clock()
            voided = await self.store.void_holder(gone.id, now=now, jobs_at=now + IN_FLIGHT_SECONDS)
            log.warning(
                "worker registry: %s (pid %s on this host) is dead; its %d lease(s) and claim(s) are taken over "
                "(its duties' and claims' now, its jobs' in %.0f s)",
                gone.id,
                gone.pid,
                voided,
                IN_FLIGHT_SECONDS,
            )
        return [gone.id for gone in dead]

    async def run(self, *, after_first_beat: Callable[[], None] | None = None) -> None:
        """Beat now and every ``interval`` until cancelled; a beat the database refuses is tried at the next.
        ``after_first_beat`` is called once the first beat has been tried."""
        try:
            while True:
                await self.beat_once()
                if after_first_beat is not None:
                    after_first_beat()
                    after_first_beat = None
                await asyncio.sleep(self.interval)
        finally:
            _BEATING_HERE.discard(self.info.id)  # stopped, cleanly or not: no longer alive in this process

    async def beat_once(self) -> None:
        """One beat; a failure is logged, never raised."""
        try:
            await self.beat()
        except StoreUnavailable as exc:
            log.warning("worker registry: heartbeat not recorded, trying again next beat: %s", exc)
        except Exception:  # noqa: BLE001 - the heartbeat must outlive a bug in one round
            log.exception("worker registry: heartbeat failed unexpectedly")

    async def deregister(self) -> None:
        """A clean stop: what this process still holds but its jobs (a pass or a check run's creation cut short) is
        free at once, and the row goes (a process that cannot reach the database stays listed, and turns gone). Its
        jobs were handed back, or keep their leases while a write of theirs may still be in flight."""
        _BEATING_HERE.discard(self.info.id)
        with contextlib.suppress(StoreUnavailable):
            await self.store.void_holder(self.info.id, now=self.clock(), jobs_at=None)
            await self.store.deregister_worker(self.info.id)


def queue_loads_of(dispatcher: Dispatcher | None, housekeeping: Slots | None) -> dict[str, dict[str, int]]:
    """A process's slots and busy slots per queue, as its registration records them on each beat."""
    loads = dispatcher.loads() if dispatcher is not None else {}
    if housekeeping is not None:
        loads[HOUSEKEEPING] = {"slots": housekeeping.size, "running": housekeeping.running}
    return loads
