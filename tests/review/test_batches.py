"""Half-price reviews through Message Batches, end to end: the whole app against the fake GitHub and the fake
Anthropic (its batches endpoints), on SQLite and on PostgreSQL."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from reviewer_app.core.batching import BatchPolicy
from reviewer_app.core.states import JobState
from reviewer_app.store.base import BatchRequest
from tests.e2e.test_pr_episodes import bot_reviews, pause_queue, push_payload, quiet, resume_queue
from tests.harness import REPO, SOURCE, Harness, harness
from tests.helpers import eventually
from tests.pg import fresh_schema

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"])

BATCH_REPO = "batch: true\n"


@contextlib.asynccontextmanager
async def batching(
    tmp_path: Any, backend: str, *, repo_config: str | None = BATCH_REPO, provider: str = "anthropic", **env: str
) -> AsyncIterator[Harness]:
    """The app with Message Batches on, polled often, and (by default) a repository that asks for batch reviews."""
    settings = {
        "REVIEWER_BATCH": "1",
        "REVIEWER_BATCH_GATHER_SECONDS": "0.3",
        "REVIEWER_BATCH_POLL_SECONDS": "0.05",
        **env,
    }
    async with contextlib.AsyncExitStack() as stack:
        if backend == "postgres":
            dsn, schema = await stack.enter_async_context(fresh_schema())
            settings["DATABASE_URL"] = f"{dsn}{'&' if '?' in dsn else '?'}search_path={schema}"
        h = await stack.enter_async_context(harness(tmp_path, provider, **settings))
        if repo_config is not None:
            h.github.set_file(REPO, ".github/reviewer.yml", repo_config)
        yield h


async def requests_of(h: Harness, job_id: int, *states: str) -> list[BatchRequest]:
    """The job's batched requests, once at least one is in one of ``states``."""

    async def found() -> list[BatchRequest] | None:
        rows = await h.store.batch_requests_of(job_id)
        return rows if any(r.state in states for r in rows) else None

    return await eventually(found, timeout=15)


async def test_jobs_ready_together_share_one_batch_and_results_out_of_order_reach_their_jobs(tmp_path, backend) -> None:
    # Ready together: admitted while the queue is paused, claimed in one go; a wide gathering window for a busy host.
    async with batching(tmp_path, backend, REVIEWER_BATCH_GATHER_SECONDS="2") as h:
        h.anthropic.reverse_results = True
        h.anthropic.script_tool_answer({"summary": "First answer.", "comments": []})
        h.anthropic.script_tool_answer({"summary": "Second answer.", "comments": []})
        await pause_queue(h)
        _, one = await h.open_pr(1)
        _, two = await h.open_pr(2)
        await resume_queue(h)
        await quiet(h)

        assert len(h.anthropic.batch_creates) == 1
        [create] = h.anthropic.batch_creates
        assert len(create.body["requests"]) == 2
        assert h.anthropic.message_requests == []  # nothing asked interactively
        summaries = {n: bot_reviews(h, n)[0]["body"] for n in (1, 2)}
        ids = [r["custom_id"] for r in create.body["requests"]]
        # Whichever job's request came first in the batch got the first scripted answer; each got its own.
        first_job = int(ids[0].split("-")[1])
        assert "First answer." in summaries[1 if first_job == one else 2]
        assert "Second answer." in summaries[2 if first_job == one else 1]
        for job_id in (one, two):
            job = await h.job(job_id)
            assert job.state is JobState.SUCCEEDED
            assert job.attempts == 1  # waiting on the batch cost no attempt
            [request] = await h.store.batch_requests_of(job_id)
            assert request.state == "succeeded" and request.input_tokens > 0
            assert [a.outcome for a in await h.store.attempts_of(job_id)] == ["deferred", "succeeded"]


async def test_one_request_that_errored_in_its_batch_is_asked_interactively(tmp_path, backend) -> None:
    async with batching(tmp_path, backend, REVIEWER_BATCH_GATHER_SECONDS="2") as h:
        h.anthropic.script_overloaded()  # the batch's first request errors
        h.anthropic.script_tool_answer({"summary": "Batched answer.", "comments": []})
        h.anthropic.script_tool_answer({"summary": "Interactive answer.", "comments": []})
        await pause_queue(h)
        _, one = await h.open_pr(1)
        _, two = await h.open_pr(2)
        await resume_queue(h)
        await quiet(h)

        assert len(h.anthropic.batch_creates) == 1
        assert len(h.anthropic.message_requests) == 1  # only the errored request, asked again
        bodies = sorted(bot_reviews(h, n)[0]["body"] for n in (1, 2))
        assert "Batched answer." in bodies[0] and "Interactive answer." in bodies[1]
        states = sorted([(await h.store.batch_requests_of(j))[0].state for j in (one, two)])
        assert states == ["errored", "succeeded"]
        for job_id in (one, two):
            assert (await h.job(job_id)).state is JobState.SUCCEEDED


async def test_an_expired_batch_falls_back_to_an_interactive_call(tmp_path, backend) -> None:
    async with batching(tmp_path, backend) as h:
        h.anthropic.hold_batches = True
        pull, job_id = await h.open_pr(1)
        [request] = await requests_of(h, job_id, "pending")
        job = await h.wait_state(job_id, JobState.QUEUED)  # deferred: not running, not failed
        assert job.attempts == 0 and "waiting for Message Batch" in (job.last_error or "")
        assert h.anthropic.message_requests == []

        async def shows_the_wait() -> bool:
            return [r["output"]["title"] for r in h.check_runs(pull.head_sha)] == ["Waiting for a batch review"]

        await eventually(shows_the_wait)  # the check run says why nothing happens yet
        h.anthropic.expire_batches()
        await quiet(h)
        [request] = await h.store.batch_requests_of(job_id)
        assert request.state == "expired"
        assert len(h.anthropic.message_requests) == 1
        assert len(bot_reviews(h)) == 1
        assert (await h.job(job_id)).state is JobState.SUCCEEDED


async def test_a_job_superseded_while_batched_withdraws_its_request_and_never_publishes(tmp_path, backend) -> None:
    async with batching(tmp_path, backend) as h:
        h.anthropic.hold_batches = True
        pull, old = await h.open_pr(1)
        [request] = await requests_of(h, old, "pending")
        first_batch = request.batch_id
        a = pull.head_sha

        h.github.advance_head(REPO, 1, files=[SOURCE])
        pushed = await h.deliver("pull_request", push_payload(h, pull, before=a))
        # The old job is superseded (its head moved); its request is withdrawn and its batch, left with nothing
        # pending, is cancelled.
        assert pushed["superseded"] == [old]
        [withdrawn] = await requests_of(h, old, "withdrawn")
        assert withdrawn.custom_id == request.custom_id

        async def cancelled() -> bool:
            return h.anthropic.batches[first_batch].cancel_initiated_at is not None

        await eventually(cancelled, timeout=15)
        h.anthropic.hold_batches = False  # the new head's batch may end now
        await quiet(h)
        assert (await h.job(old)).state is JobState.SUPERSEDED
        reviews = bot_reviews(h)
        assert [r["commit_id"] for r in reviews] == [pull.head_sha]
        # The cancelled batch ended with the request canceled; it stays withdrawn and answered no job.
        [after] = await h.store.batch_requests_of(old)
        assert after.state == "withdrawn" and after.ended_at is not None


async def test_interactive_reviews_stay_interactive_unless_the_policy_batches_them(tmp_path, backend) -> None:
    async with batching(tmp_path, backend, repo_config=None) as h:
        _, job_id = await h.open_pr(1)
        await quiet(h)
        assert h.anthropic.batch_creates == []
        assert len(h.anthropic.message_requests) == 1
        assert await h.store.batch_requests_of(job_id) == []
        assert (await h.job(job_id)).state is JobState.SUCCEEDED


async def test_a_repository_that_says_batch_false_is_never_batched_even_past_the_wait(tmp_path, backend) -> None:
    async with batching(tmp_path, backend, repo_config="batch: false\n", REVIEWER_BATCH_AFTER_SECONDS="0.01") as h:
        _, job_id = await h.open_pr(1)
        await quiet(h)
        assert h.anthropic.batch_creates == []
        assert (await h.job(job_id)).state is JobState.SUCCEEDED


async def test_an_automatic_job_that_waited_past_the_threshold_is_batched(tmp_path, backend) -> None:
    # Any job waits a little for its slot and its reads: a threshold of 10 ms batches every automatic one.
    async with batching(tmp_path, backend, repo_config=None, REVIEWER_BATCH_AFTER_SECONDS="0.01") as h:
        await h.open_pr(1)
        await quiet(h)
        assert len(h.anthropic.batch_creates) == 1
        assert h.anthropic.message_requests == []
        assert len(bot_reviews(h)) == 1


async def test_usage_counts_batched_tokens_apart_from_interactive_ones(tmp_path, backend) -> None:
    async with batching(tmp_path, backend) as h:
        h.anthropic.script_overloaded()  # PR 1's request errors in the batch and is asked interactively
        _, one = await h.open_pr(1)
        await quiet(h)
        _, two = await h.open_pr(2)
        await quiet(h)
        rows = await h.store.usage_by_repo(since=0)
        by_way = {r["batched"]: r for r in rows}
        assert set(by_way) == {True, False}
        assert by_way[True]["jobs"] == 1 and by_way[False]["jobs"] == 1
        assert by_way[True]["input_tokens"] > 0 and by_way[False]["input_tokens"] > 0
        assert all(r["repo"] == REPO for r in rows)


async def test_a_head_found_by_the_sweep_is_batched(tmp_path, backend) -> None:
    async with batching(tmp_path, backend, repo_config=None, REVIEWER_SWEEP_SECONDS="3600") as h:
        # No webhook brought this pull request: the sweep at start admits its head.
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        await eventually(lambda: _async(len(bot_reviews(h)) == 1), timeout=20)
        assert bot_reviews(h)[0]["commit_id"] == pull.head_sha
        assert len(h.anthropic.batch_creates) == 1
        assert h.anthropic.message_requests == []
        [job] = await h.store.list_jobs()
        assert job.details.action == "sweep"


async def test_a_requested_review_runs_now_even_where_the_repository_batches(tmp_path, backend) -> None:
    async with batching(tmp_path, backend) as h:
        h.anthropic.hold_batches = True  # the push's job waits on its batch meanwhile
        pull, auto = await h.open_pr(1)
        await requests_of(h, auto, "pending")
        answer = await h.deliver("issue_comment", h.comment_payload(pull, "/review"))
        await h.wait_state(answer["job_id"], JobState.SUCCEEDED)
        assert await h.store.batch_requests_of(answer["job_id"]) == []
        assert len(h.anthropic.message_requests) == 1
        assert len(h.anthropic.batch_creates) == 1  # only the push's


async def _async(value: Any) -> Any:
    return value


async def test_turning_batching_off_still_collects_what_is_already_in_a_batch(tmp_path, backend) -> None:
    async with batching(tmp_path, backend) as h:
        h.anthropic.hold_batches = True
        _, job_id = await h.open_pr(1)
        await requests_of(h, job_id, "pending")
        # As after a restart with REVIEWER_BATCH=0: nothing new is batched, but the request out is still used.
        ask = h.svc.dispatcher.runner.pipeline.ask
        ask.batches = replace(ask.batches, policy=BatchPolicy(enabled=False))
        _, later = await h.open_pr(2)
        await h.wait_state(later, JobState.SUCCEEDED)
        assert len(h.anthropic.message_requests) == 1 and len(h.anthropic.batch_creates) == 1
        h.anthropic.hold_batches = False
        await quiet(h)
        assert len(h.anthropic.message_requests) == 1  # PR 1's answer came from its batch
        assert (await h.store.batch_requests_of(job_id))[0].state == "succeeded"
        assert len(bot_reviews(h, 1)) == 1


async def test_batches_refused_by_the_api_turn_batching_off_and_the_review_runs_interactively(
    tmp_path, backend
) -> None:
    async with batching(tmp_path, backend) as h:
        h.anthropic.script_batch_create_error(404, "not_found_error", "Not found")  # e.g. a gateway without batches
        _, job_id = await h.open_pr(1)
        job = await h.wait_state(job_id, JobState.SUCCEEDED)
        assert len(h.anthropic.batch_creates) == 1 and len(h.anthropic.message_requests) == 1
        assert job.attempts == 2  # the refused attempt counts; the next one asked interactively
        assert await h.store.batch_requests_of(job_id) == []
        assert h.svc.dispatcher.runner.pipeline.ask.batches.submitter.unavailable is not None


async def test_a_title_edited_while_the_review_waits_on_its_batch_costs_nothing_more(tmp_path, backend) -> None:
    # A part's key hashed the whole prompt, title and description included: an edit while the job waited on its
    # batch made the finished result match no request, and a new batch was sent (a bot that rewrites descriptions
    # repeated it forever).
    async with batching(tmp_path, backend) as h:
        h.anthropic.hold_batches = True
        pull, job_id = await h.open_pr(1)
        await requests_of(h, job_id, "pending")
        pull.title, pull.body = "A better title", "Rewritten by a bot."
        h.anthropic.hold_batches = False
        h.anthropic.end_batches()
        await h.wait_state(job_id, JobState.SUCCEEDED)
        assert len(h.anthropic.batch_creates) == 1 and h.anthropic.message_requests == []
        assert len(bot_reviews(h, 1)) == 1


async def test_a_runner_stopped_while_its_batch_gathers_still_records_the_batch(tmp_path, backend) -> None:
    # The runner was cancelled (shutdown, a lost lease) while its request waited to be sent with others: the batch
    # was created at Anthropic but never recorded, withdrawn or read, and the next attempt sent another.
    async with batching(tmp_path, backend, REVIEWER_BATCH_GATHER_SECONDS="1") as h:
        h.anthropic.hold_batches = True
        _, job_id = await h.open_pr(1)
        submitter = h.svc.dispatcher.runner.pipeline.ask.batches.submitter
        await eventually(lambda: _async(bool(submitter._waiting)))
        await h.svc.dispatcher.stop(0)  # no grace: the runner is cancelled while the batch gathers
        # The gathered batch is still sent and recorded (shielded from the cancellation), moments later under load.
        [request] = await eventually(lambda: h.store.batch_requests_of(job_id))
        assert request.state == "pending" and len(h.anthropic.batch_creates) == 1
        h.svc.dispatcher.start()
        h.anthropic.hold_batches = False
        h.anthropic.end_batches()
        await h.wait_state(job_id, JobState.SUCCEEDED)
        assert len(h.anthropic.batch_creates) == 1 and h.anthropic.message_requests == []


async def test_a_batch_repository_on_a_provider_without_batches_is_reviewed_interactively(
    tmp_path, backend, caplog
) -> None:
    # Bedrock has no Message Batches (the SDK refuses them): `batch: true` and REVIEWER_BATCH=1 change nothing there,
    # and the start says so once instead of each job failing to send a batch.
    caplog.set_level(logging.INFO, logger="reviewer_app")
    async with batching(tmp_path, backend, provider="bedrock") as h:
        _, job_id = await h.open_pr()
        await h.wait_state(job_id, JobState.SUCCEEDED)
        assert len(h.anthropic.message_requests) == 1 and h.anthropic.model_ids == [h.svc.cfg.model]
        assert await h.store.batch_requests_of(job_id) == []
        assert len(bot_reviews(h, 1)) == 1
    said = [r.getMessage() for r in caplog.records if "Message Batches" in r.getMessage()]
    assert said == [
        "Amazon Bedrock has no Message Batches: every review is asked interactively (REVIEWER_BATCH and `batch: true` "
        "change nothing)"
    ]
