"""No missed reviews: ask GitHub to redeliver failed webhooks once, and sweep open PRs for heads never admitted."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from reviewer_app.core.admission import TRIGGER_AUTO, TRIGGER_DRAFT, Decision, Enqueue, Guard, is_reply
from reviewer_app.core.cancel_reasons import ended_with_episode
from reviewer_app.core.errors import JobError, PermanentError, RateLimited
from reviewer_app.core.events import decide_observed_head
from reviewer_app.core.markers import reviewed_by_bot
from reviewer_app.core.payload import MalformedPayload
from reviewer_app.core.pr_work import DRAFT_SKIP
from reviewer_app.core.states import PENDING, JobState
from reviewer_app.core.timestamps import parse_time
from reviewer_app.dispatch.duty import PeriodicDuty, Slots
from reviewer_app.github.client import GitHubClient
from reviewer_app.github.scopes import as_work
from reviewer_app.store.base import AdmitResult, Delivery, Job, Store

log = logging.getLogger(__name__)

Json = dict[str, Any]
DAY = 86400.0
# A claim this old with no request recorded belongs to a host that died between claiming and asking.
CLAIM_STALE_SECONDS = 300.0
# When another host is running a pass, look again this soon rather than a whole interval later.
BUSY_RETRY_SECONDS = 60.0
FAILED_STATUSES = frozenset({"failed", "timed out"})


# ------------------------------------------------------------------------------------------ pure decisions


def attempt_failed(attempt: Mapping[str, Any]) -> bool:
    """Whether one delivery attempt failed: a status code other than 2xx, or a failed/timed-out status."""
    code = attempt.get("status_code")
    ok = isinstance(code, int) and 200 <= code < 300
    return not ok or str(attempt.get("status") or "").strip().lower() in FAILED_STATUSES


def failed_deliveries(attempts: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """GUID -> newest attempt, for each GUID none of whose attempts succeeded.

    GitHub lists one row per attempt; a redelivery repeats the GUID, so a later success settles the GUID.
    """
    newest: dict[str, Mapping[str, Any]] = {}
    succeeded: set[str] = set()
    for attempt in attempts:
        guid = attempt.get("guid")
        if not isinstance(guid, str) or not guid or not isinstance(attempt.get("id"), int):
            continue
        if not attempt_failed(attempt):
            succeeded.add(guid)
        elif guid not in newest or int(attempt["id"]) > int(newest[guid]["id"]):
            newest[guid] = attempt
    return {guid: attempt for guid, attempt in newest.items() if guid not in succeeded}


def head_is_handled(jobs: Iterable[Job], head_sha: str, *, draft: bool) -> bool:
    """Whether the PR's jobs already answer for its current head (pure): a pending requested review (it reviews
    whatever head it finds), a review of this head, or else the head's newest job: pending, failed (visibly), or
    ended with a reason that still stands. A job that ended with its episode (the PR closed, the app uninstalled or
    suspended, the repository removed) or was superseded is history; so is an older skip that a newer job of the
    head replaced (skipped as a draft, then marked ready), or whose check run is older than that of a job cancelled
    with its episode (what GitHub shows on the head is the newest run). For a pull request that is no longer a draft, a job its
    draft got does not count (a review it published is found by the caller's look at the reviews)."""
    jobs = list(jobs)
    if any(not j.head_sha and j.state in PENDING and not is_reply(j.trigger) for j in jobs):  # answers review nothing
        return True
    mine = [j for j in jobs if j.head_sha == head_sha and (draft or j.trigger != TRIGGER_DRAFT)]
    if not mine:
        return False
    if any(j.state == JobState.SUCCEEDED for j in mine):
        return True
    # The head's word is what GitHub shows on it: the newest check run (a requested review admitted before a skip can
    # show its run after the skip's, then be cancelled with its episode), then the job that ended last. A job not
    # ended yet is newest of all.
    newest = max(mine, key=_shown_last)
    if newest.state in PENDING or newest.state == JobState.FAILED:
        return True
    if not draft and (newest.outcome or "").startswith(DRAFT_SKIP):
        return False  # skipped as a draft, ready now: its ready_for_review webhook may never have come
    return newest.state == JobState.CANCELLED and not ended_with_episode(newest.cancel_reason)


def _shown_last(job: Job) -> tuple[float, int, float, int]:
    pending = job.finished_at is None
    return (math.inf if pending else 0.0, job.check_run_id or 0, job.finished_at or 0.0, job.id)


def sweep_delivery_id(
    repo_id: int, number: int, head_sha: str, trigger: str = TRIGGER_AUTO, earlier_jobs: int = 0
) -> str:
    """The synthetic delivery id of a sweep admission: one per head, trigger and number of jobs the head already had,
    so a second sweep (on any host) is a duplicate, while a head whose job ended with its episode (the PR closed and
    reopened, the installation suspended and back) is swept again."""
    key = f"sweep:{repo_id}:{number}:{head_sha}"
    key = key if trigger == TRIGGER_AUTO else f"{key}:{trigger}"
    return key if not earlier_jobs else f"{key}:{earlier_jobs}"


def sweep_decision(
    installation_id: int, repo: Mapping[str, Any], pull: Mapping[str, Any], *, guard: Guard | None
) -> Decision:
    """The admission decision for an open PR found by the sweep: the one an ``opened`` webhook would get."""
    return decide_observed_head(
        installation_id, repo.get("id"), repo.get("full_name"), dict(pull), action="sweep", guard=guard
    )


# ------------------------------------------------------------------------------------------------ the duty


class Recovery:
    """The two recovery duties, each safe to run on every host at once.

    Deduplication lives in the database: a redelivery is claimed per GUID (and never for a GUID the receiver
    admitted), and a sweep admission goes through ``store.admit`` with one delivery id per head. A lease row per
    duty only keeps hosts from doing the same pass at the same time.
    """

    def __init__(
        self,
        github: GitHubClient,
        store: Store,
        *,
        owner: str,
        clock: Callable[[], float],
        recovery_interval: float,
        sweep_interval: float,
        window_days: float = 3.0,
        max_attempts: int = 5,
        guard: Guard | None = None,
        on_admitted: Callable[[AdmitResult], None] | None = None,
        slots: Slots | None = None,
    ) -> None:
        self.slots = slots  # the housekeeping slots its passes run in
        self.github = github
        self.store = store
        self.owner = owner
        self.clock = clock
        self.recovery_interval = recovery_interval
        self.sweep_interval = sweep_interval
        self.window_days = window_days
        self.max_attempts = max_attempts
        self.guard = guard
        self.on_admitted = on_admitted
        self._duties: dict[str, PeriodicDuty] = {}

    # -- (a) failed deliveries ---------------------------------------------------------------------------

    async def recent_deliveries(self, since: float) -> list[Json]:
        """Every delivery attempt GitHub lists from now back to ``since`` (newest first, cursor pages)."""
        attempts: list[Json] = []
        cursor: str | None = None
        while True:
            page = await self.github.list_app_deliveries(cursor=cursor)
            times = [parse_time(attempt.get("delivered_at")) for attempt in page.deliveries]
            attempts.extend(a for a, at in zip(page.deliveries, times, strict=True) if at is None or at >= since)
            # The list runs newest first; a page that ends before the window ends the walk.
            if page.next_cursor is None or not page.deliveries or (times[-1] is not None and times[-1] < since):
                return attempts
            cursor = page.next_cursor

    async def redeliver_failed_once(self) -> int:
        """One pass: ask GitHub to redeliver each failed delivery in the window, once; how many were asked for."""
        since = self.clock() - self.window_days * DAY
        try:
            failed = failed_deliveries(await self.recent_deliveries(since))
        except JobError as exc:
            log.warning("missed-webhook recovery cannot list the app's deliveries: %s", exc.reason)
            return 0
        todo = await self.store.deliveries_to_recover(sorted(failed))
        requested = 0
        for guid in sorted(todo, key=lambda g: int(failed[g]["id"])):
            attempt = failed[guid]
            now = self.clock()
            if not await self.store.claim_redelivery(
                guid, int(attempt["id"]), owner=self.owner, now=now, stale_before=now - CLAIM_STALE_SECONDS
            ):
                continue
            try:
                await self.github.redeliver(int(attempt["id"]))
            except RateLimited as exc:
                await self.store.release_redelivery(guid, owner=self.owner, error=exc.reason)
                log.warning("missed-webhook recovery paused by a rate limit: %s", exc.reason)
                break
            except PermanentError as exc:
                await self.store.mark_redelivery_requested(guid, owner=self.owner, now=self.clock(), error=exc.reason)
                log.warning(
                    "delivery %s (%s): GitHub refused a redelivery, not asking again: %s",
                    guid,
                    attempt.get("event"),
                    exc.reason,
                )
                continue
            except JobError as exc:
                await self.store.release_redelivery(guid, owner=self.owner, error=exc.reason)
                log.warning(
                    "delivery %s (%s): redelivery request failed, next pass asks again: %s",
                    guid,
                    attempt.get("event"),
                    exc.reason,
                )
                continue
            await self.store.mark_redelivery_requested(guid, owner=self.owner, now=self.clock(), error=None)
            requested += 1
            log.info(
                "asked GitHub to redeliver %s %s delivery %s (failed with %s)",
                attempt.get("event"),
                attempt.get("action") or "",
                guid,
                attempt.get("status_code"),
            )
        await self.store.forget_redeliveries(since)
        return requested

    # -- (b) the sweep of open pull requests -------------------------------------------------------------

    @as_work("sweep")
    async def sweep_once(self) -> int:
        """One pass over every installation's open PRs; how many heads were admitted. An installation GitHub
        rate-limits is left for the next pass; the others are swept."""
        admitted = 0
        try:
            bot_login = await self.github.bot_login()
            for installation in await self.github.list_installations():
                try:
                    admitted += await self._sweep_installation(installation, bot_login)
                except RateLimited as exc:
                    log.warning("sweep: installation %s left for the next pass: %s", installation.get("id"), exc.reason)
        except RateLimited as exc:
            log.warning("sweep of open pull requests paused by a rate limit: %s", exc.reason)
        except JobError as exc:
            log.warning("sweep of open pull requests cannot list the app's installations: %s", exc.reason)
        return admitted

    async def _sweep_installation(self, installation: Mapping[str, Any], bot_login: str) -> int:
        inst = int(installation["id"])
        if installation.get("suspended_at") or not await self.store.installation_active(inst):
            return 0
        installed_at = parse_time(installation.get("created_at"))
        try:
            repos = await self.github.list_installation_repositories(inst)
        except RateLimited:
            raise
        except JobError as exc:
            log.warning("sweep: installation %s skipped: %s", inst, exc.reason)
            return 0
        admitted = 0
        for repo in repos:
            if repo.get("archived"):
                continue
            try:
                pulls = await self.github.list_open_pulls(inst, str(repo["full_name"]))
            except RateLimited:
                raise
            except JobError as exc:
                log.warning("sweep: %s skipped: %s", repo.get("full_name"), exc.reason)
                continue
            for pull in pulls:
                try:
                    admitted += await self._sweep_pull(inst, repo, pull, bot_login, installed_at=installed_at)
                except RateLimited:
                    raise
                except JobError as exc:
                    log.warning("sweep: %s#%s skipped: %s", repo.get("full_name"), pull.get("number"), exc.reason)
        return admitted

    async def _sweep_pull(
        self, inst: int, repo: Mapping[str, Any], pull: Mapping[str, Any], bot_login: str, *, installed_at: float | None
    ) -> int:
        head = str((pull.get("head") or {}).get("sha") or "")
        number, full_name = pull.get("number"), str(repo["full_name"])
        if not head or not isinstance(number, int):
            return 0
        jobs = await self.store.list_jobs(repo=full_name, pr_number=number, limit=500)
        updated_at = parse_time(pull.get("updated_at"))
        if not jobs and installed_at is not None and updated_at is not None and updated_at < installed_at:
            return 0  # untouched since before the app was installed: no webhook was ever missed
        if head_is_handled(jobs, head, draft=pull.get("draft") is True):
            return 0
        if reviewed_by_bot(await self.github.list_reviews(inst, full_name, number), bot_login=bot_login, head_sha=head):
            return 0
        try:
            decision = sweep_decision(inst, repo, pull, guard=self.guard)
        except MalformedPayload as exc:
            log.warning("sweep: %s#%s skipped: %s", full_name, number, exc)
            return 0
        if not isinstance(decision, Enqueue):
            return 0
        spec = decision.job
        earlier = sum(1 for j in jobs if j.head_sha == head)
        delivery = Delivery(
            sweep_delivery_id(spec.repo_id, number, head, spec.trigger, earlier), "pull_request", "sweep"
        )
        result = await self.store.admit(delivery, decision, now=self.clock(), max_attempts=self.max_attempts)
        if self.on_admitted is not None:
            self.on_admitted(result)
        if result.created:
            log.info(
                "sweep: admitted %s#%s at %s (job %s): no webhook had brought it",
                full_name,
                number,
                head[:12],
                result.job_id,
            )
        return 1 if result.created else 0

    # -- the loops ---------------------------------------------------------------------------------------

    def duty(self, name: str) -> PeriodicDuty:
        """The duty ``name`` ("recovery" or "sweep"): a pass at start and every interval, under the duty's lease."""
        if name not in self._duties:
            one_pass, interval = {
                "recovery": (self.redeliver_failed_once, self.recovery_interval),
                "sweep": (self.sweep_once, self.sweep_interval),
            }[name]
            self._duties[name] = PeriodicDuty(
                name,
                one_pass,
                interval=interval,
                clock=self.clock,
                store=self.store,
                owner=self.owner,
                busy_retry=BUSY_RETRY_SECONDS,
                slots=self.slots,
            )
        return self._duties[name]

    def wake_sweep(self) -> None:
        """An installation or repository came (back): sweep its open pull requests now, not at the next interval;
        their heads whose jobs ended with the earlier episode are owed a review."""
        if self.sweep_interval > 0:
            self.duty("sweep").wake()

    async def run(self) -> None:
        """Run each enabled duty at start and then every interval (an interval of 0 disables it)."""
        enabled = [
            name
            for name, interval in (("recovery", self.recovery_interval), ("sweep", self.sweep_interval))
            if interval > 0
        ]
        await asyncio.gather(*(self.duty(name).run() for name in enabled))
