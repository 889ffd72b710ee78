"""GitHub's ids as they are on github.com: review, comment and check-run ids are past 2**31 - 1, so every id the fake
GitHub hands out is past 2**32 (tests/fakes/github/state.py), and what the app stores and compares is each id whole,
on both stores."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from reviewer_app.core.states import JobState
from tests.harness import REPO, SOURCE, Harness, harness_on

BIG = 2**31 - 1


@pytest.fixture(params=["sqlite", "postgres"])
async def h(request, tmp_path) -> AsyncIterator[Harness]:
    async with harness_on(request.param, tmp_path) as running:
        yield running


async def test_every_id_the_fake_hands_out_is_past_32_bits_and_the_app_keeps_each_whole(h: Harness) -> None:
    h.anthropic.script_tool_answer(
        {
            "summary": "One.",
            "comments": [{"path": "src/widget.py", "line": 2, "side": "RIGHT", "body": "x", "severity": "warning"}],
        }
    )
    pull = h.github.add_pull(REPO, 1, files=[SOURCE])
    text = "\n".join(line[1:] for line in SOURCE["patch"].splitlines()[1:])
    h.github.set_file(REPO, "src/widget.py", text, ref=pull.head_sha)
    job_id = (await h.deliver("pull_request", h.pr_payload(pull)))["job_id"]
    job = await h.wait_state(job_id, JobState.SUCCEEDED)
    job = await h.wait_check_synced(job_id)
    gh = h.github
    [review] = h.reviews()
    [comment] = gh.review_comments_for(REPO, 1)
    [run] = h.check_runs(pull.head_sha)
    delivery = gh.add_delivery("ping")
    handed_out = {
        "installation": h.installation_id,
        "repository": gh.repos[REPO].id,
        "review": review["id"],
        "review comment": comment["id"],
        "check run": run["id"],
        "check suite": run["check_suite"]["id"],
        "delivery": delivery["id"],
        "user": review["user"]["id"],
    }
    # (An App's own id is small on github.com too, and comes from the App's settings: it stays as configured.)
    assert {k: v for k, v in handed_out.items() if v <= 2 * BIG + 1} == {}
    # What the app stored is the same number, not a truncated or rounded one.
    assert job.review_id == review["id"] and job.check_run_id == run["id"]
    assert job.installation_id == h.installation_id and job.repo_id == gh.repos[REPO].id
    [finding] = await h.store.open_findings(gh.repos[REPO].id, 1)
    assert finding.review_id == review["id"] and finding.comment_id == comment["id"]
    assert finding.thread_id == f"PRRT_{comment['id']}"
