"""Check runs per revision: each job's one check run, created and updated by the worker and by the duty that keeps
it in step with its job (what it shows is in check_run_text.py)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from reviewer_app.core.admission import TRIGGER_DRAFT
from reviewer_app.core.cancel_reasons import CancelReason
from reviewer_app.core.errors import InstallationUnavailable, JobError, LeaseLost, PermanentError, RateLimited
from reviewer_app.core.rate_waits import RateWaits
from reviewer_app.core.states import PENDING, JobState
from reviewer_app.github.check_run_text import CheckView, check_key, desired_check
from reviewer_app.github.client import GitHubClient
from reviewer_app.github.scopes import as_work
from reviewer_app.store.base import Job, Store

if TYPE_CHECKING:
    from reviewer_app.dispatch.context import JobContext

log = logging.getLogger(__name__)

CHECK_NAME = "reviewer-app"


def external_id(job_id: int) -> str:
    return f"reviewer-app-job-{job_id}"


# How long one process may take to create a job's check run before another may try (it looks for the first one's
# run by external_id before creating, so a slow creator costs a lookup, not a duplicate).
CREATION_CLAIM_SECONDS = 60.0

# How many times one sync of a job reads it again when the job changed while its check run was being updated.
SYNC_ROUNDS = 3

# Records that the job's check run (its id) shows the phase `key`; False when the writer's guard refused it.
Record = Callable[[int, str], Awaitable[bool]]


class CheckRuns:
    """Creates and updates each job's one check run; shared by the runner and the sync duty.

    Every write to GitHub is followed by a guarded record of what it shows: the sync's by the job as it read it
    (`set_check_run_if_unchanged`), a worker's by its lease. A write that cannot be recorded may have landed after a
    newer one, so the key is cleared and the sync shows the job's phase again: a check run ends in the state its
    job ended in."""

    def __init__(
        self,
        github: GitHubClient,
        store: Store,
        *,
        name: str = CHECK_NAME,
        details_url: Callable[[Job], str | None] | None = None,
        owner: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.github = github
        self.store = store
        self.name = name
        self.owner = owner or f"checks-{uuid.uuid4().hex[:12]}"  # this process, for the creation claim
        self.clock = clock
        self._locks: dict[int, asyncio.Lock] = {}  # within this process; the store's claim works across hosts
        self.rate_waits = RateWaits()  # installations the sync skips until their rate limit's reset

    def lock(self, job_id: int) -> asyncio.Lock:
        return self._locks.setdefault(job_id, asyncio.Lock())

    async def find_or_create(self, job: Job, view: CheckView) -> tuple[int | None, bool]:
        """The job's check run id: the stored one, one found by external_id, or a new one showing ``view``; None
        while another process (this host's or another's) is creating it.

        The flag says whether it was created just now (already showing ``view``); the caller records it."""
        if job.check_run_id is not None:
            return job.check_run_id, False
        assert job.installation_id is not None
        if not await self.store.claim_check_run_creation(
            job.id, owner=self.owner, now=self.clock(), seconds=CREATION_CLAIM_SECONDS
        ):
            # Another process holds the claim, or has recorded the run since ``job`` was read (a worker reads its
            # job when it claims it): look again.
            current = await self.store.get_job(job.id)
            if current is not None and current.check_run_id is not None:
                return current.check_run_id, False
            log.info("job %s: another process is creating its check run", job.id)
            return None, False
        existing = await self.github.list_check_runs_for_ref(
            job.installation_id, job.repo_full_name, job.head_sha, check_name=self.name
        )
        for run in existing:
            # Created by a creator that died before recording it. A completed run of the job is an earlier life's
            # (`jobs retry`): a pending job gets a new run of its own rather than one GitHub may not reopen.
            reopens = run.get("status") == "completed" and view.status != "completed"
            if run.get("external_id") == external_id(job.id) and not reopens:
                return int(run["id"]), False
        created = await self.github.create_check_run(
            job.installation_id,
            job.repo_full_name,
            name=self.name,
            head_sha=job.head_sha,
            status=view.status,
            external_id=external_id(job.id),
            output=view.output(),
            conclusion=view.conclusion,
        )
        return int(created["id"]), True

    async def show(self, job: Job, view: CheckView) -> bool:
        """The sync's write: make the job's check run show ``view``, the phase of ``job`` as read. False when the job
        changed meanwhile (nothing recorded; read it again); True otherwise, including while another process creates
        the run (its creator records it and shows the job's phase then)."""

        async def if_unchanged(run_id: int, key: str) -> bool:
            return await self.store.set_check_run_if_unchanged(
                job.id, state=job.state, attempts=job.attempts, check_run_id=run_id, key=key
            )

        run_id, recorded = await self._show(job, view, if_unchanged)
        return run_id is None or recorded

    async def show_for_attempt(self, ctx: JobContext, view: CheckView) -> int | None:
        """A worker's write, fenced by its lease: an attempt that lost it changes nothing on GitHub (LeaseLost).
        Returns the run's id, or None while another process creates it (its creator then shows the job's phase)."""
        # The intent first, as before publishing: an attempt whose lease was taken stops here, even before its
        # renewer notices.
        await ctx.checkpoint(check_run_status=view.key)

        async def if_held(run_id: int, key: str) -> bool:
            try:
                await ctx.checkpoint(check_run_id=run_id, check_run_status=key)
            except LeaseLost:
                return False
            return True

        run_id, recorded = await self._show(ctx.job, view, if_held)
        if run_id is not None and not recorded:
            raise LeaseLost(f"job {ctx.job.id}: lease lost while showing its check run (attempt {ctx.attempt})")
        return run_id

    async def _show(self, job: Job, view: CheckView, record: Record) -> tuple[int | None, bool]:
        assert job.installation_id is not None
        run_id, created = await self.find_or_create(job, view)
        if run_id is None:
            return None, False
        if not created:
            fields: dict[str, Any] = {"status": view.status, "output": view.output()}
            if view.status == "queued":
                # A run that exists and is not completed was created queued or went in progress: a retry waiting
                # for its turn says so in its text, and leaves the status where it is (no way back on GitHub).
                del fields["status"]
            if view.conclusion:
                fields["conclusion"] = view.conclusion
            await self.github.update_check_run(job.installation_id, job.repo_full_name, run_id, **fields)
        # Recorded at once after creating: a crash before this point costs a lookup by external_id, not a second run.
        if await record(run_id, view.key):
            return run_id, True
        # The job moved on while GitHub was being changed, and this write may have landed after a newer one's.
        await self.store.forget_check_run_status(job.id, check_run_id=run_id)
        log.info("job %s: changed while its check run was updated; it will be shown again", job.id)
        return run_id, False

    @as_work("checks")
    async def sync_job(self, job_id: int) -> None:
        async with self.lock(job_id):
            for _ in range(SYNC_ROUNDS):
                job = await self.store.get_job(job_id)
                if job is None or job.installation_id is None or job.check_run_status == check_key(job):
                    return
                if await self._sync(job):
                    return
            log.info(
                "job %s: changed during each of %d updates of its check run; a later pass shows it", job_id, SYNC_ROUNDS
            )

    async def _sync(self, job: Job) -> bool:
        """Bring the job's check run to the job's phase as read; False when the job changed meanwhile."""
        # A job that ended saying why no review came (skipped: paused, turned off, a draft; refused: a budget)
        # explains its head: its check run is opened even if it was never shown before.
        explains = job.state == JobState.CANCELLED and job.cancel_reason in (CancelReason.REFUSED, CancelReason.SKIPPED)
        if job.check_run_id is None and job.state in (JobState.SUPERSEDED, JobState.CANCELLED) and not explains:
            if job.check_run_claim is not None and await self._find_unrecorded(job) is not None:
                job = await self.store.get_job(job.id) or job  # a run was made after all: close it below
            else:
                # Never shown to anyone: no check run to close, and none worth opening.
                return await self._record_unshown(job, "completed")
        if job.check_run_id is None and job.trigger == TRIGGER_DRAFT and job.state in PENDING:
            # A draft's job is reviewed only where the repository asks for drafts, which the worker finds out:
            # the pipeline opens the check run when it starts the review. No "waiting" check on every draft.
            return await self._record_unshown(job, check_key(job))
        newer = None
        if job.state == JobState.SUPERSEDED and job.superseded_by is not None:
            by = await self.store.get_job(job.superseded_by)
            newer = by.head_sha if by else None
        return await self.show(job, desired_check(job, newer_sha=newer))

    async def _find_unrecorded(self, job: Job) -> int | None:
        """A run somebody created for the job without recording it (its answer was lost, or it died right after):
        found by ``external_id`` and recorded, so the job's end is shown on it rather than leaving it queued."""
        assert job.installation_id is not None
        runs = await self.github.list_check_runs_for_ref(
            job.installation_id, job.repo_full_name, job.head_sha, check_name=self.name
        )
        run = next((r for r in runs if r.get("external_id") == external_id(job.id)), None)
        if run is None:
            return None
        await self.store.forget_check_run_status(job.id, check_run_id=int(run["id"]))
        return int(run["id"])

    async def _record_unshown(self, job: Job, key: str) -> bool:
        """Record ``key`` with no check run, only if the job still has none (and is as read)."""
        return await self.store.set_check_run_if_unchanged(
            job.id, state=job.state, attempts=job.attempts, check_run_id=None, key=key
        )

    async def run_once(self, *, limit: int = 50) -> int:
        """One pass of the sync duty; returns how many jobs were brought up to date. An installation GitHub rate-limits
        is skipped until its reset; the others' check runs go on."""
        done = 0
        skip = self.rate_waits.skipped(self.clock())
        for job in await self.store.jobs_needing_check_sync(limit=limit, skip=skip):
            assert job.installation_id is not None
            if self.rate_waits.waiting(job.installation_id, self.clock()):
                continue  # limited earlier in this pass
            try:
                await self.sync_job(job.id)
                done += 1
            except RateLimited as exc:
                self.rate_waits.wait(job.installation_id, exc.retry_at)
                log.warning(
                    "check runs of installation %s wait for its rate limit (the others go on): %s",
                    job.installation_id,
                    exc.reason,
                )
            except InstallationUnavailable as exc:
                # Suspended or uninstalled (its webhook may not be here yet): the run is completed when it is back.
                log.warning("job %s: check run waits for its installation: %s", job.id, exc.reason)
            except PermanentError as exc:
                log.warning("job %s: check run cannot be updated: %s", job.id, exc.reason)
                await self.store.set_check_run_if_unchanged(
                    job.id, state=job.state, attempts=job.attempts, check_run_id=job.check_run_id, key=check_key(job)
                )
            except JobError as exc:
                log.warning("job %s: check run update failed, will retry: %s", job.id, exc.reason)
        return done
