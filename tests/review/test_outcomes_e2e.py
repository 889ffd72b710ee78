"""Each fate arises from what the app already receives and reads, end to end against the fake GitHub, on SQLite and
PostgreSQL: a push that rewrites the commented line makes the finding fixed, a writer's 👎 (or disputing reply, or
resolved thread) dismissed, a merge with it untouched open_at_merge, a close open_at_close; each published review is
recorded with its model, prompt version and settings, and an experiment's variant is applied and recorded."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from reviewer_app.core.experiments import assign
from reviewer_app.core.states import JobState
from reviewer_app.review.outcomes import PROMPT_VERSION
from reviewer_app.review.repo_config import CONFIG_PATH
from tests.fakes.github import Pull
from tests.fakes.github.graphql import resolve_thread_as
from tests.fakes.github.routes.issues import add_reaction
from tests.harness import REPO, Harness, harness_on
from tests.review.test_findings_e2e import V1, push, revision_1
from tests.review.test_replies import reply_payload

NOTHING_NEW = {"summary": "Nothing new.", "comments": []}


@pytest.fixture(params=["sqlite", "postgres"])
async def h(request, tmp_path) -> AsyncIterator[Harness]:
    async with harness_on(request.param, tmp_path) as running:
        yield running


async def fates(h: Harness) -> dict[int, tuple[str, str | None]]:
    """(fate, what gave it) of each finding, by the id of the app's review comment."""
    rows = await h.store.outcome_findings(since=0.0)
    return {r["comment_id"]: (r["fate"], r["fate_source"]) for r in rows}


async def close(h: Harness, pull: Pull, *, merged: bool) -> None:
    h.github.close_pull(REPO, pull.number, merged=merged)
    answer = await h.deliver("pull_request", h.pr_payload(pull, "closed", merged=merged))
    assert answer["outcome"] == "cancelled"


async def test_a_push_rewriting_the_commented_line_makes_it_fixed_and_the_other_stays_open(h: Harness) -> None:
    pull, (unclosed, division) = await revision_1(h)
    assert await fates(h) == {unclosed: ("open", None), division: ("open", None)}

    fixed = [line.replace("/ 0", "/ max(len(xs), 1)") for line in V1]
    job_id = await push(h, pull, fixed, NOTHING_NEW)

    job = await h.job(job_id)
    assert await fates(h) == {unclosed: ("open", None), division: ("fixed", f"push {job.head_sha[:12]}")}


async def test_a_writers_thumbs_down_dismisses_and_an_outsiders_does_not(h: Harness) -> None:
    pull, (unclosed, division) = await revision_1(h)
    h.github.set_permission(REPO, "maintainer", "write")
    add_reaction(h.github, unclosed, "maintainer", "-1")
    add_reaction(h.github, division, "outsider", "-1")  # no role in the repository: no signal

    await push(h, pull, V1, NOTHING_NEW)  # the next review reads the reactions, as it did before fates existed

    assert await fates(h) == {unclosed: ("dismissed", "👎 by maintainer"), division: ("open", None)}
    reaction_reads = h.github.requests_matching("GET", r"/pulls/comments/\d+/reactions$")
    assert len(reaction_reads) == 2  # one per finding, the signals' own reads: the fate costs no request


async def test_a_merge_with_the_finding_untouched_leaves_it_open_at_merge(h: Harness) -> None:
    pull, (unclosed, division) = await revision_1(h)
    fixed = [line.replace("/ 0", "/ max(len(xs), 1)") for line in V1]
    head = (await h.job(await push(h, pull, fixed, NOTHING_NEW))).head_sha
    requests = len(h.github.requests)

    await close(h, pull, merged=True)

    # The fix before the merge stands; the finding nobody touched was open at merge.
    assert await fates(h) == {unclosed: ("open_at_merge", "merged"), division: ("fixed", f"push {head[:12]}")}
    assert len(h.github.requests) == requests  # the close's fate is written with the close: no request at all


async def test_a_close_without_merge_leaves_the_findings_open_at_close(h: Harness) -> None:
    pull, (unclosed, division) = await revision_1(h)
    await close(h, pull, merged=False)
    assert await fates(h) == {unclosed: ("open_at_close", "closed"), division: ("open_at_close", "closed")}


async def test_a_thread_resolved_by_a_writer_on_unchanged_code_dismisses_it(h: Harness) -> None:
    pull, (unclosed, division) = await revision_1(h)
    h.github.set_permission(REPO, "maintainer", "write")
    resolve_thread_as(h.github, unclosed, "maintainer")
    resolve_thread_as(h.github, division, "outsider")

    await push(h, pull, V1, NOTHING_NEW)

    assert await fates(h) == {unclosed: ("dismissed", "thread resolved by maintainer"), division: ("open", None)}


async def test_a_writers_reply_disputing_the_finding_dismisses_it(h: Harness) -> None:
    pull, (unclosed, division) = await revision_1(h)
    h.github.set_permission(REPO, "maintainer", "write")
    h.anthropic.script_answer("Understood: then it is fine.", disputes=True, learning=None)
    payload = reply_payload(
        h, pull, unclosed, "Intended: it is closed by the caller.", login="maintainer", association="MEMBER"
    )
    admitted = await h.deliver("pull_request_review_comment", payload)
    await h.wait_state(admitted["job_id"], JobState.SUCCEEDED)

    assert await fates(h) == {unclosed: ("dismissed", "reply by maintainer"), division: ("open", None)}


async def test_each_published_review_is_recorded_with_its_model_prompt_version_and_settings(h: Harness) -> None:
    await revision_1(h)
    (run,) = await h.store.review_runs(since=0.0)
    assert (run.repo_full_name, run.pr_number, run.findings, run.prompt_version) == (REPO, 1, 2, PROMPT_VERSION)
    assert run.model == "claude-sonnet-4-5" and run.verify_model == ""  # the harness runs no verification pass
    assert run.settings["min_confidence"] == 50 and run.settings["verify"] is False
    assert (run.experiment, run.variant) == (None, None)
    assert [u["model"] for u in run.usage] == [run.model]
    assert all(u["input_tokens"] + u["cache_creation_tokens"] > 0 for u in run.usage)


EXPERIMENT = """\
experiment:
  name: conf-65
  a: {min_confidence: 50}
  b: {min_confidence: 65, max_comments: 3}
"""


async def test_an_experiment_assigns_each_pull_request_its_variant_stably_and_records_it(h: Harness) -> None:
    h.github.set_file(REPO, CONFIG_PATH, EXPERIMENT)
    repo_id = h.github.repos[REPO].id
    numbers = [n for n in range(1, 40) if assign("conf-65", repo_id, n) == "a"][:1]
    numbers += [n for n in range(1, 40) if assign("conf-65", repo_id, n) == "b"][:1]
    for number in numbers:
        h.anthropic.script_tool_answer({"summary": "Fine.", "comments": []})
        _, job_id = await h.open_pr(number)
        await h.wait_state(job_id, JobState.SUCCEEDED)

    runs = {r.pr_number: r for r in await h.store.review_runs(since=0.0)}
    a, b = runs[numbers[0]], runs[numbers[1]]
    assert (a.experiment, a.variant, a.settings["min_confidence"], a.settings["max_comments"]) == (
        "conf-65",
        "a",
        50,
        5,
    )
    assert (b.experiment, b.variant, b.settings["min_confidence"], b.settings["max_comments"]) == (
        "conf-65",
        "b",
        65,
        3,
    )
