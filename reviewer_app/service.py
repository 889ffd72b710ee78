"""Wiring: build the store, dispatcher, background duties and web app from a Config, and run them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from dataclasses import dataclass, field

from aiohttp import web

from reviewer_app.config import Config
from reviewer_app.core.retry import RetryPolicy
from reviewer_app.dispatch.context import Runner
from reviewer_app.dispatch.dispatcher import Dispatcher
from reviewer_app.runners import noop_runner
from reviewer_app.store.base import AdmitResult, Store
from reviewer_app.store.factory import make_store
from reviewer_app.store.sqlite import new_owner_id
from reviewer_app.web.app import make_app
from reviewer_app.web.events import make_router
from reviewer_app.web.webhooks import Receiver

log = logging.getLogger(__name__)


@dataclass
class Service:
    cfg: Config
    store: Store
    dispatcher: Dispatcher | None
    app: web.Application
    background: list[asyncio.Task[None]] = field(default_factory=list)

    async def stop(self) -> None:
        if self.dispatcher is not None:
            await self.dispatcher.stop(self.cfg.shutdown_grace_seconds)
        for task in self.background:
            task.cancel()
        await asyncio.gather(*self.background, return_exceptions=True)
        await self.store.close()


def retry_policy(cfg: Config) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=cfg.max_attempts, base_seconds=cfg.retry_base_seconds, max_seconds=cfg.retry_max_seconds
    )


async def build_service(cfg: Config, *, worker: bool = True, runner: Runner | None = None) -> Service:
    store = make_store(cfg)
    await store.open()
    dispatcher = None
    if worker:
        if runner is None:
            runner = noop_runner(cfg.noop_seconds)
        dispatcher = Dispatcher(
            store,
            runner,
            owner=new_owner_id(),
            concurrency=cfg.concurrency,
            lease_seconds=cfg.lease_seconds,
            renew_interval=cfg.renew_interval,
            scan_interval=cfg.scan_seconds,
            retry_policy=retry_policy(cfg),
            clock=time.time,
        )

    def on_admitted(result: AdmitResult) -> None:
        if dispatcher is not None and result.created:
            dispatcher.wake()

    receiver = Receiver(
        store=store,
        router=make_router(),
        secret=None if cfg.insecure_no_signature and not cfg.webhook_secret else cfg.webhook_secret,
        max_body_bytes=cfg.max_body_bytes,
        max_attempts=cfg.max_attempts,
        on_admitted=on_admitted,
    )
    return Service(cfg=cfg, store=store, dispatcher=dispatcher, app=make_app(receiver))


async def serve(cfg: Config, *, worker: bool = True) -> None:
    """Run until SIGTERM/SIGINT: answer webhooks, drain the backlog, then shut down gracefully."""
    if cfg.insecure_no_signature and not cfg.webhook_secret:
        log.warning("REVIEWER_INSECURE_NO_SIGNATURE is set: webhooks are accepted WITHOUT signature checks")
    svc = await build_service(cfg, worker=worker)
    runner = web.AppRunner(svc.app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, cfg.host, cfg.port)
    await site.start()
    if svc.dispatcher is not None:
        svc.dispatcher.start()
    log.info("reviewer-app listening on http://%s:%s (database %s)", cfg.host, cfg.port, svc.store.engine)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down: no new claims, %.0f s grace for running jobs", cfg.shutdown_grace_seconds)
    await site.stop()
    await svc.stop()
    await runner.cleanup()
    log.info("stopped")
