"""Check runs under races, end to end: every run ends in the state its job ended in, and shows a review running."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from reviewer_app.core.states import JobState
from reviewer_app.github.checks import CheckRuns
from reviewer_app.review_stack import build_review_stack
from tests.harness import REPO, SOURCE, Harness, harness
from tests.helpers import eventually

DUTY = "duty:check-sync"


async def _now(value: Any) -> Any:
    return value


async def _shows_in_progress_while_running(h: Harness, job_id: int, sha: str) -> None:
    async def in_progress() -> bool:
        job = await h.job(job_id)
        assert job.state == JobState.RUNNING, f"job {job_id} ended ({job.state}) before its check run showed it running"
        runs = h.check_runs(sha)
        return len(runs) == 1 and runs[0]["status"] == "in_progress"

    await eventually(in_progress, timeout=10)


def _check_run_writes(h: Harness) -> int:
    return sum(len(h.github.requests_matching(m, r"/check-runs")) for m in ("POST", "PATCH"))


@contextlib.asynccontextmanager
async def _other_host(h: Harness) -> AsyncIterator[CheckRuns]:
    """Another host on the same database, with its own GitHub client (so its own queue of writes). It holds the
    check-sync duty: this host's passes skip until the test releases it, and the test runs the other host's."""
    stack = build_review_stack(h.svc.cfg, h.store)
    owner = stack.checks.owner
    await eventually(lambda: h.store.take_duty_lease(DUTY, owner=owner, now=time.time(), seconds=600))
    try:
        yield stack.checks
    finally:
        await h.store.release_duty_lease(DUTY, owner=owner, now=time.time())
        await stack.session.close()
        if stack.model_client is not None:
            await stack.model_client.close()


async def _hand_back_the_duty(h: Harness, there: CheckRuns) -> None:
    await h.store.release_duty_lease(DUTY, owner=there.owner, now=time.time())


async def test_the_worker_shows_in_progress_when_the_sync_recorded_the_run_after_its_claim(tmp_path) -> None:
    # The sync starts creating job 2's run while job 2 waits for the slot; the worker claims job 2 (its snapshot:
    # no run) before the sync records the run. Its claim to create one then fails, and it must show the sync's.
    async with harness(tmp_path, REVIEWER_CONCURRENCY="1") as h:
        h.anthropic.script_slow_answer(1.5)  # job 1 holds the only slot
        h.anthropic.script_slow_answer(1.5)  # job 2's review, long enough to watch
        busy, busy_id = await h.open_pr(number=1)
        await h.wait_state(busy_id, JobState.RUNNING)
        pull = h.github.add_pull(REPO, 2, files=[SOURCE])
        creating = h.github.inject("GET", rf"/commits/{pull.head_sha}/check-runs", "hang")  # the creator looks first
        job_id = (await h.deliver("pull_request", h.pr_payload(pull)))["job_id"]
        await eventually(lambda: _now(creating.hits == 1))
        assert (await h.job(job_id)).state == JobState.QUEUED  # the sync is creating it, not the worker
        await h.wait_state(job_id, JobState.RUNNING)
        h.github.release_hangs()

        await _shows_in_progress_while_running(h, job_id, pull.head_sha)
        job = await h.wait_check_synced(job_id)
        [run] = h.check_runs(pull.head_sha)
        assert job.state == JobState.SUCCEEDED and (run["id"], run["conclusion"]) == (job.check_run_id, "success")


async def test_another_hosts_sync_creating_the_run_after_the_claim_shows_it_in_progress(tmp_path) -> None:
    # Host B's sync is still creating job 2's run when this host's worker claims the job: the worker finds no run to
    # show and leaves it to its creator, which must then show the job's phase now, not the one it read.
    async with harness(tmp_path, REVIEWER_CONCURRENCY="1") as h, _other_host(h) as there:
        h.anthropic.script_slow_answer(1.5)  # job 1 holds the only slot
        h.anthropic.script_slow_answer(1.5)  # job 2's review, long enough to watch
        busy, busy_id = await h.open_pr(number=1)
        await eventually(lambda: _now(bool(h.check_runs(busy.head_sha))))  # its worker opened it
        creating = h.github.inject("POST", r"/check-runs$", "hang")
        pull, job_id = await h.open_pr(number=2)
        sync_pass = asyncio.create_task(there.run_once())
        await eventually(lambda: _now(creating.hits == 1))
        await h.wait_state(job_id, JobState.RUNNING)
        h.github.release_hangs()
        await sync_pass

        await _shows_in_progress_while_running(h, job_id, pull.head_sha)
        await _hand_back_the_duty(h, there)
        job = await h.wait_check_synced(job_id)
        [run] = h.check_runs(pull.head_sha)
        assert job.state == JobState.SUCCEEDED and (run["id"], run["conclusion"]) == (job.check_run_id, "success")


async def test_a_sync_whose_update_lands_late_cannot_leave_a_reviewed_job_shown_cancelled(tmp_path) -> None:
    # Host B's sync closes job 2's run as cancelled (the PR was closed), but its PATCH lands late: meanwhile the PR
    # was reopened, the job retried, and its worker showed it running. The run must end as the review ended.
    async with harness(tmp_path, REVIEWER_CONCURRENCY="1") as h, _other_host(h) as there:
        h.anthropic.script_slow_answer(2)  # job 1 holds the only slot: job 2 waits, queued
        busy, busy_id = await h.open_pr(number=1)
        await h.wait_state(busy_id, JobState.RUNNING)
        pull, job_id = await h.open_pr(number=2)
        await there.run_once()
        [run] = h.check_runs(pull.head_sha)
        assert run["status"] == "queued"
        h.github.close_pull(REPO, 2)
        await h.deliver("pull_request", h.pr_payload(pull, action="closed"))
        assert (await h.job(job_id)).state == JobState.CANCELLED

        late = h.github.inject("PATCH", rf"/check-runs/{run['id']}$", "hang")
        sync_pass = asyncio.create_task(there.run_once())
        await eventually(lambda: _now(late.hits == 1))  # "cancelled" is on its way
        pull.state = "open"
        assert await h.store.retry_job(job_id, now=time.time())
        await eventually(lambda: _now(h.check_runs(pull.head_sha)[0]["status"] == "in_progress"))
        h.github.release_hangs()  # "cancelled" lands after "in progress"
        await sync_pass

        await _hand_back_the_duty(h, there)
        job = await h.wait_state(job_id, JobState.SUCCEEDED)
        job = await h.wait_check_synced(job_id)
        [run] = h.check_runs(pull.head_sha)
        assert (run["status"], run["conclusion"]) == ("completed", "success") and job.review_id is not None


async def test_a_worker_that_lost_its_lease_leaves_the_check_run_alone(tmp_path) -> None:
    async with harness(tmp_path, REVIEWER_DEBOUNCE_SECONDS="1") as h:
        d = h.svc.dispatcher
        d.renew_interval = 60  # the worker does not hear from its renewer that its lease is gone
        stall = h.github.inject("GET", r"/contents/", "hang")
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        answer = await h.deliver("pull_request", h.pr_payload(pull, "synchronize"))  # waits out the debounce
        job_id = answer["job_id"]

        async def shown_queued() -> bool:
            job = await h.job(job_id)
            return job.state == JobState.QUEUED and job.check_run_id is not None

        await eventually(shown_queued)  # the worker knows the run when it claims the job
        await eventually(lambda: _now(stall.hits == 1))  # it is reading the repository's settings
        # The pull request is closed meanwhile: the job is cancelled (the worker's lease with it), its run completes.
        h.github.close_pull(REPO, 1)
        await h.deliver("pull_request", h.pr_payload(pull, action="closed"))
        job = await h.wait_check_synced(job_id)
        assert job.state == JobState.CANCELLED
        writes = _check_run_writes(h)

        h.github.release_hangs()  # the worker goes on, unaware
        await eventually(lambda: _now(d.stale_writes_refused >= 1))
        assert _check_run_writes(h) == writes
        [run] = h.check_runs(pull.head_sha)
        assert (run["status"], run["conclusion"]) == ("completed", "cancelled")
        assert h.anthropic.message_requests == []  # it stopped at the check run, before asking the model


async def test_a_run_created_with_a_lost_answer_is_closed_when_its_job_ends_before_it_was_recorded(tmp_path) -> None:
    # Found by the model-based test: GitHub created the run but the answer was lost, so the job has no run id; the
    # job then ended (PR closed) before the next pass found the run. It must not stay queued forever.
    # The lookup by external id (after the one before the creation) fails until the PR is closed, so no pass in between (a wake-up that landed during
    # the first pass runs a second at once) finds the run before the job ends: the interleaving is forced.
    async with harness(tmp_path, REVIEWER_CHECK_SYNC_SECONDS="3600") as h:
        await h.store.set_setting("queue_paused", "1")
        h.github.inject("GET", r"/commits/[0-9a-f]+/check-runs$", "error", times=None, after=1)  # after the first
        h.github.inject("POST", r"/check-runs$", "lost_response", mode="drop")
        pull, job_id = await h.open_pr()
        await eventually(lambda: _now(len(h.check_runs(pull.head_sha)) == 1))
        assert (await h.job(job_id)).check_run_id is None
        h.github.close_pull(REPO, 1)
        h.github.clear_faults()
        await h.deliver("pull_request", h.pr_payload(pull, "closed"))
        await h.wait_check_synced(job_id)
        [run] = h.check_runs(pull.head_sha)
        assert (run["status"], run["conclusion"]) == ("completed", "cancelled")
        assert (await h.job(job_id)).check_run_id == run["id"]


async def _now(value: Any) -> Any:
    return value


async def test_a_retried_finished_job_gets_a_new_check_run_and_never_reopens_the_completed_one(tmp_path) -> None:
    # `jobs retry` PATCHed queued, then in_progress, onto the completed run; GitHub does not reliably reopen one.
    async with harness(tmp_path) as h:
        h.anthropic.script_error(400, "invalid_request_error", "prompt is too long")
        pull, job_id = await h.open_pr()
        await h.wait_state(job_id, JobState.FAILED)
        await h.wait_check_synced(job_id)
        [failed] = h.check_runs(pull.head_sha)
        assert (failed["status"], failed["conclusion"]) == ("completed", "neutral")
        assert await h.store.retry_job(job_id, now=time.time())
        await h.wait_state(job_id, JobState.SUCCEEDED)
        job = await h.wait_check_synced(job_id)
        old, new = sorted(h.check_runs(pull.head_sha), key=lambda r: r["id"])
        assert (old["id"], old["conclusion"], new["conclusion"]) == (failed["id"], "neutral", "success")
        assert job.check_run_id == new["id"] and new["external_id"] == old["external_id"]
        assert h.github.check_run_regressions == []


async def test_a_retry_after_an_attempt_began_leaves_the_check_run_in_progress(tmp_path) -> None:
    # A retry PATCHed `queued` onto the run its attempt had put in progress.
    async with harness(tmp_path, REVIEWER_RETRY_BASE_SECONDS="2", REVIEWER_RETRY_MAX_SECONDS="2") as h:
        h.anthropic.script_overloaded()
        pull, job_id = await h.open_pr()

        async def retrying() -> bool:
            runs = h.check_runs(pull.head_sha)
            return bool(runs) and runs[0]["output"]["title"].startswith("Retrying")

        await eventually(retrying)
        assert h.check_runs(pull.head_sha)[0]["status"] == "in_progress"
        await h.wait_state(job_id, JobState.SUCCEEDED)
        await h.wait_check_synced(job_id)
        assert h.github.check_run_regressions == []
