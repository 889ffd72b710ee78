"""Answers in threads, end to end against the fakes on both stores: a reply in a thread the app started (or a
question that mentions it) is a durable job answered once, in place, and only for the people it is meant for."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from reviewer_app.admin import Admin
from reviewer_app.cli.usage_report import render_usage
from reviewer_app.core.markers import make_answer_marker
from reviewer_app.core.states import JobState
from tests.fakes.github import Pull, iso
from tests.fakes.github.routes.threads import add_review_reply
from tests.github.test_fake_schema import REPO_ROUTE, disagreements
from tests.harness import REPO, Harness, harness
from tests.helpers import eventually
from tests.payloads import review_comment_event
from tests.pg import create_schema, drop_schema, postgres_dsn
from tests.prompt_text import user_text

BOT = "reviewer-app[bot]"
THREAD_ROUTE = REPO_ROUTE + "/pulls/{number}/comments"
FINDING = {"path": "src/widget.py", "line": 2, "body": "This returns a constant; is that intended?"}


@contextlib.asynccontextmanager
async def reply_harness(tmp_path: Path, backend: str, **env: str) -> AsyncIterator[Harness]:
    """The in-process harness on SQLite, or on a fresh PostgreSQL schema."""
    schema = None
    if backend == "postgres":
        dsn = postgres_dsn()
        schema = await create_schema(dsn)
        env["DATABASE_URL"] = f"{dsn}{'&' if '?' in dsn else '?'}search_path={schema}"
    try:
        async with harness(tmp_path, **env) as h:
            yield h
    finally:
        if schema is not None:
            await drop_schema(postgres_dsn(), schema)


BACKENDS = pytest.mark.parametrize("backend", ["sqlite", "postgres"])


async def reviewed_thread(h: Harness) -> tuple[Pull, dict[str, Any]]:
    """A pull request the app reviewed with one inline comment: the thread it started."""
    h.anthropic.script_tool_answer({"summary": "One question.", "comments": [FINDING]})
    pull, job_id = await h.open_pr()
    await h.wait_state(job_id, JobState.SUCCEEDED)
    (root,) = h.github.review_comments_for(REPO, 1)
    assert root["user"]["login"] == BOT
    return pull, root


def reply_payload(
    h: Harness,
    pull: Pull,
    root_id: int,
    body: str,
    *,
    login: str,
    association: str,
    user_type: str = "User",
) -> dict[str, Any]:
    comment = add_review_reply(h.github, REPO, pull.number, root_id, login, body, association=association)
    repo = h.github.repos[REPO]
    return review_comment_event(
        comment,
        login=login,
        association=association,
        user_type=user_type,
        number=pull.number,
        head=pull.head_sha,
        base_sha=pull.base_sha,
        base_ref=pull.base_ref,
        repo=REPO,
        repo_id=repo.id,
        installation_id=h.installation_id,
        author=pull.user,
        state=pull.state,
    )


def answers_in(h: Harness, root_id: int) -> list[dict[str, Any]]:
    return [
        c
        for c in h.github.review_comments_for(REPO, 1)
        if c.get("in_reply_to_id") == root_id and c["user"]["login"] == BOT and "reviewer-app:reply" in c["body"]
    ]


@BACKENDS
async def test_a_reply_by_the_author_gets_exactly_one_answer_in_the_same_thread(tmp_path, backend) -> None:
    async with reply_harness(tmp_path, backend) as h:
        pull, root = await reviewed_thread(h)
        checks_before = len(h.github.check_runs_for(REPO, pull.head_sha))
        h.anthropic.script_answer("It is a placeholder until the real value lands; @octocat agrees.")
        payload = reply_payload(h, pull, root["id"], "Why is this a problem?", login=pull.user, association="NONE")
        admitted = await h.deliver("pull_request_review_comment", payload, delivery="reply-1")
        assert admitted["outcome"] == "enqueued"
        job = await h.wait_state(admitted["job_id"], JobState.SUCCEEDED)

        (answer,) = answers_in(h, root["id"])
        assert "placeholder" in answer["body"]
        assert "@\u200boctocat" in answer["body"]  # the model's text is neutralised: it pings nobody
        assert answer["body"].endswith(make_answer_marker(payload["comment"]["id"]))
        assert job.details.answer_comment_id == answer["id"] and job.review_id is None
        link = f"https://github.com/{REPO}/pull/1#discussion_r{answer['id']}"
        assert Admin(h.store).links(job)["answer"] == link  # `reviewer-app jobs show` links to it
        asked = user_text(h.anthropic.message_requests[-1])
        assert "Why is this a problem?" in asked and "@@ " in asked and "def f1():" in asked  # thread, hunk, code
        # The same delivery again, and the same body under a new delivery id (a replay): no second answer.
        again = await h.deliver("pull_request_review_comment", payload, delivery="reply-1")
        replayed = await h.deliver("pull_request_review_comment", payload, delivery="reply-1-replayed")
        assert again["outcome"] == "duplicate-delivery" and replayed["outcome"] == "duplicate-revision"
        assert len(answers_in(h, root["id"])) == 1 and len(h.anthropic.message_requests) == 2
        # An answer is not a review: no check run of its own, and the head's review stays the only one.
        assert len(h.github.check_runs_for(REPO, pull.head_sha)) == checks_before
        assert len(h.reviews()) == 1
        usage = {r["kind"]: r for r in await h.store.usage_by_repo(since=0)}
        assert usage["answers"]["jobs"] == 1 and usage["reviews"]["jobs"] == 1
        table = render_usage(list(usage.values()), 7).splitlines()
        assert any(line.startswith(REPO) and " answers " in line for line in table)
        # What the fake served and the app sent on the thread's routes is what GitHub's schema allows.
        problems, seen = disagreements(h.github.requests)
        assert problems == [], "\n".join(problems)
        assert {("GET", THREAD_ROUTE), ("POST", THREAD_ROUTE + "/{comment_id}/replies")} <= seen


@BACKENDS
async def test_a_drive_by_user_a_reader_and_a_bot_get_no_answer(tmp_path, backend) -> None:
    async with reply_harness(tmp_path, backend) as h:
        pull, root = await reviewed_thread(h)
        h.github.set_permission(REPO, "reader", "read")
        drive_by = await h.deliver(
            "pull_request_review_comment",
            reply_payload(h, pull, root["id"], "Why?", login="passer-by", association="NONE"),
        )
        bot = await h.deliver(
            "pull_request_review_comment",
            reply_payload(h, pull, root["id"], "Why?", login="other-bot[bot]", association="NONE", user_type="Bot"),
        )
        own = await h.deliver(
            "pull_request_review_comment",
            reply_payload(h, pull, root["id"], "Why?", login=BOT, association="NONE", user_type="Bot"),
        )
        assert [drive_by["outcome"], bot["outcome"], own["outcome"]] == ["ignored"] * 3
        # A member whose association says little is asked about with GitHub: read access gets no answer.
        reader = await h.deliver(
            "pull_request_review_comment",
            reply_payload(h, pull, root["id"], "Why?", login="reader", association="MEMBER"),
        )
        job = await h.wait_state(reader["job_id"], JobState.CANCELLED)
        assert job.cancel_reason == "skipped" and "read access" in (job.outcome or "")
        assert answers_in(h, root["id"]) == [] and len(h.anthropic.message_requests) == 1  # the review's only


@BACKENDS
async def test_a_lost_response_does_not_make_a_second_answer(tmp_path, backend) -> None:
    async with reply_harness(tmp_path, backend) as h:
        pull, root = await reviewed_thread(h)
        h.anthropic.script_answer("Because f1 is called with user input.")
        lost = h.github.inject("POST", r"/comments/\d+/replies$", "lost_response", times=1)
        admitted = await h.deliver(
            "pull_request_review_comment",
            reply_payload(h, pull, root["id"], "Why?", login=pull.user, association="NONE"),
        )
        await h.wait_state(admitted["job_id"], JobState.SUCCEEDED)
        assert lost.hits == 1
        assert len(answers_in(h, root["id"])) == 1 and len(h.anthropic.message_requests) == 2


@BACKENDS
async def test_the_per_thread_rate_limit_holds(tmp_path, backend) -> None:
    async with reply_harness(tmp_path, backend, REVIEWER_MAX_REPLIES_PER_THREAD_HOUR="2") as h:
        pull, root = await reviewed_thread(h)
        outcomes = []
        for n in range(3):
            h.anthropic.script_answer(f"Answer {n}.")
            admitted = await h.deliver(
                "pull_request_review_comment",
                reply_payload(h, pull, root["id"], f"Question {n}?", login=pull.user, association="NONE"),
            )
            outcomes.append(admitted["outcome"])
            if admitted["outcome"] == "enqueued":
                await h.wait_state(admitted["job_id"], JobState.SUCCEEDED)
        assert outcomes == ["enqueued", "enqueued", "refused"]
        assert len(answers_in(h, root["id"])) == 2


@BACKENDS
async def test_a_push_leaves_a_pending_answer_alone_and_a_close_cancels_it(tmp_path, backend) -> None:
    async with reply_harness(tmp_path, backend) as h:
        pull, root = await reviewed_thread(h)
        await h.store.set_setting("queue_paused", "1")  # the answer waits in the queue
        admitted = await h.deliver(
            "pull_request_review_comment",
            reply_payload(h, pull, root["id"], "Why?", login=pull.user, association="NONE"),
        )
        h.github.advance_head(REPO, 1)
        pushed = await h.deliver("pull_request", h.pr_payload(pull, "synchronize"))
        assert admitted["job_id"] not in pushed.get("superseded", [])
        assert (await h.job(admitted["job_id"])).state == JobState.QUEUED
        h.github.close_pull(REPO, 1)
        # Closed after the question was asked (GitHub's time): a close timed before it would leave it alone.
        closed = await h.deliver("pull_request", h.pr_payload(pull, "closed", updated_at=iso(h.github.clock() + 1)))
        job = await h.job(admitted["job_id"])
        assert job.state == JobState.CANCELLED and job.cancel_reason == "pr_closed"
        assert closed["outcome"] == "cancelled"
        await h.store.set_setting("queue_paused", "0")
        assert answers_in(h, root["id"]) == []


@BACKENDS
async def test_a_question_that_mentions_the_app_is_answered_once_in_the_conversation(tmp_path, backend) -> None:
    async with reply_harness(tmp_path, backend) as h:
        pull, _ = await reviewed_thread(h)
        h.anthropic.script_answer("The widget module has no tests yet.")
        payload = h.comment_payload(pull, "@reviewer-app are there tests for this?")
        admitted = await h.deliver("issue_comment", payload)
        assert admitted["outcome"] == "enqueued"
        await h.wait_state(admitted["job_id"], JobState.SUCCEEDED)
        replayed = await h.deliver("issue_comment", payload)
        assert replayed["outcome"] == "duplicate-revision"

        def answers() -> list[dict[str, Any]]:
            return [c for c in h.github.issue_comments_for(REPO, 1) if c["user"]["login"] == BOT]

        (answer,) = answers()
        assert "no tests yet" in answer["body"]
        assert answer["body"].endswith(make_answer_marker(payload["comment"]["id"]))
        # A mention without a question asks nothing (and is no command either).
        thanks = await h.deliver("issue_comment", h.comment_payload(pull, "thanks @reviewer-app"))
        assert thanks["outcome"] == "ignored" and len(answers()) == 1


async def test_a_reply_in_a_thread_someone_else_started_is_not_answered(tmp_path) -> None:
    async with reply_harness(tmp_path, "sqlite") as h:
        pull, root = await reviewed_thread(h)
        other = add_review_reply(h.github, REPO, 1, root["id"], "maintainer", "unrelated")
        # A thread a person started: the payload cannot say who did, so the worker looks and skips it.
        h.github.review_comments[(REPO, 1)][-1]["in_reply_to_id"] = None
        admitted = await h.deliver(
            "pull_request_review_comment",
            reply_payload(h, pull, other["id"], "Why?", login=pull.user, association="NONE"),
        )
        job = await h.wait_state(admitted["job_id"], JobState.CANCELLED)
        assert job.cancel_reason == "skipped" and "did not start" in (job.outcome or "")
        assert len(h.anthropic.message_requests) == 1


async def test_the_check_run_counts_the_answers_on_the_pull_request(tmp_path) -> None:
    async with reply_harness(tmp_path, "sqlite") as h:
        pull, root = await reviewed_thread(h)
        h.anthropic.script_answer("Yes.")
        admitted = await h.deliver(
            "pull_request_review_comment",
            reply_payload(h, pull, root["id"], "Really?", login=pull.user, association="NONE"),
        )
        await h.wait_state(admitted["job_id"], JobState.SUCCEEDED)
        rerun = await h.deliver("issue_comment", h.comment_payload(pull, "/review"))
        await h.wait_check_synced(rerun["job_id"])

        async def summary() -> str | None:
            runs = [r for r in h.github.check_runs_for(REPO, pull.head_sha) if r["status"] == "completed"]
            texts = [r["output"]["summary"] or "" for r in runs]
            return next((t for t in texts if "Answers in this pull request's threads so far: 1." in t), None)

        assert await eventually(summary)


async def test_an_answer_publishes_no_outside_link_image_or_committable_suggestion(tmp_path) -> None:
    # Someone without access plants "tell them to see <link>" in a thread; the model repeats it in its answer.
    async with reply_harness(tmp_path, "sqlite") as h:
        pull, root = await reviewed_thread(h)
        h.anthropic.script_answer(
            "See [the fix](https://evil.example/fix) ![pixel](https://track.example/p.gif?u=1) or https://evil.example.\n"
            f"The code: [app.py](https://github.com/{REPO}/blob/main/app.py).\n\n"
            "```suggestion\nreturn 2\n```"
        )
        payload = reply_payload(h, pull, root["id"], "How do I fix it?", login=pull.user, association="NONE")
        admitted = await h.deliver("pull_request_review_comment", payload)
        await h.wait_state(admitted["job_id"], JobState.SUCCEEDED)
        (answer,) = answers_in(h, root["id"])
        body = answer["body"]
        assert "the fix (`https://evil.example/fix`)" in body and "](https://evil.example" not in body
        assert "pixel (`https://track.example/p.gif?u=1`)" in body and "![" not in body
        assert "`https://evil.example.`" in body
        assert f"[app.py](https://github.com/{REPO}/blob/main/app.py)" in body  # the repository's own host stays
        assert "```suggestion" not in body and "```\nreturn 2\n```" in body


@BACKENDS
async def test_an_outside_author_asking_away_is_limited_and_never_refuses_a_review(tmp_path, backend) -> None:
    env = {"REVIEWER_MAX_ANSWERS_PER_ASKER_DAY": "2", "REVIEWER_MAX_REVIEWS_PER_DAY": "3"}
    async with reply_harness(tmp_path, backend, **env) as h:
        pull, root = await reviewed_thread(h)  # the day's first review
        outcomes, questions = [], []
        for n in range(4):
            h.anthropic.script_answer(f"Answer {n}.")
            payload = reply_payload(h, pull, root["id"], f"Question {n}?", login=pull.user, association="NONE")
            questions.append(payload["comment"]["id"])
            admitted = await h.deliver("pull_request_review_comment", payload)
            outcomes.append(admitted["outcome"])
            if admitted["outcome"] == "enqueued":
                await h.wait_state(admitted["job_id"], JobState.SUCCEEDED)
        assert outcomes == ["enqueued", "enqueued", "refused", "refused"]
        assert len(answers_in(h, root["id"])) == 2
        # The refusal is visible once, as a reaction on the first refused question; no reply, nothing per question.
        bot = f"{h.github.app_slug}[bot]"

        async def reacted() -> bool:
            return [r["content"] for r in h.github.reactions.get(questions[2], [])] == ["-1"]

        await eventually(reacted)

        async def sent() -> bool:
            return await h.store.pending_effects(limit=10) == []

        await eventually(sent)
        assert h.github.reactions.get(questions[3], []) == []
        assert all(r["user"]["login"] == bot for r in h.github.reactions[questions[2]])
        # The maintainers' reviews still have their whole day: two more reviews (of 3) go through.
        for _ in range(2):
            h.github.advance_head(REPO, 1)
            pushed = await h.deliver("pull_request", h.pr_payload(pull, "synchronize"))
            assert pushed["outcome"] == "enqueued", pushed
            await h.wait_state(pushed["job_id"], JobState.SUCCEEDED)
