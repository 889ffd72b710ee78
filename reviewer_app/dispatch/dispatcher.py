"""The dispatcher: free slots claim work under a lease, renew it while running, and write results fenced. Each queue
of jobs (reviews, answers: core/queues.py) has slots of its own and is claimed apart, so a question never waits for
a review slot."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass

from reviewer_app.core.errors import (
    Cancelled,
    JobError,
    LeaseLost,
    Settled,
    Superseded,
    TransientError,
)
from reviewer_app.core.queues import ANSWERS, REVIEWS, queue_loads
from reviewer_app.core.retry import GiveUp, RetryPolicy, decide_retry
from reviewer_app.dispatch.context import Clock, JobContext, Runner
from reviewer_app.dispatch.rescuer import Rescuer
from reviewer_app.logs import bind_log_context
from reviewer_app.metrics import Metrics
from reviewer_app.store.base import Job, Lease, Store, StoreUnavailable

log = logging.getLogger(__name__)


@dataclass
class _Running:
    """A job whose runner is running in this process: what the lease renewer needs to keep or stop it."""

    ctx: JobContext
    task: asyncio.Task[None]  # the job's task: cancelling it stops the runner
    expires: float  # the lease's last known expiry (store clock)
    deadline: float  # when the runner has run for job_timeout (event-loop clock)
    stopped_for: str | None = None  # "lost" or "timeout" once the dispatcher cancelled the runner


class Dispatcher:
    def __init__(
        self,
        store: Store,
        runner: Runner,
        *,
        owner: str,
        concurrency: int,
        answer_slots: int = 1,
        lease_seconds: float,
        renew_interval: float,
        scan_interval: float,
        retry_policy: RetryPolicy,
        job_timeout: float = 900.0,
        clock: Clock,
        rand: Callable[[], float] = random.random,
        on_finished: Callable[[int], None] | None = None,
        metrics: Metrics | None = None,
        write_settle_seconds: float = 10.0,
    ) -> None:
        self.store = store
        self.write_settle_seconds = write_settle_seconds  # a handed-back job's GitHub write in flight: waited this long
        self.runner = runner
        self.owner = owner
        self.concurrency = concurrency  # the reviews' slots (REVIEWER_CONCURRENCY)
        self.slots = {REVIEWS: concurrency, ANSWERS: answer_slots}  # each queue's own, claimed apart
        self.lease_seconds = lease_seconds
        self.renew_interval = renew_interval
        self.scan_interval = scan_interval
        self.retry_policy = retry_policy
        self.job_timeout = job_timeout
        self.clock = clock
        self.rand = rand
        self.on_finished = on_finished
        self.metrics = metrics
        self.rescuer = Rescuer(store, clock=clock, metrics=metrics)
        self.tasks: dict[str, asyncio.Task[None]] = {}  # by lease token: one job may have a stale attempt too
        # Tokens whose runner has not finished yet, with the queue whose slot each holds: a slot is busy while its
        # runner runs. Recording the outcome happens after the slot is free, so the next claim joins the same group
        # commit as the finished jobs' outcomes instead of waiting for them.
        self._busy: dict[str, str] = {}
        # Jobs whose runner runs here, by token: one task renews all their leases, one statement per interval.
        # In start order, which is deadline order: one timer for the earliest deadline watches them all.
        self._running: dict[str, _Running] = {}
        self._renewer: asyncio.Task[None] | None = None
        self._last_look: tuple[float, float] | None = None  # (clock, loop time) at the last rescue: a jump shows
        self._watchdog: asyncio.TimerHandle | None = None
        self._wake = asyncio.Event()
        self._stopping = False
        self._loop_task: asyncio.Task[None] | None = None
        self.running = False
        self.stale_writes_refused = 0

    # -- public ---------------------------------------------------------------------------------------

    def wake(self) -> None:
        """Admission calls this after a commit, so a free slot starts the job without a polling delay."""
        self._wake.set()

    @property
    def free_slots(self) -> int:
        """Free slots of every queue together."""
        return sum(self.slots.values()) - len(self._busy)

    def free_in(self, queue: str) -> int:
        return self.slots[queue] - sum(1 for q in self._busy.values() if q == queue)

    def loads(self) -> dict[str, dict[str, int]]:
        """Each queue's slots and busy slots here (the worker registry and `status` show them)."""
        running: dict[str, int] = {}
        for queue in self._busy.values():
            running[queue] = running.get(queue, 0) + 1
        return queue_loads(self.slots, running)

    async def run_once(self) -> list[Lease]:
        """Claim, in each queue, as many jobs as it has free slots, and start them. Each queue's claim is a statement
        of its own, so a backlog of reviews never takes an answer's slot, nor the other way round; they run side by
        side (SQLite commits them together, PostgreSQL on two connections), so a round costs no more time than one."""
        if self._stopping:
            return []
        wanted = [(queue, free) for queue in self.slots if (free := self.free_in(queue)) > 0]
        claims = await asyncio.gather(
            *(
                self.store.claim(
                    owner=self.owner, limit=free, now=self.clock(), lease_seconds=self.lease_seconds, queue=queue
                )
                for queue, free in wanted
            ),
            return_exceptions=True,
        )
        leases: list[Lease] = []
        failure: BaseException | None = None
        for (queue, _), claimed in zip(wanted, claims, strict=True):
            if isinstance(claimed, BaseException):
                failure = failure or claimed
                continue
            for lease in claimed:  # started even when the other queue's claim failed: they are leased to us
                self._busy[lease.token] = queue
                self.tasks[lease.token] = asyncio.create_task(self._execute(lease), name=f"job-{lease.job_id}")
            leases.extend(claimed)
        if failure is not None:
            raise failure
        return leases

    def start(self) -> None:
        """Start claiming (again, after ``stop``: a dispatcher can be restarted in the same process)."""
        self._stopping = False
        self._loop_task = asyncio.create_task(self.run(), name="dispatcher")

    async def run(self) -> None:
        self.running = True
        last_rescue = 0.0
        try:
            while not self._stopping:
                self._wake.clear()
                try:
                    now = self.clock()
                    if now - last_rescue >= self.scan_interval:
                        last_rescue = now
                        await self._rescue()
                    claimed_at = self.clock()
                    await self.run_once()
                    timeout = await self._idle_timeout(claimed_at)
                    if timeout is None:
                        # Work was due, yet a claim with free slots took none of it: the queue is paused, or a lease
                        # expired and waits for the rescuer. Rescue now; if nothing came back, claiming again before
                        # the next scan (or a wake-up, such as a resume) would only find the same nothing.
                        last_rescue = self.clock()
                        timeout = 0.0 if await self._rescue() else self.scan_interval
                except StoreUnavailable as exc:
                    log.error("dispatcher: database unavailable, retrying: %s", exc)
                    timeout = self.scan_interval
                with contextlib.suppress(TimeoutError):
                    # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel that lands with a wake-up.
                    async with asyncio.timeout(timeout):
                        await self._wake.wait()
        finally:
            self.running = False

    async def stop(self, grace: float) -> None:
        """Stop claiming; give in-flight work ``grace`` seconds; hand back what is still running."""
        self._stopping = True
        self._wake.set()
        if self._loop_task is not None:
            await asyncio.gather(self._loop_task, return_exceptions=True)
        if self.tasks:
            _, pending = await asyncio.wait(list(self.tasks.values()), timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        if self._renewer is not None:
            self._renewer.cancel()
            await asyncio.gather(self._renewer, return_exceptions=True)
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    # -- one attempt ----------------------------------------------------------------------------------

    async def _idle_timeout(self, claimed_at: float) -> float | None:
        """How long to wait for a wake-up before claiming again; None when work was already due at the claim that
        started at ``claimed_at`` (a queued job of a queue with a free slot, or an expired lease) and slots are still
        free. A queue whose slots are all busy is not waited for: a slot freeing wakes the loop."""
        free = [q for q in self.slots if self.free_in(q) > 0]
        if not free:
            return self.scan_interval
        nxt = await self.store.next_wakeup(now=self.clock(), queues=free)
        if nxt is None:
            return self.scan_interval
        if nxt <= claimed_at:
            return None
        return max(0.0, min(self.scan_interval, nxt - self.clock() + 0.001))

    async def _execute(self, lease: Lease) -> None:
        try:
            job = lease.job or await self.store.get_job(lease.job_id)
            if job is None:
                return
            ctx = JobContext(job=job, lease=lease, store=self.store, clock=self.clock, metrics=self.metrics)
            # This task and the runner's tasks log with the job's context from here on.
            bind_log_context(
                delivery=job.details.delivery_id,
                job_id=job.id,
                repo=job.repo_full_name,
                pr=job.pr_number,
                head_sha=job.head_sha,
                attempt=lease.attempt,
            )
            log.info("job %s attempt %s started", job.id, lease.attempt)
            self._observe_queue_wait(job, lease)
            # The runner runs in this task. A lost lease (the renewer), the job timeout (the watchdog) and shutdown
            # (stop) all cancel it; `stopped_for`, set before the dispatcher cancels, tells them apart.
            this = asyncio.current_task()
            assert this is not None
            running = _Running(ctx, this, lease.expires_at, asyncio.get_running_loop().time() + self.job_timeout)
            self._running[lease.token] = running
            self._ensure_renewer()
            self._arm_watchdog()
            try:
                outcome = await self._timed(ctx)
            except asyncio.CancelledError:
                why = running.stopped_for
                if why is None or this.uncancel() > 0:
                    # Shutdown: hand the job back without burning the attempt. The slot is free at once, but the
                    # lease stays in the renewer's set until the hand-back's last write has landed: a write of this
                    # attempt still in flight must not find another host holding the job (it would publish again).
                    running.stopped_for = "shutdown"  # the watchdog leaves the hand-back alone
                    self._free_slot(lease, keep_renewing=True)
                    await self._hand_back(ctx)
                    raise
                self._free_slot(lease)
                if why == "lost":
                    self._refused(ctx, "runner stopped: lease lost")
                    return
                await self._settle(ctx, TransientError(f"timed out after {self.job_timeout:g} s"))
            except BaseException as exc:  # noqa: BLE001 - every runner error has a defined outcome
                self._free_slot(lease)
                await self._settle(ctx, exc)
            else:
                self._free_slot(lease)  # the runner is done; the outcome write is fenced by the token
                await self._succeed(ctx, outcome)
        except StoreUnavailable as exc:
            log.error(
                "job %s: could not record the outcome (%s); the lease will expire and be rescued", lease.job_id, exc
            )
        finally:
            self._free_slot(lease)
            self.tasks.pop(lease.token, None)
            if self.on_finished is not None:
                self.on_finished(lease.job_id)

    def _free_slot(self, lease: Lease, *, keep_renewing: bool = False) -> None:
        """The runner is done: its slot is free. Its lease is renewed no more (the outcome write is fenced by the
        token), unless ``keep_renewing``: a hand-back renews it until its last write has landed."""
        if not keep_renewing:
            self._running.pop(lease.token, None)
        if self._busy.pop(lease.token, None) is not None:
            self._wake.set()

    def _observe_queue_wait(self, job: Job, lease: Lease) -> None:
        """At a job's first claim only (started_at is set once): how long it waited from admission to a slot."""
        claimed_at = lease.expires_at - self.lease_seconds
        if self.metrics is not None and job.started_at is not None and abs(job.started_at - claimed_at) < 1e-3:
            self.metrics.queue_wait.observe(max(0.0, job.started_at - job.created_at))

    async def _timed(self, ctx: JobContext) -> str:
        """The runner, its run time observed by how it ended."""
        started, result = self.clock(), "error"
        try:
            outcome = await self.runner(ctx)
            result = "succeeded"
            return outcome
        except asyncio.CancelledError:
            result = "interrupted"  # timed out, lease lost or shutting down
            raise
        finally:
            if self.metrics is not None:
                self.metrics.review_duration.labels(result).observe(max(0.0, self.clock() - started))

    async def _rescue(self) -> list[int]:
        """Rescue expired leases; after a forward jump of the clock (a paused VM: the clock moved on further than
        the event loop's own timer since the last look), this process's running jobs are renewed first, or the
        rescuer would take a healthy job running here before the renewer's next round."""
        now, ticks = self.clock(), asyncio.get_running_loop().time()
        last, self._last_look = self._last_look, (now, ticks)
        jumped = last is not None and (now - last[0]) - (ticks - last[1]) > self.lease_seconds / 2
        if jumped and self._running:
            log.warning("dispatcher: the clock jumped %.0f s; renewing the leases held here first", now - last[0])
            await self._renew_round()
        return await self.rescuer.run_once()

    def _ensure_renewer(self) -> None:
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.create_task(self._renew_all(), name="lease-renewer")

    async def _renew_all(self) -> None:
        """Every ``renew_interval``, extend the leases of all jobs running here in one store call.

        A lease the store no longer holds for us (rescued after a stall, taken by another worker) stops that job's
        runner. If the database cannot be reached, a job keeps running until its last known expiry passes."""
        while self._running:
            await asyncio.sleep(self.renew_interval)
            if not self._running:
                return
            await self._renew_round()

    async def _renew_round(self) -> None:
        """Extend the leases of every job running here in one store call; stop the runners whose lease is lost."""
        running = list(self._running.values())
        if not running:
            return
        now = self.clock()
        held: set[str] | None
        try:
            leases = [r.ctx.lease for r in running]
            held = await self.store.renew_leases(leases, now=now, lease_seconds=self.lease_seconds)
        except StoreUnavailable as exc:
            log.warning("lease renewal failed, retrying next interval: %s", exc)
            held = None
        except Exception:  # noqa: BLE001 - the renewer must outlive a bug in one round
            log.exception("lease renewal failed unexpectedly")
            held = None
        for r in running:
            token = r.ctx.lease.token
            if self._running.get(token) is not r:
                continue  # its runner finished meanwhile
            if held is not None and token in held:
                r.expires = now + self.lease_seconds
            elif held is None and self.clock() < r.expires:
                continue  # not renewed this time, but the lease has not run out yet
            else:
                self._lose(r)

    def _lose(self, r: _Running) -> None:
        ctx = r.ctx
        self._running.pop(ctx.lease.token, None)
        ctx.lost.set()
        log.warning("job %s attempt %s: lease lost; stopping the runner", ctx.job.id, ctx.attempt)
        if r.stopped_for is None:
            r.stopped_for = "lost"
            r.task.cancel()

    def _arm_watchdog(self, at: _Running | None = None) -> None:
        """One timer at the earliest deadline of the jobs running here (cheaper than a timer per job): ``at``, or
        the oldest job's when no timer is set."""
        if at is None:
            if self._watchdog is not None or not self._running:
                return
            at = next(iter(self._running.values()))
        self._watchdog = asyncio.get_running_loop().call_at(at.deadline, self._check_deadlines)

    def _check_deadlines(self) -> None:
        self._watchdog = None
        now = asyncio.get_running_loop().time()
        for r in list(self._running.values()):
            if r.deadline > now:
                self._arm_watchdog(r)  # the first job not yet due; those before it were stopped
                return
            if r.stopped_for is None:
                log.warning(
                    "job %s attempt %s: runner timed out after %g s; stopping it",
                    r.ctx.job.id,
                    r.ctx.attempt,
                    self.job_timeout,
                )
                r.stopped_for = "timeout"
                r.task.cancel()
        # Nothing left to watch; the next job to start arms the timer again.

    def _refused(self, ctx: JobContext, what: str) -> None:
        self.stale_writes_refused += 1
        log.warning(
            "job %s attempt %s: %s; the write was refused (a newer attempt owns the job)", ctx.job.id, ctx.attempt, what
        )

    async def _succeed(self, ctx: JobContext, outcome: str) -> None:
        if not await self.store.complete_if_lease_held(ctx.lease, now=self.clock(), outcome=outcome, usage=None):
            self._refused(ctx, "completion")
        else:
            log.info("job %s succeeded: %s", ctx.job.id, outcome)

    async def _settle(self, ctx: JobContext, exc: BaseException) -> None:
        now = self.clock()
        if isinstance(exc, LeaseLost):
            self._refused(ctx, str(exc))
            return
        if isinstance(exc, Settled):
            log.info("job %s: %s", ctx.job.id, exc.reason)
            return
        if isinstance(exc, Superseded):
            ok = await self.store.supersede_if_lease_held(ctx.lease, now=now, outcome=exc.reason, usage=None)
            log.info("job %s superseded: %s", ctx.job.id, exc.reason) if ok else self._refused(ctx, "supersede")
            return
        if isinstance(exc, Cancelled):
            ok = await self.store.cancel_if_lease_held(ctx.lease, now=now, outcome=exc.reason, usage=None)
            log.info("job %s cancelled: %s", ctx.job.id, exc.reason) if ok else self._refused(ctx, "cancel")
            return
        if not isinstance(exc, JobError):
            log.error("job %s attempt %s: unexpected error", ctx.job.id, ctx.attempt, exc_info=exc)
        decision = decide_retry(exc, attempt=ctx.attempt, policy=self.retry_policy, now=now, rand=self.rand())
        if isinstance(decision, GiveUp):
            ok = await self.store.fail_if_lease_held(ctx.lease, now=now, error=decision.reason, usage=None)
            if ok:
                log.warning("job %s failed: %s", ctx.job.id, decision.reason)
                if self.metrics is not None:
                    self.metrics.jobs_failed.inc()
            else:
                self._refused(ctx, "failure")
            return
        ok = await self.store.retry_if_lease_held(
            ctx.lease,
            now=now,
            at=decision.at,
            error=decision.reason,
            counts_attempt=decision.counts_attempt,
            usage=None,
        )
        if ok:
            log.info(
                "job %s attempt %s: %s; next try in %.1f s", ctx.job.id, ctx.attempt, decision.reason, decision.at - now
            )
            self._wake.set()  # the loop's next wake-up time may now be this retry's
        else:
            self._refused(ctx, "retry")

    async def _hand_back(self, ctx: JobContext) -> None:
        """A job still running when the shutdown's grace ran out goes back to the queue without spending an attempt.
        Not while a write of this attempt may still reach GitHub (a review POST in flight): the next attempt, on any
        host, would not find it by its marker yet and publish again. The write is waited for (write_settle_seconds);
        one still unfinished then makes the job due only a lease later, when it has landed or failed."""
        at = self.clock()
        writing = [w for w in ctx.writing if not w.done()]
        if writing:
            _, unfinished = await asyncio.wait(writing, timeout=self.write_settle_seconds)
            at = self.clock() + (self.lease_seconds if unfinished else 0.0)
            log.info(
                "job %s: handed back after its GitHub write%s",
                ctx.job.id,
                " (still unfinished: due a lease later)" if unfinished else "",
            )
        with contextlib.suppress(StoreUnavailable):
            await self.store.retry_if_lease_held(
                ctx.lease,
                now=self.clock(),
                at=at,
                error="interrupted by shutdown",
                counts_attempt=False,
                usage=None,
            )
