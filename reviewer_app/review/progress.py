"""What `reviewer-app review` shows on stderr while it works: each step with the time since the start, and while a
step waits (on the model), the seconds ticking on the same line. Only on a terminal, and never with --quiet: a hook,
a CI log or a pipe gets the result and the one-line account, nothing else."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TextIO, TypeVar

from reviewer_app.core.review_model import ModelAnswer
from reviewer_app.review.claude import ClaudeReviewer, UsageMeter
from reviewer_app.review.model_client import ModelClient
from reviewer_app.settings.config import Config

T = TypeVar("T")
TICK_SECONDS = 1.0


class Progress:
    """Steps written to ``stream`` when ``shown``; ``step`` is safe to call either way."""

    def __init__(self, stream: TextIO, *, shown: bool, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.shown = shown
        self.clock = clock
        self.started = clock()
        self.current = ""
        self._ticking = False

    def elapsed(self) -> float:
        return self.clock() - self.started

    def step(self, what: str) -> None:
        self.current = what
        if self.shown:
            self._write(f"{self.elapsed():5.1f}s  {what}", done=True)

    def _write(self, text: str, *, done: bool) -> None:
        # \r and the erase-line escape redraw the ticking line; a finished step ends with a newline.
        prefix = "\r\x1b[2K" if self._ticking else ""
        self._ticking = not done
        self.stream.write(f"{prefix}reviewer-app: {text}{'' if not done else chr(10)}")
        self.stream.flush()

    @contextlib.asynccontextmanager
    async def ticking(self) -> AsyncIterator[None]:
        """While the block runs, the current step's seconds tick on one line (a slow model is not a hung one)."""
        if not self.shown:
            yield
            return

        async def tick() -> None:
            since = self.clock()
            while True:
                await asyncio.sleep(TICK_SECONDS)  # a display's pace, not synchronisation
                self._write(f"{self.elapsed():5.1f}s  {self.current} ({self.clock() - since:.0f} s)", done=False)

        task = asyncio.create_task(tick())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if self._ticking:
                self.stream.write("\r\x1b[2K")
                self.stream.flush()
                self._ticking = False


class AnnouncedReviewer(ClaudeReviewer):
    """A ClaudeReviewer whose requests are steps of a Progress: the review's parts, then the verification."""

    def __init__(self, client: ModelClient, model: str, *, progress: Progress, role: str, **kwargs: Any) -> None:
        super().__init__(client, model, **kwargs)
        self.progress = progress
        self.role = role  # "review" or "verification"
        self.asked = 0

    async def review(self, user_blocks: str | Sequence[str], **kwargs: Any) -> ModelAnswer:
        self.asked += 1
        self.progress.step(f"asking {self.model} (request {self.asked})")
        async with self.progress.ticking():
            return await super().review(user_blocks, **kwargs)

    async def ask_tool(
        self, system: str, user: str, tool: dict[str, Any], parse: Callable[[Any], T], *, meter: UsageMeter
    ) -> tuple[T, str]:
        what = "verifying the findings" if self.role == "verification" else "asking"
        self.progress.step(f"{what} with {self.model}")
        async with self.progress.ticking():
            return await super().ask_tool(system, user, tool, parse, meter=meter)


def reviewers(cfg: Config, client: ModelClient, progress: Progress) -> tuple[ClaudeReviewer, ClaudeReviewer]:
    """The review's model and the verification's, built alike from the configuration, each announcing its requests."""
    common = {
        "provider": cfg.provider,
        "max_output_tokens": cfg.max_output_tokens,
        "malformed_retries": cfg.malformed_retries,
        "progress": progress,
    }
    return (
        AnnouncedReviewer(client, cfg.model, role="review", **common),
        AnnouncedReviewer(client, cfg.verify_model, role="verification", **common),
    )
