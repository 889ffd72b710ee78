"""Pacing of an installation's mutative requests to GitHub.

GitHub asks integrations to make content-creating requests one at a time, and to wait at least a second between
mutative requests when they make many (REST best practices; the GraphQL documentation says the same of mutations),
or secondary rate limits follow, and with them the risk of a banned integration. So an installation's writes go out
one at a time, through a token bucket: up to ``burst`` back to back, then one per ``interval``. Who goes next is
chosen when the bucket allows a send, by priority: the review itself never waits behind bulk work (thread
resolutions, reactions, check-run refreshes) queued before it. Priorities age: a priority passed over ``AGING_TURNS``
times moves up one step, so under a steady stream of check-run and answer writes reactions and thread replies still
get one turn in every few, and a backlog of them takes no more (``next_up`` decides, pure).

One pacer serves one process. Several hosts pace their own writes each; GitHub's secondary limits, when they come,
are handled as rate limits (the job waits).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum


class WritePriority(IntEnum):
    """Lower goes first."""

    PUBLISH = 0  # the review itself: what a person is waiting for
    NORMAL = 1  # a check run's lifecycle, an answer, a comment
    BULK = 2  # thread resolutions and replies, reactions, check-run refreshes


# A waiting write moves up one priority for each this many turns granted to others since it came, or since a write of
# its priority last had a turn, whichever is later.
AGING_TURNS = 4


@dataclass(frozen=True)
class Waiting:
    """A write waiting for its turn: its priority, its place in arrival order, and the lane's grants when it came."""

    priority: int
    order: int
    grants_at_arrival: int


def next_up(
    waiting: Sequence[Waiting], grants: int, last_served: Mapping[int, int], *, aging_turns: int = AGING_TURNS
) -> int:
    """The index of the write that goes next, ``grants`` turns having been granted on the lane so far and
    ``last_served`` saying at which grant each priority last had a turn: the lowest priority after aging (one step up
    per ``aging_turns`` turns it was passed over), then the earliest arrival."""

    def rank(i: int) -> tuple[int, int]:
        w = waiting[i]
        passed_over = grants - max(w.grants_at_arrival, last_served.get(w.priority, 0))
        return w.priority - passed_over // aging_turns, w.order

    return min(range(len(waiting)), key=rank)


@dataclass
class _Lane:
    tokens: float
    stamp: float
    holder: bool = False
    waiters: list[tuple[Waiting, asyncio.Future[None]]] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None
    grants: int = 0
    last_served: dict[int, int] = field(default_factory=dict)  # priority -> the grant count after its last turn


class WritePacer:
    """One installation's writes, one at a time, at most ``burst`` back to back and then ``interval`` seconds apart.

    ``interval`` 0 turns pacing off (writes still go one at a time).
    """

    def __init__(self, *, interval: float = 1.0, burst: int = 3) -> None:
        if interval < 0 or burst < 1:
            raise ValueError("interval must be >= 0 and burst >= 1")
        self.interval = interval
        self.burst = burst
        self._lanes: dict[Hashable, _Lane] = {}
        self._order = itertools.count()

    def queued(self, key: Hashable) -> int:
        """Writes of ``key`` waiting for their turn (the one being sent not counted)."""
        lane = self._lanes.get(key)
        return 0 if lane is None else sum(1 for _, f in lane.waiters if not f.done())

    @contextlib.asynccontextmanager
    async def turn(self, key: Hashable, priority: WritePriority = WritePriority.NORMAL) -> AsyncIterator[None]:
        """Hold ``key``'s write turn while the request is sent."""
        loop = asyncio.get_running_loop()
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane(tokens=float(self.burst), stamp=loop.time())
        granted: asyncio.Future[None] = loop.create_future()
        lane.waiters.append((Waiting(int(priority), next(self._order), lane.grants), granted))
        self._dispatch(lane)
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self._release(lane)  # granted as it was cancelled: hand the turn on
            else:
                granted.cancel()  # left in the list; _dispatch drops it
                self._dispatch(lane)
            raise
        try:
            yield
        finally:
            self._release(lane)

    def _release(self, lane: _Lane) -> None:
        lane.holder = False
        self._dispatch(lane)

    def _dispatch(self, lane: _Lane) -> None:
        if lane.holder or lane.timer is not None:
            return
        lane.waiters = [(w, f) for w, f in lane.waiters if not f.done()]
        if not lane.waiters:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self.interval > 0:
            lane.tokens = min(float(self.burst), lane.tokens + (now - lane.stamp) / self.interval)
            lane.stamp = now
            if lane.tokens < 1.0:
                lane.timer = loop.call_at(now + (1.0 - lane.tokens) * self.interval, self._fire, lane)
                return
            lane.tokens -= 1.0
        chosen, granted = lane.waiters.pop(next_up([w for w, _ in lane.waiters], lane.grants, lane.last_served))
        lane.grants += 1
        lane.last_served[chosen.priority] = lane.grants
        lane.holder = True
        granted.set_result(None)

    def _fire(self, lane: _Lane) -> None:
        lane.timer = None
        self._dispatch(lane)
