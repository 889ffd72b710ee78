"""The lazily built model client: closing it while its build is still running in a worker thread waits for that
build and closes what it built, so no thread outlives the service that owned it."""

from __future__ import annotations

import asyncio
import threading

from reviewer_app.review.sdk import LazyClient


class Built:
    def __init__(self) -> None:
        self.closed = False

    async def close(self) -> None:
        self.closed = True


async def test_closing_during_the_build_waits_for_it_and_closes_what_it_built() -> None:
    started, release = threading.Event(), threading.Event()
    built = Built()

    def build() -> Built:
        started.set()
        assert release.wait(10)
        return built

    lazy = LazyClient(build)
    waiting = asyncio.ensure_future(lazy.ready())
    assert await asyncio.to_thread(started.wait, 10)  # the build is running in its thread, held
    closing = asyncio.ensure_future(lazy.close())
    try:
        # One turn of the loop lets close() start before the build is released (the held event, not time, keeps the
        # build running): without the fix it would finish on that turn with nothing closed.
        await asyncio.sleep(0)
        assert not closing.done()  # the close waits on the build
    finally:
        release.set()
    await asyncio.wait_for(closing, 10)
    await asyncio.wait_for(waiting, 10)
    assert built.closed and lazy.built


async def test_closing_after_a_failed_build_closes_nothing() -> None:
    def build() -> Built:
        raise RuntimeError("no credentials")

    lazy = LazyClient(build)
    ready = asyncio.ensure_future(lazy.ready())
    await lazy.close()
    assert not lazy.built
    assert isinstance(await asyncio.gather(ready, return_exceptions=True), list)
