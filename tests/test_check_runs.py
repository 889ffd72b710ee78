"""Check runs under races, end to end: every run ends in the state its job ended in, and shows a review running."""

from __future__ import annotations

from typing import Any

from reviewer_app.core.states import JobState
from tests.harness import REPO, SOURCE, Harness, harness
from tests.helpers import eventually


async def _now(value: Any) -> Any:
    return value


async def _shows_in_progress_while_running(h: Harness, job_id: int, sha: str) -> None:
    async def in_progress() -> bool:
        job = await h.job(job_id)
        assert job.state == JobState.RUNNING, f"job {job_id} ended ({job.state}) before its check run showed it running"
        runs = h.check_runs(sha)
        return len(runs) == 1 and runs[0]["status"] == "in_progress"

    await eventually(in_progress, timeout=10)


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
