"""Caching that caches: the fake refuses cache reads below each model's minimum, and the reviewer marks the prompt
where a mark pays (the fixed prefix when it is long enough, the shared blocks, the whole diff when a tool
conversation's next turn starts with it)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anthropic
import pytest

from reviewer_app.core.states import JobState
from reviewer_app.review.claude import ClaudeReviewer, min_cacheable_tokens
from reviewer_app.review.model_client import ModelEndpoint, make_client
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.anthropic import min_cacheable_tokens as fake_minimum
from tests.fakes.github import added_file
from tests.harness import harness

KEY = "sk-ant-test-key"
EPHEMERAL = {"type": "ephemeral"}
DIFF = "\n".join(f"+    total_{i} = compute_the_value({i}, weight={i * 3})" for i in range(400))  # ~5,000 tokens


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    fake = FakeAnthropic(api_key=KEY)
    async with fake.serve():
        yield fake


@pytest.fixture
async def client(fake: FakeAnthropic) -> AsyncIterator[anthropic.AsyncAnthropic]:
    c = make_client(ModelEndpoint(api_key=KEY, base_url=fake.base_url), timeout=5.0, max_retries=0)
    async with c:
        yield c


async def post(fake: FakeAnthropic, path: str, body: dict[str, Any]) -> dict[str, Any]:
    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    async with aiohttp.ClientSession() as http, http.post(f"{fake.base_url}{path}", json=body, headers=headers) as r:
        assert r.status == 200, await r.text()
        return await r.json()


def body(model: str, system_words: int, **extra: Any) -> dict[str, Any]:
    system = [{"type": "text", "text": "rule " * system_words, "cache_control": EPHEMERAL}]
    return {
        "model": model,
        "max_tokens": 100,
        "system": system,
        "messages": [{"role": "user", "content": "review this"}],
        **extra,
    }


# --- the fake enforces the documented minimums --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "minimum"),
    [
        ("claude-sonnet-4-5", 1024),
        ("claude-sonnet-4-5-20250929", 1024),
        ("claude-opus-4-1", 1024),
        ("claude-haiku-4-5", 4096),
        ("claude-opus-4-5", 4096),
    ],
)
def test_the_fake_knows_each_models_minimum_and_the_reviewer_agrees(model: str, minimum: int) -> None:
    assert fake_minimum(model) == minimum
    assert min_cacheable_tokens(model) == minimum


@pytest.mark.parametrize(
    ("model", "words", "cached"),
    [
        ("claude-sonnet-4-5", 600, False),  # ~750 tokens: below Sonnet's 1,024
        ("claude-sonnet-4-5", 1000, True),  # ~1,250 tokens
        ("claude-haiku-4-5", 1000, False),  # below Haiku 4.5's 4,096
        ("claude-haiku-4-5", 3500, True),
    ],
)
async def test_a_prefix_below_the_models_minimum_is_neither_written_nor_read(
    fake: FakeAnthropic, model: str, words: int, cached: bool
) -> None:
    first = (await post(fake, "/v1/messages", body(model, words)))["usage"]
    second = (await post(fake, "/v1/messages", body(model, words)))["usage"]
    if cached:
        assert first["cache_creation_input_tokens"] > 0 and second["cache_read_input_tokens"] > 0
    else:
        assert (first["cache_creation_input_tokens"], second["cache_read_input_tokens"]) == (0, 0)
        assert second["input_tokens"] == first["input_tokens"]  # all of it billed as plain input, every time


async def test_count_tokens_matches_what_a_request_is_billed(fake: FakeAnthropic) -> None:
    request = body("claude-sonnet-4-5", 1500)
    counted = (await post(fake, "/v1/messages/count_tokens", request))["input_tokens"]
    usage = (await post(fake, "/v1/messages", request))["usage"]
    billed = usage["input_tokens"] + usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"]
    assert counted == billed


async def test_a_breakpoint_in_the_messages_caches_everything_before_it(fake: FakeAnthropic) -> None:
    user = [{"type": "text", "text": DIFF, "cache_control": EPHEMERAL}]
    request = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [{"role": "user", "content": user}]}
    first = (await post(fake, "/v1/messages", request))["usage"]
    follow = {
        **request,
        "messages": [
            *request["messages"],
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "and now?"},
        ],
    }
    second = (await post(fake, "/v1/messages", follow))["usage"]
    assert (
        first["cache_creation_input_tokens"] > 4000
        and second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    )


# --- the reviewer marks where it pays -----------------------------------------------------------------------------


async def test_the_fixed_prefix_is_marked_only_above_the_models_minimum(
    fake: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    await ClaudeReviewer(client, "claude-sonnet-4-5").review("small diff")
    await ClaudeReviewer(client, "claude-haiku-4-5").review("small diff")
    sonnet, haiku = fake.message_requests
    assert sonnet.system[0]["cache_control"] == EPHEMERAL  # tools + system: ~1,300 tokens
    assert "cache_control" not in haiku.system[0]  # below 4,096: a mark there would pay nothing
    assert "cache_control" not in haiku.messages[0]["content"][0]  # the whole prompt is below 4,096 too
    counts = [r for r in fake.requests if r.path == "/v1/messages/count_tokens"]
    assert counts, "the prefix is measured with the token counting endpoint"


async def test_a_one_request_review_leaves_its_diff_unmarked_and_a_re_ask_pays_it_again(
    fake: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    fake.script_malformed_answer()
    reviewer = ClaudeReviewer(client, "claude-haiku-4-5")  # the hardest minimum: 4,096
    answer = await reviewer.review(["Review this.", f"<files>\n{DIFF}\n</files>"])
    first, second = fake.message_requests
    # No follow-up starts with the whole turn: a mark there would cost a write (1.25x) on every review, paid back
    # only by a retry; the re-ask after the malformed answer pays the diff again, and nothing was written.
    assert all("cache_control" not in block for block in first.messages[0]["content"])
    meter = reviewer.last_usage
    assert meter.calls == 2
    assert meter.cache_read_input_tokens == 0 and meter.cache_creation_input_tokens == 0
    assert answer.input_tokens == meter.input_tokens > 2 * 4096


async def test_without_token_counting_the_reviewer_estimates_and_stops_asking(
    fake: FakeAnthropic, client: anthropic.AsyncAnthropic
) -> None:
    fake.count_tokens_status = 404
    reviewer = ClaudeReviewer(client, "claude-sonnet-4-5")
    await reviewer.review(DIFF)
    await reviewer.review(DIFF + "\n+x")
    assert reviewer.count_calls == 1  # the endpoint is missing: asked once, never again
    first, second = fake.message_requests
    assert first.system[0]["cache_control"] == EPHEMERAL and second.system[0]["cache_control"] == EPHEMERAL


# --- end to end: a retry reads what the lost attempt wrote ---------------------------------------------------------


async def test_a_retried_review_reads_the_prefix_its_lost_attempt_cached_and_each_attempt_reports_its_own(
    tmp_path,
) -> None:
    source = added_file("src/totals.py", [f"total_{i} = compute_the_value({i}, weight={i * 3})" for i in range(300)])
    async with harness(tmp_path) as h:
        h.anthropic.script_lost_answer()  # the API processed the prompt; the answer never arrived
        pull, job_id = await h.open_pr(files=[source])
        await h.wait_state(job_id, JobState.SUCCEEDED)
        lost, answered = h.anthropic.message_requests
        assert json.dumps(lost.messages) == json.dumps(answered.messages)
        first, second = await h.store.attempts_of(job_id)
        assert first.outcome == "retry" and first.cache_read_tokens == 0 and first.input_tokens == 0
        user_turn = sum(len(json.dumps(b)) for b in answered.messages[0]["content"]) // 4
        assert 0 < second.cache_read_tokens < user_turn  # tools and system from the cache; the diff was not marked
        assert second.input_tokens > user_turn and second.cache_creation_tokens == 0
