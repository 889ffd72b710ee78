"""The anthropic SDK, imported at its first use: it (with the pydantic models under it) is the heaviest import the app
has, and neither `reviewer-app --help` nor `serve` becoming healthy needs it (bench/startup.py measures both).

Modules of the review package name the SDK through ``anthropic`` here; the client the service builds is a
``LazyClient``, built in a worker thread once the server answers, so no import ever blocks the event loop."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import anthropic
else:

    class _SDK:
        """Stands for the ``anthropic`` module; the first attribute read imports it (cheap after that)."""

        def __getattr__(self, name: str) -> Any:
            return getattr(importlib.import_module("anthropic"), name)

    anthropic = _SDK()


class LazyClient:
    """A model client (``anthropic.AsyncAnthropic``) built by ``build`` at its first use, or by ``ready`` in a worker
    thread: the SDK's import is paid off the event loop, and not before the server is up."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build
        self._client: Any = None
        self._building: asyncio.Future[Any] | None = None

    @property
    def built(self) -> bool:
        return self._client is not None

    def get(self) -> Any:
        if self._client is None:
            self._client = self._build()
        return self._client

    async def ready(self) -> None:
        """Build the client in a worker thread (once, however many callers wait); raises what building raised."""
        if self._client is not None:
            return
        if self._building is None:
            self._building = asyncio.ensure_future(asyncio.to_thread(self._build))
        client = await asyncio.shield(self._building)
        if self._client is None:
            self._client = client

    def __getattr__(self, name: str) -> Any:
        # Only for what this class does not define: the SDK client's own attributes (messages, api_key, ...).
        return getattr(self.get(), name)

    async def close(self) -> None:
        """Close the client, one still being built included: its thread is waited for, so nothing it does (the SDK
        logs as it sets up) outlives the owner."""
        if self._client is None and self._building is not None:
            try:
                self._client = await asyncio.shield(self._building)
            except Exception:  # building failed: there is nothing to close
                return
        if self._client is not None:
            await self._client.close()


__all__ = ["anthropic", "LazyClient"]
