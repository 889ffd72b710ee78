"""Both fakes served from one background thread, for tests that run the app as a subprocess."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.github import FakeGitHub, running

T = TypeVar("T")


class FakesThread:
    """Serves a FakeGitHub and a FakeAnthropic on loopback; ``call`` runs a function on their loop."""

    def __init__(self, github: FakeGitHub, anthropic: FakeAnthropic) -> None:
        self.github = github
        self.anthropic = anthropic
        self.github_url = ""
        self.anthropic_url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), name="fakes", daemon=True)

    def __enter__(self) -> FakesThread:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the fakes did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        assert self._loop is not None

        async def invoke() -> T:
            return fn(*args, **kwargs)

        return asyncio.run_coroutine_threadsafe(invoke(), self._loop).result(10)

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with running(self.github) as gh, self.anthropic.serve() as an:
            self.github_url, self.anthropic_url = gh, an
            self._ready.set()
            await self._stop.wait()
