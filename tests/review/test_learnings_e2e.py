"""Learnings used by reviews, end to end against the fake GitHub and the fake Anthropic, on SQLite and PostgreSQL: a
do-not-flag rule taught with `/review learn` keeps the same finding off the next pull request (withheld, counted and
linked in the check run, named in the review's footer, in the next prompt as the team's rule); `/review forget` removes
it and the next review no longer sees it; the verifier may name the learning that covers a finding."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from reviewer_app.core.states import JobState
from tests.fakes.github import added_file
from tests.harness import REPO, Harness, harness_on
from tests.helpers import eventually
from tests.prompt_text import between, user_text

PATH = "src/app.py"
LINES = ["import os", "", "def load(path):", "    data = open(path).read()", "    return data", ""]
UNCLOSED = "The file is never closed.\n\nUse a `with` block."
RULE = "Do not flag a file that is never closed: our scripts exit right after."


@pytest.fixture(params=["sqlite", "postgres"])
async def h(request, tmp_path) -> AsyncIterator[Harness]:
    async with harness_on(request.param, tmp_path) as running:
        yield running


def finding(body: str = UNCLOSED, line: int = 4) -> dict[str, Any]:
    return {"path": PATH, "line": line, "side": "RIGHT", "body": body, "severity": "warning"}


async def review_pr(h: Harness, number: int, comments: list[dict[str, Any]]) -> Any:
    """Open pull request ``number`` with the same file, answered by the model with ``comments``; its finished job."""
    h.anthropic.script_tool_answer({"summary": "One problem.", "comments": comments})
    pull = h.github.add_pull(REPO, number, files=[added_file(PATH, LINES)])
    h.github.set_file(REPO, PATH, "\n".join(LINES), ref=pull.head_sha)
    answer = await h.deliver("pull_request", h.pr_payload(pull))
    job = await h.wait_check_synced(answer["job_id"])
    assert job.state == JobState.SUCCEEDED, job.last_error
    return job


async def teach(h: Harness, number: int, body: str) -> None:
    """A maintainer's command on PR ``number``, applied once its reaction arrived."""
    payload = h.comment_payload(h.github.pulls[(REPO, number)], body)

    async def answered() -> bool:
        return bool(h.github.reactions.get(payload["comment"]["id"]))

    await h.deliver("issue_comment", payload)
    await eventually(answered)


def inline_bodies(h: Harness, number: int) -> list[str]:
    return [c["body"] for c in h.github.review_comments_for(REPO, number)]


async def test_a_learned_rule_keeps_the_finding_off_the_next_pr_until_it_is_forgotten(h: Harness) -> None:
    repo = str(h.github.repos[REPO].id)
    first = await review_pr(h, 1, [finding()])
    assert any("never closed" in b for b in inline_bodies(h, 1))
    await teach(h, 1, f"/review learn --path src/** {RULE}")
    (learning,) = await h.store.list_learnings(repo)

    second = await review_pr(h, 2, [finding()])

    assert inline_bodies(h, 2) == []  # the same finding, withheld
    prompt = user_text(h.anthropic.review_requests[-1])
    rules = between(prompt, '<team_learnings count="1">', "</team_learnings>")
    assert f"[learning {learning.id}] (do-not-flag, files src/**) {RULE}" in rules
    [run] = h.check_runs(h.github.pulls[(REPO, 2)].head_sha)
    summary = run["output"]["summary"]
    assert "- 1 withheld by team learnings" in summary
    assert f"_([team learning {learning.id}]({learning.source_url}))_" in summary
    body = h.reviews(2)[0]["body"]
    assert "<summary>1 team learning applied</summary>" in body
    assert f"[team learning {learning.id}]({learning.source_url}) (do-not-flag · `src/**`): {RULE}" in body
    job = await h.job(second.id)
    assert job.answer.learnings == (learning.id,) and job.answer.withheld[0].learning == learning.id
    (applied,) = await h.store.list_learnings(repo)
    assert applied.times_applied == 1 and applied.last_applied is not None
    assert first.answer.learnings == ()

    await teach(h, 2, f"/review forget {learning.id}")
    assert await h.store.list_learnings(repo) == []
    await review_pr(h, 3, [finding()])

    assert any("never closed" in b for b in inline_bodies(h, 3))  # published again
    assert "<team_learnings" not in user_text(h.anthropic.review_requests[-1])
    assert "team learning" not in h.reviews(3)[0]["body"]


async def test_a_finding_on_another_subject_or_outside_the_glob_is_published(h: Harness) -> None:
    await review_pr(h, 1, [])
    await teach(h, 1, f"/review learn --path lib/** {RULE}")
    await teach(h, 1, "/review learn --prefer Prefer pathlib over os.path in new code.")

    await review_pr(h, 2, [finding(), finding("`load` swallows the error of a missing path.", 5)])

    assert len(inline_bodies(h, 2)) == 2
    prompt = user_text(h.anthropic.review_requests[-1])
    # The rule bound to lib/** is not in the prompt of a pull request that changes only src/.
    assert "Prefer pathlib" in prompt and RULE not in prompt
