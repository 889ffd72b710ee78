"""The pure parts of Message Batches: which jobs are batched, request names, prices and what was saved, the settings;
and the fake's batches endpoints as the real SDK sees them."""

from __future__ import annotations

import anthropic
import pytest

from reviewer_app.core.batching import BatchPolicy, batch_reason, custom_id
from reviewer_app.core.pricing import DEFAULT_PRICES, Price, cost, parse_prices, price_of
from reviewer_app.review.repo_config import parse_repo_config
from reviewer_app.settings.config import ConfigError, load_config
from tests.fakes.anthropic import FakeAnthropic

ON = BatchPolicy(enabled=True, after_seconds=600)


def reason(trigger: str = "auto", action: str | None = "opened", repo: bool | None = None, waited: float = 0.0, **kw):
    return batch_reason(
        trigger=trigger,
        action=action,
        repo_batch=repo,
        waited_seconds=waited,
        tools=kw.get("tools", False),
        policy=kw.get("policy", ON),
    )


@pytest.mark.parametrize(
    ("kwargs", "batched"),
    [
        ({}, False),  # a push: someone may be watching
        ({"action": "sweep"}, True),
        ({"repo": True}, True),
        ({"waited": 601}, True),
        ({"waited": 599}, False),
        ({"trigger": "draft", "action": "sweep"}, True),
        ({"trigger": "base:123", "repo": True}, True),  # a retargeted base is automatic work
        # Requested reviews and replies always run now, whatever else says batch.
        ({"trigger": "manual:42", "action": "sweep", "repo": True, "waited": 9999}, False),
        ({"trigger": "rerun:7", "repo": True}, False),
        ({"repo": False, "action": "sweep", "waited": 9999}, False),  # the repository opted out
        ({"repo": True, "tools": True}, False),  # repository tools need turns a batch cannot hold
        ({"repo": True, "policy": BatchPolicy(enabled=False)}, False),  # REVIEWER_BATCH=0
        ({"waited": 10**6, "policy": BatchPolicy(after_seconds=0)}, False),  # waiting alone is off by default
    ],
)
def test_which_jobs_go_through_message_batches(kwargs, batched) -> None:
    assert (reason(**kwargs) is not None) is batched


def test_custom_ids_are_what_the_api_accepts() -> None:
    assert custom_id(12, "ab12cd34ef56ab12cd34ef56") == "job-12-ab12cd34ef56ab12cd34ef56"
    with pytest.raises(ValueError):
        custom_id(1, "not allowed!")
    with pytest.raises(ValueError):
        custom_id(1, "x" * 64)


def test_prices_by_model_name_and_the_batch_discount() -> None:
    assert price_of(DEFAULT_PRICES, "claude-sonnet-4-5-20250929") == DEFAULT_PRICES["claude-sonnet-4"]
    assert price_of(DEFAULT_PRICES, "claude-opus-4-1-20250805") == DEFAULT_PRICES["claude-opus-4-1"]  # longest prefix
    assert price_of(DEFAULT_PRICES, "someone-elses-model") is None
    tokens = {"input_tokens": 1_000_000, "output_tokens": 100_000, "cache_creation_tokens": 0, "cache_read_tokens": 0}
    interactive = cost(DEFAULT_PRICES, "claude-sonnet-4-5", **tokens, batched=False)
    batched = cost(DEFAULT_PRICES, "claude-sonnet-4-5", **tokens, batched=True)
    assert interactive.dollars == pytest.approx(4.5) and interactive.saved == 0
    assert batched.dollars == pytest.approx(2.25) and batched.saved == pytest.approx(2.25)
    unknown = cost(DEFAULT_PRICES, "mystery", **tokens, batched=True)
    assert unknown.dollars is None and unknown.saved is None


def test_the_price_table_setting() -> None:
    table = parse_prices('{"my-model": {"input": 1, "output": 2, "cache_write": 1.25, "cache_read": 0.1}}', base={})
    assert table == {"my-model": Price(1.0, 2.0, 1.25, 0.1)}
    cfg = load_config(
        {"REVIEWER_PRICES": '{"claude-sonnet-4": {"input": 2, "output": 10}}'}, require_webhook_secret=False
    )
    assert cfg.price_table["claude-sonnet-4"] == Price(2.0, 10.0, 0.0, 0.0)
    assert cfg.price_table["claude-haiku-4-5"] == DEFAULT_PRICES["claude-haiku-4-5"]
    for bad in ("not json", "[1]", '{"m": {"inptu": 1}}', '{"m": {"input": -1}}', '{"m": {"input": "1"}}'):
        with pytest.raises(ConfigError, match="REVIEWER_PRICES"):
            load_config({"REVIEWER_PRICES": bad}, require_webhook_secret=False)


def test_batch_settings_and_the_repository_switch() -> None:
    cfg = load_config({}, require_webhook_secret=False)
    assert (cfg.batch, cfg.batch_after_seconds, cfg.batch_poll_seconds) == (True, 0.0, 60.0)
    off = load_config({"REVIEWER_BATCH": "0", "REVIEWER_BATCH_AFTER_SECONDS": "300"}, require_webhook_secret=False)
    assert (off.batch, off.batch_after_seconds) == (False, 300.0)
    assert parse_repo_config("batch: true", max_input_tokens=60000, max_parts=3).batch is True
    assert parse_repo_config("batch: false", max_input_tokens=60000, max_parts=3).batch is False
    assert parse_repo_config("auto: true", max_input_tokens=60000, max_parts=3).batch is None
    wrong = parse_repo_config("batch: sometimes", max_input_tokens=60000, max_parts=3)
    assert wrong.batch is None and wrong.errors == ("batch must be true or false",)


async def test_the_fakes_batches_endpoints_through_the_sdk() -> None:
    fake = FakeAnthropic()
    fake.hold_batches = True
    fake.batch_outcomes["second"] = "errored"
    async with fake.serve() as url:
        client = anthropic.AsyncAnthropic(api_key="sk-ant-test", base_url=url, max_retries=0)
        params = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
        with pytest.raises(anthropic.BadRequestError):
            await client.messages.batches.create(requests=[{"custom_id": "bad id!", "params": params}])
        with pytest.raises(anthropic.BadRequestError):
            await client.messages.batches.create(requests=[{"custom_id": "a", "params": {"model": "m"}}])
        batch = await client.messages.batches.create(
            requests=[{"custom_id": "first", "params": params}, {"custom_id": "second", "params": params}]
        )
        assert batch.processing_status == "in_progress" and batch.request_counts.processing == 2
        assert batch.results_url is None and batch.expires_at > batch.created_at
        assert (await client.messages.batches.retrieve(batch.id)).processing_status == "in_progress"
        fake.end_batches()
        ended = await client.messages.batches.retrieve(batch.id)
        assert ended.processing_status == "ended" and ended.results_url
        assert (ended.request_counts.succeeded, ended.request_counts.errored) == (1, 1)
        results = {r.custom_id: r.result async for r in await client.messages.batches.results(batch.id)}
        assert results["first"].type == "succeeded" and results["first"].message.content[0].type == "tool_use"
        assert results["second"].type == "errored" and results["second"].error.error.type == "api_error"

        held = await client.messages.batches.create(requests=[{"custom_id": "c", "params": params}])
        assert (await client.messages.batches.cancel(held.id)).processing_status == "canceling"
        cancelled = await client.messages.batches.retrieve(held.id)
        assert cancelled.processing_status == "ended" and cancelled.request_counts.canceled == 1
        assert cancelled.cancel_initiated_at is not None

        expiring = await client.messages.batches.create(requests=[{"custom_id": "d", "params": params}])
        fake.expire_batches()
        assert [r.result.type async for r in await client.messages.batches.results(expiring.id)] == ["expired"]
        with pytest.raises(anthropic.NotFoundError):
            await client.messages.batches.retrieve("msgbatch_nope")
        fake.script_batch_create_error(500, "api_error", "boom")
        with pytest.raises(anthropic.InternalServerError):
            await client.messages.batches.create(requests=[{"custom_id": "e", "params": params}])
        await client.close()


async def test_a_request_submitted_while_a_batch_is_being_created_is_sent_in_the_next_one() -> None:
    # Found by the model test's long PostgreSQL profile: a second job's request arrived while the first job's
    # batches.create was in flight; the submitter's sending task was still running, so none was started for it, and
    # the second job waited on its batch id until the job timed out.
    import asyncio
    import time

    from reviewer_app.review.batches import BatchSubmitter
    from tests.helpers import eventually

    async def _true(value: bool) -> bool:
        return value

    fake = FakeAnthropic()
    fake.batch_create_gate = asyncio.Event()
    params = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    async with fake.serve() as url:
        client = anthropic.AsyncAnthropic(api_key="sk-ant-test", base_url=url, max_retries=0)
        submitter = BatchSubmitter(client, gather_seconds=0.0, clock=time.time)
        first = asyncio.create_task(submitter.submit([{"custom_id": "first", "params": params}]))
        await fake.wait_for_requests(1)  # the first create is in flight, held by the gate
        second = asyncio.create_task(submitter.submit([{"custom_id": "second", "params": params}]))
        # The second request joins while the first create has not answered.
        await eventually(lambda: _true(any(r[0][0]["custom_id"] == "second" for r in submitter._waiting)))
        fake.batch_create_gate.set()
        first_batch, second_batch = await asyncio.wait_for(asyncio.gather(first, second), timeout=10)
    assert first_batch != second_batch and submitter.batches_created == 2
    assert [[r["custom_id"] for r in c.body["requests"]] for c in fake.batch_creates] == [["first"], ["second"]]
