"""A repository's webhook names no installation (what `gh webhook forward` delivers to a local `serve`): the gate
learns it from GitHub (`GET /repos/{owner}/{repo}/installation`, with the App's JWT) and the review runs as usual;
a repository no installation of the App holds ends its job saying so."""

from __future__ import annotations

from reviewer_app.core.gate import NO_INSTALLATION
from reviewer_app.core.states import JobState
from tests.github.test_fake_schema import disagreements
from tests.harness import REPO, SOURCE, harness


async def test_a_webhook_without_an_installation_is_reviewed_in_the_repositorys_installation(tmp_path) -> None:
    async with harness(tmp_path) as h:
        h.anthropic.script_tool_answer({"summary": "Looks fine.", "comments": []})
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        payload = h.pr_payload(pull)
        del payload["installation"]  # as a repository's webhook has it
        admitted = await h.deliver("pull_request", payload)
        assert admitted["outcome"] == "enqueued"
        job = await h.wait_check_synced(admitted["job_id"])
        assert job.state == JobState.SUCCEEDED, job.last_error
        assert job.installation_id == h.installation_id  # learned, and kept on the job
        [review] = h.reviews()
        assert review["user"]["login"] == "reviewer-app[bot]"
        [run] = h.check_runs(pull.head_sha)
        assert run["conclusion"] == "success"
        [asked] = h.github.requests_matching("GET", r"^/repos/octo-org/widgets/installation$")
        assert (asked.auth, asked.status) == ("jwt", 200)
        problems, seen = disagreements(h.github.requests)
        assert problems == [] and ("GET", "/repos/{owner}/{repo}/installation") in seen


async def test_a_repository_no_installation_holds_ends_its_job_saying_so(tmp_path) -> None:
    async with harness(tmp_path) as h:
        other = "elsewhere/tool"
        h.github.add_repo(other, 4242424242)  # an installation of the App that does not exist (any more)
        pull = h.github.add_pull(other, 7, files=[SOURCE])
        payload = h.pr_payload(pull)
        del payload["installation"]
        admitted = await h.deliver("pull_request", payload)
        job = await h.wait_state(admitted["job_id"], JobState.CANCELLED, JobState.SUCCEEDED, JobState.FAILED)
        assert (job.state, job.outcome) == (JobState.CANCELLED, NO_INSTALLATION)
        assert job.installation_id is None
        assert h.anthropic.message_requests == [] and h.github.reviews_for(other, 7) == []
        [asked] = h.github.requests_matching("GET", r"^/repos/elsewhere/tool/installation$")
        assert asked.status == 404
