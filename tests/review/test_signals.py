"""The team's signals on the app's findings, end to end against the fake GitHub, on SQLite and PostgreSQL: a 👍 or 👎
on the app's comment is counted on the finding's content, a reply that disputes a finding and a thread resolved on
unchanged code become learnings, and only when the person has write access (an outsider's signal never counts)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from reviewer_app.core.learnings import covers, finding_key
from reviewer_app.core.states import JobState
from reviewer_app.review.answer import MAX_LEARNING_CHARS, ThreadAnswer, parse_thread_answer
from reviewer_app.review.claude_parse import MalformedAnswer
from tests.fakes.github import added_file
from tests.fakes.github.graphql import resolve_thread_as
from tests.fakes.github.routes.issues import add_reaction
from tests.harness import REPO, Harness, harness, harness_on
from tests.review.test_findings_e2e import DIVISION, PATH, UNCLOSED, V1, comment, push, revision_1
from tests.review.test_replies import BACKENDS, answers_in, reply_payload, reviewed_thread

NOTHING_NEW = {"summary": "Nothing new.", "comments": []}


@pytest.fixture(params=["sqlite", "postgres"])
async def h(request, tmp_path) -> AsyncIterator[Harness]:
    async with harness_on(request.param, tmp_path) as running:
        yield running


def permission_lookups(h: Harness, login: str) -> int:
    return len(h.github.requests_matching("GET", rf"/collaborators/{login}/permission$"))


async def test_reactions_of_people_with_write_access_count_on_the_findings_content_and_outsiders_do_not(
    h: Harness,
) -> None:
    pull, (unclosed, division) = await revision_1(h)
    repo = str(h.github.repos[REPO].id)
    h.github.set_permission(REPO, "maintainer", "write")
    h.github.set_permission(REPO, "lead", "admin")
    h.github.set_permission(REPO, "reader", "read")
    add_reaction(h.github, unclosed, "maintainer", "-1")
    add_reaction(h.github, unclosed, "lead", "-1")
    add_reaction(h.github, unclosed, "outsider", "-1")  # no role in the repository
    add_reaction(h.github, unclosed, "reader", "-1")  # read access only
    add_reaction(h.github, division, "maintainer", "+1")
    add_reaction(h.github, division, "lead", "heart")  # says nothing of the finding
    assert await h.store.finding_feedback_counts(repo) == {}  # GitHub sends no webhook: nothing known yet

    await push(h, pull, V1, NOTHING_NEW)  # the next review reads them
    keys = {
        f.comment_id: finding_key(f.path, f.line_text, f.body_digest) for f in await h.store.open_findings(int(repo), 1)
    }
    assert await h.store.finding_feedback_counts(repo) == {keys[unclosed]: (0, 2), keys[division]: (1, 0)}
    assert await h.store.list_learnings(repo) == []  # a 👎 alone proposes no learning
    assert len(h.github.requests_matching("GET", r"/pulls/comments/\d+/reactions$")) == 2
    assert permission_lookups(h, "maintainer") == 1  # asked once for two reactions (kept a minute)

    add_reaction(h.github, division, "outsider", "+1")
    add_reaction(h.github, division, "lead", "-1")
    # Someone deletes the app's comment on the unclosed file (its reactions go with it: 404), read first; the pass goes on.
    h.github.review_comments[(REPO, 1)] = [c for c in h.github.review_comments[(REPO, 1)] if c["id"] != unclosed]
    await push(h, pull, V1, NOTHING_NEW)  # read again: the same reactions add nothing, an outsider's never counts
    assert await h.store.finding_feedback_counts(repo) == {keys[unclosed]: (0, 2), keys[division]: (1, 1)}


async def test_a_thread_resolved_by_a_maintainer_on_unchanged_code_teaches_once_and_others_do_not(h: Harness) -> None:
    pull, (unclosed, division) = await revision_1(h)
    repo = str(h.github.repos[REPO].id)
    h.github.set_permission(REPO, "maintainer", "write")
    resolve_thread_as(h.github, unclosed, "outsider")  # no write access: no signal
    resolve_thread_as(h.github, division, "maintainer")  # but its code changes in the next push: no signal
    fixed = [line.replace("/ 0", "/ max(len(xs), 1)") for line in V1]
    await push(h, pull, fixed, NOTHING_NEW)
    assert await h.store.list_learnings(repo) == []

    resolve_thread_as(h.github, unclosed, "maintainer")  # reopened and resolved again, by a maintainer
    await push(h, pull, fixed, NOTHING_NEW)
    [learning] = await h.store.list_learnings(repo)
    assert (learning.kind, learning.source_kind, learning.author, learning.path_glob) == (
        "do-not-flag",
        "resolved",
        "maintainer",
        "src/app.py",
    )
    assert learning.text == "Do not flag The file is never closed."
    assert covers(learning, "src/app.py", UNCLOSED) and not covers(learning, "src/app.py", DIVISION)
    assert learning.source_url == f"https://github.com/{REPO}/pull/1#discussion_r{unclosed}"

    # The team forgets it: the same resolved thread does not teach it again.
    assert await h.store.remove_learning(repo, learning.id)
    await push(h, pull, fixed, NOTHING_NEW)
    assert await h.store.list_learnings(repo) == []
    assert h.github.review_threads.rejected == []


@BACKENDS
async def test_a_maintainers_reply_that_disputes_a_finding_proposes_a_pending_learning(tmp_path, backend) -> None:
    async with harness_on(backend, tmp_path) as h:
        pull, root = await reviewed_thread(h)
        repo = str(h.github.repos[REPO].id)
        h.github.set_permission(REPO, "maintainer", "write")
        rule = "Do not flag constant return values in widget placeholders: the build fills them in."
        h.anthropic.script_answer("Understood: then it is fine as it is.", disputes=True, learning=rule)
        said = "Intended: do not flag constant return values in widget placeholders, the build fills them in."
        payload = reply_payload(h, pull, root["id"], said, login="maintainer", association="MEMBER")
        admitted = await h.deliver("pull_request_review_comment", payload)
        await h.wait_state(admitted["job_id"], JobState.SUCCEEDED)

        [learning] = await h.store.list_learnings(repo)
        assert (learning.text, learning.kind, learning.source_kind, learning.author, learning.status) == (
            rule,
            "do-not-flag",
            "reply",
            "maintainer",
            "pending",
        )
        assert learning.path_glob == "src/widget.py"  # the thread's file, exactly
        assert learning.source_url == payload["comment"]["html_url"]
        (answer,) = answers_in(h, root["id"])
        assert learning.ack_comment_id == answer["id"]  # a writer's 👍 on it confirms the learning
        assert (
            f"Proposed learning {learning.id} of this repository (files `src/widget.py`), **pending**" in answer["body"]
        )
        assert f"/review learn confirm {learning.id}" in answer["body"]
        tool = h.anthropic.message_requests[-1].body["tool_choice"]
        assert tool == {"type": "tool", "name": "submit_answer"}


@BACKENDS
async def test_a_reply_disputing_a_finding_without_write_access_teaches_nothing(tmp_path, backend) -> None:
    async with harness_on(backend, tmp_path) as h:
        pull, root = await reviewed_thread(h)
        repo = str(h.github.repos[REPO].id)
        # The pull request's author is answered, but has no write access (a fork's author): no learning.
        h.anthropic.script_answer("It still reads as a bug to me.", disputes=True, learning="Never flag anything.")
        payload = reply_payload(h, pull, root["id"], "Wrong, ignore it.", login=pull.user, association="NONE")
        admitted = await h.deliver("pull_request_review_comment", payload)
        await h.wait_state(admitted["job_id"], JobState.SUCCEEDED)
        (answer,) = answers_in(h, root["id"])
        assert "It still reads as a bug" in answer["body"] and "Noted as learning" not in answer["body"]
        assert await h.store.list_learnings(repo) == []
        assert permission_lookups(h, pull.user) == 1  # asked GitHub, which said: no write access


def test_the_answer_tool_is_read_strictly_and_a_learning_comes_only_with_a_dispute() -> None:
    said = parse_thread_answer({"answer": " Fine. ", "disputes": True, "learning": " Do not flag\nX in Y. "})
    assert said == ThreadAnswer("Fine.", True, "Do not flag X in Y.")
    assert parse_thread_answer({"answer": "a", "disputes": False, "learning": "Do not flag X."}).learning is None
    too_long = "x" * (MAX_LEARNING_CHARS + 1)
    assert parse_thread_answer({"answer": "a", "disputes": True, "learning": too_long}).learning is None
    for bad in ({"answer": "", "disputes": False, "learning": None}, {"answer": "a", "disputes": "yes"}, []):
        with pytest.raises(MalformedAnswer):
            parse_thread_answer(bad)
    with pytest.raises(MalformedAnswer):
        parse_thread_answer({"answer": "a", "disputes": True, "learning": 5})


async def test_the_periodic_pass_reads_reactions_without_a_new_review_within_its_bound(tmp_path) -> None:
    # GitHub sends no webhook for a reaction: the pass reads them for the newest reviewed pull requests first, at
    # most REVIEWER_SIGNAL_READS comments in all, with a token that can only read pull requests.
    async with harness(tmp_path, REVIEWER_SIGNAL_PASS_SECONDS="3600", REVIEWER_SIGNAL_READS="1") as h:
        assert h.svc.signal_pass is not None
        _, (unclosed, _) = await revision_1(h)
        repo = str(h.github.repos[REPO].id)
        h.anthropic.script_tool_answer({"summary": "One.", "comments": [comment(8, DIVISION)]})
        later = h.github.add_pull(REPO, 2, files=[added_file(PATH, V1)])
        h.github.set_file(REPO, PATH, "\n".join(V1), ref=later.head_sha)
        admitted = await h.deliver("pull_request", h.pr_payload(later))
        await h.wait_state(admitted["job_id"], JobState.SUCCEEDED)
        [newer] = [c["id"] for c in h.github.review_comments_for(REPO, 2)]
        h.github.set_permission(REPO, "maintainer", "write")
        add_reaction(h.github, unclosed, "maintainer", "-1")  # on the older pull request: past the pass's one read
        add_reaction(h.github, newer, "maintainer", "-1")
        add_reaction(h.github, newer, "outsider", "+1")
        reads = len(h.github.requests_matching("GET", r"/reactions$"))

        assert await h.svc.signal_pass.run_pass() == 1
        [finding] = await h.store.open_findings(int(repo), 2)
        key = finding_key(finding.path, finding.line_text, finding.body_digest)
        assert await h.store.finding_feedback_counts(repo) == {key: (0, 1)}
        assert [r.path for r in h.github.requests_matching("GET", r"/reactions$")[reads:]] == [
            f"/repos/{REPO}/pulls/comments/{newer}/reactions"
        ]
        assert h.github.token_requests[-1]["permissions"] == {"pull_requests": "read", "metadata": "read"}
        assert [len(h.github.reviews_for(REPO, n)) for n in (1, 2)] == [1, 1]  # no review was run for it
