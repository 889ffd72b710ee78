"""What people see never waits behind bulk work: the check-run sync and the outbox run outside the housekeeping
slots, so a long sweep and redelivery pass holding every slot do not keep a check run "in progress" or a reply
unsent (issue #38, point 5)."""

from __future__ import annotations

from reviewer_app.core.states import JobState
from tests.harness import harness
from tests.helpers import eventually


async def _now(value: object) -> object:
    return value


async def test_check_runs_complete_and_replies_go_out_while_slow_passes_hold_every_housekeeping_slot(tmp_path) -> None:
    env = {
        "REVIEWER_HOUSEKEEPING_CONCURRENCY": "2",
        "REVIEWER_RECOVERY_SECONDS": "3600",
        "REVIEWER_SWEEP_SECONDS": "3600",
    }
    async with harness(tmp_path, **env) as h:
        # The redelivery pass and the sweep each take a slot and hang on GitHub until the test lets them go.
        deliveries = h.github.inject("GET", r"^/app/hook/deliveries", "hang", times=None)
        sweep = h.github.inject("GET", r"^/installation/repositories", "hang", times=None)
        await eventually(lambda: _now(deliveries.hits > 0 and sweep.hits > 0))
        assert h.svc.housekeeping is not None and h.svc.housekeeping.running == h.svc.housekeeping.size

        pull, job_id = await h.open_pr()
        job = await h.wait_check_synced(job_id)
        [run] = h.check_runs(pull.head_sha)
        assert (job.state, run["status"], run["conclusion"]) == (JobState.SUCCEEDED, "completed", "success")
        answer = await h.deliver("issue_comment", h.comment_payload(pull, "/review help"))
        assert answer.get("job_id") is None

        async def replied() -> bool:
            return any(
                "/review" in c["body"] and c["user"]["type"] == "Bot"
                for c in h.github.issue_comments_for(pull.repo, pull.number)
            )

        await eventually(replied)
        assert h.svc.housekeeping.running == h.svc.housekeeping.size  # the slow passes still hold every slot
        h.github.release_hangs()
