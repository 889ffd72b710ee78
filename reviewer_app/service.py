"""Wiring: build the store, dispatcher, background duties and web app from a Config, and run them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from reviewer_app.admin import github_web_url
from reviewer_app.core.admission import Guard
from reviewer_app.core.providers import ANTHROPIC
from reviewer_app.core.retry import RetryPolicy
from reviewer_app.dispatch.cleaner import DAY, Cleaner
from reviewer_app.dispatch.context import Runner
from reviewer_app.dispatch.dispatcher import Dispatcher
from reviewer_app.dispatch.duty import PeriodicDuty, Slots
from reviewer_app.dispatch.registry import Registration, queue_loads_of
from reviewer_app.github.client import GitHubClient
from reviewer_app.github.outbox import OutboxSender
from reviewer_app.github.recovery import Recovery
from reviewer_app.github.team_commands import LearningLimits
from reviewer_app.metrics import Metrics
from reviewer_app.review.sdk import LazyClient
from reviewer_app.review.signal_pass import SignalPass
from reviewer_app.review_stack import ReviewStack, build_review_stack, model_client
from reviewer_app.runners import noop_runner
from reviewer_app.settings.config import Config, cookies_secure, why_no_reviews
from reviewer_app.store.base import AdmitResult, Store, new_owner_id
from reviewer_app.store.factory import make_store
from reviewer_app.web.app import healthz, make_app
from reviewer_app.web.dashboard import Dashboard
from reviewer_app.web.events import make_router
from reviewer_app.web.health import Probes
from reviewer_app.web.limits import start_site
from reviewer_app.web.webhooks import Receiver

log = logging.getLogger(__name__)


@dataclass
class Service:
    cfg: Config
    store: Store
    dispatcher: Dispatcher | None
    app: web.Application
    check_sync: PeriodicDuty | None = None
    session: aiohttp.ClientSession | None = None
    outbox: PeriodicDuty | None = None
    receiver: Receiver | None = None
    github: GitHubClient | None = None
    metrics: Metrics | None = None
    cleaner: Cleaner | None = None
    recovery: Recovery | None = None
    model_client: LazyClient | None = (
        None  # built in a worker thread at first use, or once the server answers (review/sdk.py)
    )
    registration: Registration | None = None
    batch_poll: PeriodicDuty | None = None  # the Message Batches duty (review/batches.py)
    housekeeping: Slots | None = None  # the background passes' own slots (core/queues.py)
    signal_pass: PeriodicDuty | None = None  # the team's reactions, read on a timer (review/signal_pass.py)
    background: list[asyncio.Task[None]] = field(default_factory=list)
    stopping: bool = False  # set by stop(): work that was to start after the first beat does not start

    def start_background(self) -> None:
        if self.registration is None:
            self._start_work()
        else:
            # The first beat registers this process before it holds anything (a holder that dies unregistered could not
            # be known dead), and ends what this host's dead processes held (a restart after kill -9): the duties'
            # first passes take their leases at once. The work starts after it.
            beats = self.registration.run(after_first_beat=self._start_work)
            self.background.append(asyncio.create_task(beats, name="worker-registry"))
        if self.github is not None and self.receiver is not None:
            self.background.append(asyncio.create_task(self._learn_identity(), name="identity"))
        if self.model_client is not None:
            self.background.append(asyncio.create_task(self._load_model_client(), name="model-client"))

    def _start_work(self) -> None:
        if self.stopping:
            return
        if self.dispatcher is not None:
            self.dispatcher.start()
        if self.check_sync is not None:
            self.background.append(asyncio.create_task(self.check_sync.run(), name="check-sync"))
        if self.outbox is not None:
            self.background.append(asyncio.create_task(self.outbox.run(), name="outbox"))
        if self.cleaner is not None:
            pruning = PeriodicDuty(
                "cleaner",
                self.cleaner.run_once,
                interval=self.cleaner.interval,
                clock=time.time,
                slots=self.housekeeping,
            )
            self.background.append(asyncio.create_task(pruning.run(), name="cleaner"))
        if self.recovery is not None:
            self.background.append(asyncio.create_task(self.recovery.run(), name="recovery"))
        if self.batch_poll is not None:
            self.background.append(asyncio.create_task(self.batch_poll.run(), name="batches"))
        if self.signal_pass is not None:
            self.background.append(asyncio.create_task(self.signal_pass.run(), name="signals"))

    async def _load_model_client(self) -> None:
        """The SDK's import and the client, off the event loop and after start-up; a failure is said once here, and
        each job that needs the client meets it as its error."""
        assert self.model_client is not None
        try:
            await self.model_client.ready()
        except Exception as exc:  # noqa: BLE001 - reported; the jobs retry and fail with it
            log.error("the model client could not be built: %s", exc)

    async def _learn_identity(self) -> None:
        """Learn the app's slug (for `@slug review` and to know the bot's own comments), retrying until known."""
        assert self.github is not None and self.receiver is not None
        delay = 1.0
        while True:
            try:
                info = await self.github.app_info()
                self.receiver.app_slug = str(info.get("slug") or "")
                log.info("GitHub App identity: %s[bot]", self.receiver.app_slug)
                return
            except Exception as exc:  # noqa: BLE001 - keep trying; commands by `/review` work meanwhile
                log.warning("cannot read the GitHub App identity yet (%s); retrying in %.0f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 300)

    async def stop(self) -> None:
        self.stopping = True
        if self.dispatcher is not None:
            await self.dispatcher.stop(self.cfg.shutdown_grace_seconds)
        if self.check_sync is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.check_sync.run_pass(), timeout=5)
        for task in self.background:
            task.cancel()
        await asyncio.gather(*self.background, return_exceptions=True)
        if self.registration is not None:
            await self.registration.deregister()
        if self.session is not None:
            await self.session.close()
        if self.model_client is not None:
            # Closed while the loop runs: left to the garbage collector, its connection pool's close is scheduled on
            # a closed loop and logged as an error in whatever runs then.
            await self.model_client.close()
        await self.store.close()


def retry_policy(cfg: Config) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=cfg.max_attempts, base_seconds=cfg.retry_base_seconds, max_seconds=cfg.retry_max_seconds
    )


def make_health_app(probes: Probes) -> web.Application:
    """A worker's optional health port: /healthz, /readyz and /metrics, no webhook route."""
    app = web.Application()
    app.router.add_get("/healthz", healthz)
    probes.register(app)
    return app


async def build_service(
    cfg: Config, *, worker: bool = True, receive: bool = True, runner: Runner | None = None
) -> Service:
    """``receive=False`` (`reviewer-app worker`): no webhook route; the app serves only health and metrics."""
    # The model client first. The Claude API's is built when first needed (the SDK's import is the heaviest the app
    # has: bench/startup.py); Bedrock's and Vertex AI's are built now, so one that cannot be built (no region, no
    # credentials) stops the start before anything is opened.
    client = None
    if cfg.runner == "review" and why_no_reviews(cfg) is None:
        client = LazyClient(lambda: model_client(cfg))
        if cfg.provider.name != ANTHROPIC:
            client.get()
    store = make_store(cfg)
    try:
        await store.open()
        try:
            return await _assemble(cfg, store, client, worker=worker, receive=receive, runner=runner)
        except BaseException:
            await store.close()  # an open store's threads would keep the process from exiting
            raise
    except BaseException:
        if client is not None:
            await client.close()
        raise


async def _assemble(
    cfg: Config, store: Store, client: LazyClient | None, *, worker: bool, receive: bool, runner: Runner | None
) -> Service:
    metrics = Metrics(store, clock=time.time)
    dispatcher = None
    stack: ReviewStack | None = None
    check_sync: PeriodicDuty | None = None
    outbox: PeriodicDuty | None = None
    batch_poll: PeriodicDuty | None = None
    signal_pass: PeriodicDuty | None = None
    no_reviews = why_no_reviews(cfg)
    housekeeping = Slots(cfg.housekeeping_concurrency)
    # This process, as the holder of every lease and claim it takes (jobs, duties, check-run creation, redeliveries)
    # and in the worker registry: once it is known dead, all of them end at once (dispatch/registry.py).
    process_id = new_owner_id()
    if client is not None:
        stack = build_review_stack(cfg, store, metrics, client, owner=process_id)
    if worker and receive and runner is None and no_reviews is not None:
        # Named once, and only what is missing: a configured App is not reported as missing with the model key.
        log.warning(
            "%s: webhooks are admitted and kept, but no review runs until it is set and the app restarted", no_reviews
        )
    if worker and runner is None:
        if cfg.runner == "noop":
            runner = noop_runner(cfg.noop_seconds)
        elif stack is not None:
            runner = stack.runner()
            # One host at a time per pass (a duty lease in the database): no two hosts create the same check run
            # or send the same reaction. Check runs and the outbox are what people see: they never wait for a
            # housekeeping slot behind a long sweep, redelivery or signal pass (each runs one pass at a time).
            duty_owner = process_id
            check_sync = PeriodicDuty(
                "check-sync",
                stack.checks.run_once,
                interval=cfg.check_sync_seconds,
                clock=time.time,
                store=store,
                owner=duty_owner,
            )
            sender = OutboxSender(
                stack.github,
                store,
                clock=time.time,
                learnings=LearningLimits(cfg.learnings_per_repo, cfg.learning_max_chars),
            )
            outbox = PeriodicDuty(
                "outbox",
                sender.run_once,
                interval=cfg.check_sync_seconds,
                clock=time.time,
                store=store,
                owner=duty_owner,
            )
            # One host at a time asks about batches; a result is recorded once whichever host reads it.
            batch_poll = PeriodicDuty(
                "batches",
                stack.batch_pass,
                interval=cfg.batch_poll_seconds,
                clock=time.time,
                store=store,
                owner=duty_owner,
                slots=housekeeping,
            )
            if cfg.signal_pass_seconds > 0:  # the team's reactions: GitHub sends no webhook for them
                reactions = SignalPass(stack.pipeline.signals, store, clock=time.time).run_once
                every = cfg.signal_pass_seconds
                signal_pass = PeriodicDuty(
                    "signals",
                    reactions,
                    interval=every,
                    clock=time.time,
                    store=store,
                    owner=duty_owner,
                    slots=housekeeping,
                )
    if worker and runner is not None:
        dispatcher = Dispatcher(
            store,
            runner,
            owner=process_id,
            concurrency=cfg.concurrency,
            answer_slots=cfg.answer_concurrency,
            lease_seconds=cfg.lease_seconds,
            renew_interval=cfg.renew_interval,
            scan_interval=cfg.scan_seconds,
            job_timeout=cfg.job_timeout_seconds,
            retry_policy=retry_policy(cfg),
            clock=time.time,
            on_finished=(lambda _job_id: check_sync.wake()) if check_sync is not None else None,
            metrics=metrics,
        )
        # Work admitted or retried by another host (PostgreSQL NOTIFY) starts here without a polling delay.
        await store.subscribe_wakeups(dispatcher.wake)

    def on_admitted(result: AdmitResult) -> None:
        if dispatcher is not None and result.created:
            dispatcher.wake()
        if check_sync is not None:
            check_sync.wake()
        if outbox is not None:
            outbox.wake()
        if result.installation_gone is not None and stack is not None:
            stack.github.tokens.invalidate(result.installation_gone)
        if result.outcome == "installation" and result.installation_gone is None and recovery is not None:
            recovery.wake_sweep()  # an installation or repository is back: its open heads are owed reviews

    guard = Guard(
        reviews_per_day=cfg.max_reviews_per_day,
        manual_per_pr_hour=cfg.max_manual_per_pr_hour,
        author_per_day=cfg.max_auto_per_author_day,
        replies_per_thread_hour=cfg.max_replies_per_thread_hour,
        answers_per_day=cfg.max_answers_per_day,
        answers_per_asker_day=cfg.max_answers_per_asker_day,
    )
    receiver: Receiver | None = None
    if receive:
        receiver = Receiver(
            store=store,
            router=make_router(),
            secret=None if cfg.insecure_no_signature and not cfg.webhook_secret else cfg.webhook_secret,
            max_body_bytes=cfg.max_body_bytes,
            max_attempts=cfg.max_attempts,
            debounce_seconds=cfg.debounce_seconds,
            app_id=int(cfg.app_id) if cfg.app_id else None,
            guard=guard,
            on_admitted=on_admitted,
            metrics=metrics,
            replay_window_seconds=cfg.retention_days * 86400,
            body_timeout_seconds=cfg.http_body_timeout_seconds,
        )
    probes = Probes(
        store,
        workers_running=(lambda: dispatcher.running) if dispatcher is not None else None,
        metrics=metrics,
        metrics_token=cfg.metrics_token,
        # A process meant to run reviews that cannot is not ready: it would take webhooks it never reviews.
        cannot_work=f"no review can run: {no_reviews}" if worker and runner is None and no_reviews else None,
    )
    cleaner = None
    if worker and cfg.retention_days > 0:
        cleaner = Cleaner(store, retention_seconds=cfg.retention_days * DAY, clock=time.time)
    recovery = None
    if check_sync is not None and stack is not None and (cfg.recovery_seconds > 0 or cfg.sweep_seconds > 0):
        # Missed webhooks: redelivery of failed ones, and a sweep of open PRs (safe on every host at once).
        recovery = Recovery(
            stack.github,
            store,
            owner=process_id,
            clock=time.time,
            recovery_interval=cfg.recovery_seconds,
            sweep_interval=cfg.sweep_seconds,
            window_days=cfg.delivery_window_days,
            max_attempts=cfg.max_attempts,
            guard=guard,
            on_admitted=on_admitted,
            slots=housekeeping,
        )
    role = "worker" if not receive else ("serve" if worker else "serve --no-worker")
    registration = Registration(
        store,
        worker_id=dispatcher.owner if dispatcher is not None else new_owner_id(role.split()[0]),
        role=role,
        slots=sum(dispatcher.slots.values()) if dispatcher is not None else 0,
        lease_seconds=cfg.lease_seconds,
        interval=cfg.renew_interval,
        clock=time.time,
        jobs_running=(lambda: sum(dispatcher.slots.values()) - dispatcher.free_slots) if dispatcher else lambda: 0,
        queues=lambda: queue_loads_of(dispatcher, housekeeping if worker else None),
    )
    dashboard = None
    if cfg.dashboard_token:
        dashboard = Dashboard(
            store,
            token=cfg.dashboard_token,
            prices=cfg.price_table,
            github_web_url=github_web_url(cfg.github_api_url),
            secure_cookies=cookies_secure(cfg),
        )
    app = make_app(receiver, probes, dashboard) if receiver is not None else make_health_app(probes)
    return Service(
        cfg=cfg,
        store=store,
        dispatcher=dispatcher,
        app=app,
        check_sync=check_sync,
        session=stack.session if stack else None,
        outbox=outbox,
        receiver=receiver,
        github=stack.github if stack else None,
        metrics=metrics,
        cleaner=cleaner,
        recovery=recovery,
        model_client=stack.model_client if stack else None,
        registration=registration,
        batch_poll=batch_poll,
        housekeeping=housekeeping,
        signal_pass=signal_pass,
    )


async def serve(cfg: Config, *, worker: bool = True) -> None:
    """Run until SIGTERM/SIGINT: answer webhooks, drain the backlog, then shut down gracefully.

    Without any App (``cfg.needs_setup``) the setup page runs first; once it has registered an App, the
    configured service starts on the same port in this same process.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    if cfg.needs_setup:
        from reviewer_app.web.setup_page import run_setup

        await open_database_first(cfg)
        configured = await run_setup(cfg, stop)
        if configured is None:
            log.info("stopped before setup was completed")
            return
        cfg = configured
    if cfg.insecure_no_signature and not cfg.webhook_secret:
        log.warning("REVIEWER_INSECURE_NO_SIGNATURE is set: webhooks are accepted WITHOUT signature checks")
    svc = await build_service(cfg, worker=worker)
    try:
        runner, site = await start_site(svc.app, cfg, cfg.host, cfg.port)
    except BaseException:
        await svc.stop()  # the database and its threads closed, so the process exits at once
        raise
    svc.start_background()
    log.info("reviewer-app listening on http://%s:%s (database %s)", cfg.host, cfg.port, svc.store.engine)
    await stop.wait()
    log.info("shutting down: no new claims, %.0f s grace for running jobs", cfg.shutdown_grace_seconds)
    await site.stop()
    await svc.stop()
    await runner.cleanup()
    log.info("stopped")


async def open_database_first(cfg: Config) -> None:
    """Setup mode registers an App on GitHub, and then this server must answer its webhooks: a database that cannot be
    opened would stop the server right after, leaving an App registered with nothing behind it. So the database is
    opened (and migrated) before the setup page starts; StoreUnavailable is one line and exit 2 (cli.py)."""
    store = make_store(cfg)
    await store.open()
    await store.close()


async def work(cfg: Config, *, host: str | None = None, port: int | None = None) -> int:
    """`reviewer-app worker`: claim and run jobs and the background duties until SIGTERM/SIGINT; no webhooks.

    Only ``port`` opens a server, with /healthz, /readyz and /metrics. Returns the exit status: 2 when there is
    nothing to run (no App or no Claude key with the review runner), so a misconfigured worker does not idle.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    svc = await build_service(cfg, worker=True, receive=False)
    if svc.dispatcher is None:
        await svc.stop()
        log.error("worker: nothing to run: %s (or set REVIEWER_RUNNER=noop)", why_no_reviews(cfg))
        return 2
    runner: web.AppRunner | None = None
    if port is not None:
        try:
            runner, _ = await start_site(svc.app, cfg, host or cfg.host, port)
        except BaseException:
            await svc.stop()
            raise
        log.info("worker health on http://%s:%s", host or cfg.host, port)
    svc.start_background()
    log.info(
        "reviewer-app worker running %d review, %d answer and %d housekeeping slot(s) (database %s)",
        cfg.concurrency,
        cfg.answer_concurrency,
        cfg.housekeeping_concurrency,
        svc.store.engine,
    )
    await stop.wait()
    log.info("shutting down: no new claims, %.0f s grace for running jobs", cfg.shutdown_grace_seconds)
    await svc.stop()
    if runner is not None:
        await runner.cleanup()
    log.info("stopped")
    return 0
