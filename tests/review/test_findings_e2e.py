"""The app remembers what it posted, end to end against the fakes, on SQLite and PostgreSQL: a finding on unchanged
code is not posted again (the model is told it was raised, and a repeat is dropped), moved code is still matched,
the app resolves its own threads whose code changed (not one a person replied in, not when the repository turns it
off), and GitHub's GraphQL failing never costs the review."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from reviewer_app.core.states import JobState
from tests.fakes.github import Pull, added_file
from tests.fakes.github.graphql import add_thread_reply, is_resolved, thread_replies
from tests.harness import REPO, Harness, harness_on
from tests.prompt_text import user_text

PATH = "src/app.py"
V1 = [
    "import os",
    "",
    "def load(path):",
    "    data = open(path).read()",
    "    return data",
    "",
    "def ratio(xs):",
    "    return len(xs) / 0",
    "",
]
UNCLOSED = "The file is never closed.\n\nUse a `with` block."
DIVISION = "Division by zero on every call."


@pytest.fixture(params=["sqlite", "postgres"])
async def h(request, tmp_path) -> AsyncIterator[Harness]:
    async with harness_on(request.param, tmp_path) as running:
        yield running


def comment(line: int, body: str, severity: str = "warning") -> dict[str, Any]:
    return {"path": PATH, "line": line, "side": "RIGHT", "body": body, "severity": severity}


async def revision_1(h: Harness) -> tuple[Pull, list[int]]:
    """A PR whose first review raises two findings: the unclosed file (line 4) and the division (line 8)."""
    h.anthropic.script_tool_answer(
        {"summary": "Two problems.", "comments": [comment(4, UNCLOSED), comment(8, DIVISION, "critical")]}
    )
    pull = h.github.add_pull(REPO, 1, files=[added_file(PATH, V1)])
    h.github.set_file(REPO, PATH, "\n".join(V1), ref=pull.head_sha)
    answer = await h.deliver("pull_request", h.pr_payload(pull))
    await h.wait_state(answer["job_id"], JobState.SUCCEEDED)
    by_line = {c["line"]: c["id"] for c in h.github.review_comments_for(REPO, 1)}
    ids = [by_line[4], by_line[8]]  # posted most severe first: the division, then the unclosed file
    assert len(by_line) == 2
    assert min(ids) > 2**31 and h.reviews()[0]["id"] > 2**31  # GitHub-sized ids (tests/fakes/github/state.py)
    return pull, ids


async def push(h: Harness, pull: Pull, lines: list[str], answer: dict[str, Any]) -> int:
    """A new head whose file reads ``lines``, reviewed with the model's ``answer``; the finished job's id."""
    h.anthropic.script_tool_answer(answer)
    sha = h.github.advance_head(REPO, 1, files=[added_file(PATH, lines)])
    h.github.set_file(REPO, PATH, "\n".join(lines), ref=sha)
    delivered = await h.deliver("pull_request", h.pr_payload(pull, "synchronize"))
    await h.wait_state(delivered["job_id"], JobState.SUCCEEDED, JobState.FAILED)
    job = await h.wait_check_synced(delivered["job_id"])
    assert job.state == JobState.SUCCEEDED, job.last_error
    return job.id


def posted_by(h: Harness, review_id: int) -> list[dict[str, Any]]:
    return [c for c in h.github.review_comments_for(REPO, 1) if c.get("pull_request_review_id") == review_id]


async def test_a_finding_on_unchanged_code_is_not_posted_again_even_when_the_code_moved(h: Harness) -> None:
    pull, (unclosed, division) = await revision_1(h)
    repo_id = h.github.repos[REPO].id
    remembered = await h.store.open_findings(repo_id, 1)
    assert sorted((f.line, f.comment_id, f.thread_id) for f in remembered) == [
        (4, unclosed, f"PRRT_{unclosed}"),
        (8, division, f"PRRT_{division}"),
    ]

    # Two lines added on top: the same code two lines further down. The model repeats one finding (reworded,
    # at its new line) and raises a new one.
    moved = ["# Loading helpers.", "# See the docs.", *V1]
    new = comment(1, "The header names the wrong module.", "warning")
    job_id = await push(h, pull, moved, {"summary": "One new problem.", "comments": [comment(6, UNCLOSED), new]})

    prompt = user_text(h.anthropic.message_requests[-1])
    raised = prompt[prompt.index("<already_raised count=") : prompt.index("</already_raised>")]
    assert "src/app.py line 6 (warning): The file is never closed." in raised
    assert "src/app.py line 10 (critical): Division by zero on every call." in raised
    assert raised.count("\n- ") == 2
    assert prompt.index("<pr_data>") < prompt.index("<already_raised count=") < prompt.index("</pr_data>")
    assert "Do not raise them again" in prompt

    job = await h.job(job_id)
    assert job.review_id is not None
    assert [c["line"] for c in posted_by(h, job.review_id)] == [1]  # the repeat was dropped before publication
    body = h.reviews()[-1]["body"]
    assert "Still open from earlier reviews: 2" in body
    assert f"{pull_url(pull)}#discussion_r{unclosed}" in body and f"#discussion_r{division}" in body
    assert not is_resolved(h.github, unclosed) and not is_resolved(h.github, division)
    assert h.github.review_threads.rejected == []


def pull_url(pull: Pull) -> str:
    return f"https://github.com/{REPO}/pull/{pull.number}"


async def test_the_apps_thread_whose_code_changed_is_resolved_but_not_one_a_person_replied_in(h: Harness) -> None:
    pull, (unclosed, division) = await revision_1(h)
    add_thread_reply(h.github, REPO, 1, division, "octocat", "Intentional: it must fail loudly.")
    fixed = [*V1[:3], "    with open(path) as f:", "        data = f.read()", *V1[4:7], "    return len(xs) / 1", ""]

    job_id = await push(h, pull, fixed, {"summary": "Fine now.", "comments": []})

    assert is_resolved(h.github, unclosed)
    [reply] = thread_replies(h.github, REPO, 1, unclosed)
    assert reply["user"]["login"] == "reviewer-app[bot]" and "changed in" in reply["body"]
    assert not is_resolved(h.github, division)  # a person objected: left alone
    assert [r["user"]["login"] for r in thread_replies(h.github, REPO, 1, division)] == ["octocat"]
    repo_id = h.github.repos[REPO].id
    assert await h.store.resolved_findings(repo_id, 1) == 1
    job = await h.job(job_id)
    [run] = h.check_runs(job.head_sha)
    assert "1 earlier review thread resolved" in run["output"]["summary"]
    assert h.github.review_threads.rejected == []


async def test_a_file_that_went_away_resolves_its_threads(h: Harness) -> None:
    pull, (unclosed, division) = await revision_1(h)
    h.anthropic.script_tool_answer({"summary": "Removed.", "comments": []})
    sha = h.github.advance_head(REPO, 1, files=[added_file("src/other.py", ["x = 1"])])
    h.github.set_file(REPO, "src/other.py", "x = 1", ref=sha)
    delivered = await h.deliver("pull_request", h.pr_payload(pull, "synchronize"))
    await h.wait_state(delivered["job_id"], JobState.SUCCEEDED)

    assert is_resolved(h.github, unclosed) and is_resolved(h.github, division)
    assert "no longer in the pull request" in thread_replies(h.github, REPO, 1, unclosed)[0]["body"]


async def test_the_repository_can_turn_resolving_off(h: Harness) -> None:
    h.github.set_file(REPO, ".github/reviewer.yml", "resolve_outdated: false\n")
    pull, (unclosed, _) = await revision_1(h)
    fixed = [*V1[:3], "    with open(path) as f:", "        data = f.read()", *V1[4:]]

    await push(h, pull, fixed, {"summary": "Fine now.", "comments": []})

    assert not is_resolved(h.github, unclosed)
    assert thread_replies(h.github, REPO, 1, unclosed) == []
    mutations = [r for r in h.github.review_threads.documents if r.lstrip().startswith("mutation")]
    assert mutations == []


async def test_graphql_failing_never_costs_the_review_and_the_next_review_resolves(h: Harness, caplog) -> None:
    pull, (unclosed, _) = await revision_1(h)
    fixed = [*V1[:3], "    with open(path) as f:", "        data = f.read()", *V1[4:]]
    fault = h.github.inject("POST", r"^/graphql$", "error", times=None, status=502)

    job_id = await push(h, pull, fixed, {"summary": "Fine now.", "comments": []})

    assert fault.hits >= 1
    assert "review threads not tended (tried again at the next review)" in caplog.text
    assert (await h.job(job_id)).review_id is not None  # published all the same
    assert len(h.reviews()) == 2
    assert not is_resolved(h.github, unclosed)

    h.github.clear_faults()
    await push(h, pull, [*fixed, "# later"], {"summary": "Still fine.", "comments": []})
    assert is_resolved(h.github, unclosed)
    assert len(thread_replies(h.github, REPO, 1, unclosed)) == 1


@pytest.mark.parametrize(
    ("fault", "params"),
    [
        ("primary_rate_limit", {"reset_in": 1}),  # 200, an error of type RATE_LIMITED, x-ratelimit-remaining 0
        ("secondary_rate_limit", {"retry_after": 1}),  # 403 with retry-after
    ],
)
async def test_a_rate_limited_graphql_call_makes_the_job_wait_then_finish_with_one_review(
    h: Harness, fault: str, params: dict[str, Any]
) -> None:
    pull, (unclosed, _) = await revision_1(h)
    fixed = [*V1[:3], "    with open(path) as f:", "        data = f.read()", *V1[4:]]
    if "reset_in" in params:
        params = {"reset": int(time.time()) + 1 + params["reset_in"]}
    limit = h.github.inject("POST", r"^/graphql$", fault, times=1, **params)
    calls_before = len(model_calls(h))

    job_id = await push(h, pull, fixed, {"summary": "Fine now.", "comments": []})

    job = await h.job(job_id)
    assert limit.hits == 1 and job.attempts == 1  # waiting on GitHub spends no attempt
    limited, *after = [r for r in h.github.requests_matching("POST", r"^/graphql$") if r.arrived >= limited_at(h)]
    assert limited.fault == fault and after and after[0].arrived >= limit_lifted(limited, params) - 0.05
    assert len(h.reviews()) == 2  # the waiting attempt's review was found by its marker, not posted again
    assert len(model_calls(h)) == calls_before + 1  # and the model was asked once
    assert is_resolved(h.github, unclosed)
    assert len(thread_replies(h.github, REPO, 1, unclosed)) == 1


def model_calls(h: Harness) -> list[Any]:
    return [r for r in h.anthropic.requests if r.path == "/v1/messages"]


def limited_at(h: Harness) -> float:
    return next(r.arrived for r in h.github.requests_matching("POST", r"^/graphql$") if r.fault)


def limit_lifted(limited, params: dict[str, Any]) -> float:
    """When GitHub said the app may ask again: ``retry-after`` seconds after the answer, else the reset time."""
    return limited.arrived + params["retry_after"] if "retry_after" in params else float(params["reset"])


async def test_findings_are_remembered_when_the_review_is_found_by_its_marker(h: Harness) -> None:
    h.github.inject("POST", r"/pulls/\d+/reviews$", "lost_response")
    _, (unclosed, division) = await revision_1(h)

    assert len(h.reviews()) == 1
    remembered = await h.store.open_findings(h.github.repos[REPO].id, 1)
    assert sorted((f.line, f.comment_id, f.thread_id) for f in remembered) == [
        (4, unclosed, f"PRRT_{unclosed}"),
        (8, division, f"PRRT_{division}"),
    ]


async def test_a_lost_graphql_answer_is_asked_again_and_the_thread_still_resolved(h: Harness) -> None:
    pull, (unclosed, _) = await revision_1(h)
    fixed = [*V1[:3], "    with open(path) as f:", "        data = f.read()", *V1[4:]]
    fault = h.github.inject("POST", r"^/graphql$", "lost_response", times=1)  # the threads query's answer is lost

    await push(h, pull, fixed, {"summary": "Fine now.", "comments": []})

    assert fault.hits == 1
    assert is_resolved(h.github, unclosed)
    assert len(thread_replies(h.github, REPO, 1, unclosed)) == 1


async def test_a_thread_already_holding_the_apps_reply_is_resolved_without_a_second_one(h: Harness) -> None:
    # As after a reply whose answer was lost: the bot's reply is there, the thread is not resolved yet.
    pull, (unclosed, _) = await revision_1(h)
    add_thread_reply(h.github, REPO, 1, unclosed, "reviewer-app[bot]", "The code changed.")
    fixed = [*V1[:3], "    with open(path) as f:", "        data = f.read()", *V1[4:]]

    await push(h, pull, fixed, {"summary": "Fine now.", "comments": []})

    assert is_resolved(h.github, unclosed)
    assert [r["body"] for r in thread_replies(h.github, REPO, 1, unclosed)] == ["The code changed."]


async def test_a_file_that_is_there_but_not_readable_as_text_is_not_taken_for_gone(h: Harness) -> None:
    pull, (unclosed, division) = await revision_1(h)
    h.anthropic.script_tool_answer({"summary": "A link now.", "comments": []})
    sha = h.github.advance_head(REPO, 1, files=[added_file("src/other.py", ["x = 1"])])
    h.github.set_symlink(REPO, PATH, "elsewhere.py", ref=sha)  # the contents API serves it, but not as a file
    delivered = await h.deliver("pull_request", h.pr_payload(pull, "synchronize"))
    await h.wait_state(delivered["job_id"], JobState.SUCCEEDED)

    assert not is_resolved(h.github, unclosed) and not is_resolved(h.github, division)
    assert len(await h.store.open_findings(h.github.repos[REPO].id, 1)) == 2
