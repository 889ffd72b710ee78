"""A question is answered while every review slot is held by the model (issue 30's queue per kind of work), end to
end against the fakes on both stores: answers have slots of their own, claimed apart from the reviews'."""

from __future__ import annotations

import asyncio

from reviewer_app.core.states import JobState
from tests.harness import REPO
from tests.helpers import eventually
from tests.review.test_replies import BACKENDS, answers_in, reply_harness, reply_payload, reviewed_thread

HUNG = 120.0  # the fake model holds each review this long (cut short when the fake stops at the test's end)


@BACKENDS
async def test_a_question_is_answered_while_the_model_holds_every_review_slot(tmp_path, backend) -> None:
    env = {
        "REVIEWER_CONCURRENCY": "2",
        "REVIEWER_ANSWER_CONCURRENCY": "1",
        "REVIEWER_MODEL_TIMEOUT_SECONDS": str(HUNG * 2),  # the held reviews neither time out nor retry meanwhile
    }
    async with reply_harness(tmp_path, backend, **env) as h:
        pull, root = await reviewed_thread(h)
        asked_before = len(h.anthropic.message_requests)
        h.anthropic.script_slow_answer(HUNG)
        h.anthropic.script_slow_answer(HUNG)
        # Three reviews for two slots: two hold the model, the third waits. Which two is not fixed: on PostgreSQL a
        # claim skips a queued row another transaction holds for a moment (its check run being recorded), so the
        # third pull request's job may be claimed before the second's.
        jobs = {(await h.open_pr(number))[1]: number for number in (2, 3, 4)}
        await eventually(lambda: asyncio.sleep(0, len(h.anthropic.message_requests) == asked_before + 2), timeout=30)

        async def two_running() -> list[int] | None:
            running = [j for j in jobs if (await h.job(j)).state == JobState.RUNNING]
            return running if len(running) == 2 else None

        held = await eventually(two_running, timeout=15)
        [waiting] = [j for j in jobs if j not in held]
        assert h.svc.dispatcher.loads()["reviews"] == {"slots": 2, "running": 2}

        h.anthropic.script_answer("It is a placeholder until the real value lands.")
        payload = reply_payload(h, pull, root["id"], "Why is this a problem?", login=pull.user, association="NONE")
        admitted = await h.deliver("pull_request_review_comment", payload, delivery="reply-while-busy")
        assert admitted["outcome"] == "enqueued"
        await h.wait_state(admitted["job_id"], JobState.SUCCEEDED, timeout=30)

        (answer,) = answers_in(h, root["id"])
        assert "placeholder" in answer["body"]
        # The reviews still hold the model, and the third still waits for a review slot.
        assert [(await h.job(j)).state for j in held] == [JobState.RUNNING, JobState.RUNNING]
        assert (await h.job(waiting)).state == JobState.QUEUED
        assert all(h.github.reviews_for(REPO, jobs[j]) == [] for j in held)
