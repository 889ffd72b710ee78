"""Runners the dispatcher can be given: the review pipeline, or a no-op for smoke tests and benchmarks."""

from __future__ import annotations

import asyncio

from reviewer_app.dispatch.context import JobContext, Runner


def noop_runner(seconds: float = 0.0) -> Runner:
    async def run(ctx: JobContext) -> str:
        if seconds:
            await asyncio.sleep(seconds)
        return "no-op"

    return run
