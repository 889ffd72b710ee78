"""An installation's writes to GitHub are paced (reviewer_app/github/pacing.py): one at a time, a burst back to back,
then at least an interval apart; the review itself goes before bulk work queued ahead of it. The gaps asserted are
lower bounds, the behaviour itself: a pacer never sends early, however slow the machine."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest

from reviewer_app.github.auth import AppCredentials
from reviewer_app.github.client import GitHubClient
from reviewer_app.github.pacing import WritePacer, WritePriority
from reviewer_app.settings.config import load_config
from tests.fakes.github import FakeGitHub, added_file, running
from tests.helpers import eventually

INTERVAL = 0.08
SLACK = 0.01  # the event loop may wake a timer this much early (its clock resolution)
REPO = "octo-org/widgets"


async def send_all(
    pacer: WritePacer, jobs: list[tuple[str, WritePriority]], key: object = 1
) -> list[tuple[str, float]]:
    """Each job takes its turn; returns (name, loop time granted) in the order the turns were granted."""
    loop = asyncio.get_running_loop()
    granted: list[tuple[str, float]] = []

    async def one(name: str, priority: WritePriority) -> None:
        async with pacer.turn(key, priority):
            granted.append((name, loop.time()))
            await asyncio.sleep(0)  # the request, as far as the pacer can tell

    await asyncio.gather(*(one(n, p) for n, p in jobs))
    return granted


def within_bucket(times: list[float], *, burst: int) -> bool:
    """No stretch of writes outran the bucket: from the i-th to the j-th, at most ``burst`` plus one per interval."""
    return all(
        j - i + 1 <= burst + (times[j] - times[i] + SLACK) / INTERVAL
        for i in range(len(times))
        for j in range(i + 1, len(times))
    )


def _async(predicate):
    async def check() -> bool:
        return predicate()

    return check


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:], strict=False)]


async def test_a_burst_goes_at_once_then_one_write_per_interval() -> None:
    pacer = WritePacer(interval=INTERVAL, burst=3)
    granted = await send_all(pacer, [(f"w{i}", WritePriority.BULK) for i in range(7)])
    times = [t for _, t in granted]
    assert times[2] - times[0] < INTERVAL  # the burst: back to back
    assert all(g >= INTERVAL - SLACK for g in gaps(times[2:])), gaps(times)  # then paced
    assert [n for n, _ in granted] == [f"w{i}" for i in range(7)]  # in order within one priority


async def test_the_review_goes_before_bulk_work_queued_ahead_of_it() -> None:
    pacer = WritePacer(interval=INTERVAL, burst=1)
    loop = asyncio.get_running_loop()
    order: list[str] = []

    async def one(name: str, priority: WritePriority) -> None:
        async with pacer.turn(1, priority):
            order.append(name)

    bulk = [asyncio.create_task(one(f"resolve{i}", WritePriority.BULK)) for i in range(4)]
    await asyncio.sleep(0)  # all four queued (the first holds the turn)
    review = asyncio.create_task(one("review", WritePriority.PUBLISH))
    check = asyncio.create_task(one("check run", WritePriority.NORMAL))
    started = loop.time()
    await asyncio.gather(*bulk, review, check)
    assert order[:3] == ["resolve0", "review", "check run"], order
    assert loop.time() - started >= 5 * INTERVAL - SLACK  # six writes, one burst of one: five intervals


async def test_installations_are_paced_apart_and_a_zero_interval_does_not_pace() -> None:
    pacer = WritePacer(interval=INTERVAL, burst=1)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.gather(*(send_all(pacer, [("w", WritePriority.NORMAL)], key=k) for k in range(5)))
    assert loop.time() - started < INTERVAL  # five installations, one write each: nobody waits

    unpaced = WritePacer(interval=0, burst=1)
    started = loop.time()
    await send_all(unpaced, [(f"w{i}", WritePriority.BULK) for i in range(20)])
    assert loop.time() - started < INTERVAL


async def test_a_cancelled_waiter_gives_up_its_place_and_holds_nothing() -> None:
    pacer = WritePacer(interval=INTERVAL, burst=1)
    held = asyncio.Event()
    release = asyncio.Event()

    async def holder() -> None:
        async with pacer.turn(1):
            held.set()
            await release.wait()

    first = asyncio.create_task(holder())
    await held.wait()
    waiting = asyncio.create_task(send_all(pacer, [("gone", WritePriority.PUBLISH)]))
    await eventually(_async(lambda: pacer.queued(1) == 1))
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert pacer.queued(1) == 0
    release.set()
    await first
    assert [n for n, _ in await send_all(pacer, [("next", WritePriority.BULK)])] == ["next"]


def test_pacing_is_on_by_default_and_set_by_two_settings() -> None:
    cfg = load_config({"GITHUB_WEBHOOK_SECRET": "s"})
    assert (cfg.github_write_interval_seconds, cfg.github_write_burst) == (1.0, 3)
    cfg = load_config(
        {
            "GITHUB_WEBHOOK_SECRET": "s",
            "REVIEWER_GITHUB_WRITE_INTERVAL_SECONDS": "0",
            "REVIEWER_GITHUB_WRITE_BURST": "10",
        }
    )
    assert (cfg.github_write_interval_seconds, cfg.github_write_burst) == (0.0, 10)
    with pytest.raises(ValueError, match="REVIEWER_GITHUB_WRITE_BURST"):
        load_config({"GITHUB_WEBHOOK_SECRET": "s", "REVIEWER_GITHUB_WRITE_BURST": "0"})


# -- through the client, against the fake GitHub ----------------------------------------------------------------


@pytest.fixture
async def gh() -> AsyncIterator[tuple[FakeGitHub, GitHubClient]]:
    fake = FakeGitHub()
    inst = fake.add_installation()
    fake.add_repo(REPO, inst.id)
    fake.add_pull(REPO, 1, files=[added_file("src/app.py", [f"line {i}" for i in range(1, 9)])])
    async with running(fake) as url, aiohttp.ClientSession() as session:
        pacer = WritePacer(interval=INTERVAL, burst=2)
        credentials = AppCredentials(str(fake.app_id), fake.private_key)
        yield fake, GitHubClient(session, url, credentials, read_retry_delays=(0, 0), pacer=pacer)


async def test_thread_resolutions_go_out_paced_and_the_review_overtakes_them(gh) -> None:
    fake, c = gh
    inst = next(iter(fake.installations))
    pull = fake.pulls[(REPO, 1)]
    comments = [{"path": "src/app.py", "line": n, "side": "RIGHT", "body": f"finding {n}"} for n in range(1, 7)]
    await c.create_review(inst, REPO, 1, commit_id=pull.head_sha, body="first", comments=comments)
    threads = [t["id"] for t in await c.review_threads(inst, REPO, 1)]
    await asyncio.sleep(2 * INTERVAL)  # the bucket full again: what follows starts with a burst of two
    begun = len(fake.requests)

    resolutions = [asyncio.create_task(c.resolve_review_thread(inst, REPO, t)) for t in threads]
    # The burst went out; the rest wait their turn.
    await eventually(_async(lambda: c.pacer.queued(inst) >= len(threads) - 2), interval=0.002)
    await c.create_review(inst, REPO, 1, commit_id=pull.head_sha, body="second")
    await asyncio.gather(*resolutions)

    writes = [r for r in fake.requests[begun:] if r.method == "POST"]
    kinds = ["review" if r.path.endswith("/reviews") else "resolve" for r in writes]
    assert kinds.index("review") <= 3, kinds  # behind the burst (and at most the write already granted), not last
    assert within_bucket([r.arrived for r in writes], burst=2), gaps([r.arrived for r in writes])
    assert fake.max_concurrent_writes[inst] == 1


async def test_reactions_and_thread_replies_get_turns_under_sustained_check_run_and_answer_writes() -> None:
    # Two writers of check runs and answers keep one NORMAL write always waiting; ten bulk writes wait from the start.
    # Before priorities aged, the bulk writes got 0 turns in 40.
    pacer = WritePacer(interval=0)
    granted: list[WritePriority] = []

    async def write(priority: WritePriority) -> None:
        async with pacer.turn(1, priority):
            granted.append(priority)
            await asyncio.sleep(0)

    async def stream() -> None:
        while len(granted) < 40:
            await write(WritePriority.NORMAL)

    holder = asyncio.Event()

    async def first() -> None:
        async with pacer.turn(1, WritePriority.NORMAL):
            await holder.wait()

    blocking = asyncio.create_task(first())
    await asyncio.sleep(0)
    bulk = [asyncio.create_task(write(WritePriority.BULK)) for _ in range(10)]
    streams = [asyncio.create_task(stream()) for _ in range(2)]
    await eventually(lambda: asyncio.sleep(0, pacer.queued(1) == 12))
    holder.set()
    await eventually(lambda: asyncio.sleep(0, len(granted) >= 40))
    for task in (*streams, *bulk):
        task.cancel()
    await asyncio.gather(blocking, *streams, *bulk, return_exceptions=True)
    assert granted[:40].count(WritePriority.BULK) >= 40 // 5
