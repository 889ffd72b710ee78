"""The fake Messages API behaves like the real one where our client depends on it, over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anthropic
import pytest

from tests.fakes.anthropic import FakeAnthropic

KEY = "sk-ant-test-fake-key"
HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
BODY: dict[str, Any] = {
    "model": "claude-test",
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "hello"}],
}


@pytest.fixture
async def served() -> AsyncIterator[tuple[FakeAnthropic, str]]:
    fake = FakeAnthropic(api_key=KEY)
    async with fake.serve() as base_url:
        yield fake, base_url


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def post(
    http: aiohttp.ClientSession, url: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, Any, Any]:
    async with http.post(url, json=body, headers=HEADERS if headers is None else headers) as resp:
        return resp.status, await resp.json(), resp.headers


async def test_missing_key_is_401_authentication_error(served: tuple[FakeAnthropic, str], http: Any) -> None:
    fake, base = served
    status, body, headers = await post(http, f"{base}/v1/messages", BODY, {"anthropic-version": "2023-06-01"})
    assert status == 401
    assert body["type"] == "error"
    assert body["error"]["type"] == "authentication_error"
    assert headers["request-id"]
    assert len(fake.requests) == 1


async def test_wrong_key_is_401(served: tuple[FakeAnthropic, str], http: Any) -> None:
    _, base = served
    status, body, _ = await post(http, f"{base}/v1/messages", BODY, {**HEADERS, "x-api-key": "nope"})
    assert status == 401 and body["error"]["type"] == "authentication_error"


async def test_missing_version_header_is_400(served: tuple[FakeAnthropic, str], http: Any) -> None:
    _, base = served
    status, body, _ = await post(http, f"{base}/v1/messages", BODY, {"x-api-key": KEY})
    assert status == 400 and body["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("missing", ["model", "max_tokens", "messages"])
async def test_missing_required_field_is_400(served: tuple[FakeAnthropic, str], http: Any, missing: str) -> None:
    fake, base = served
    fake.script_server_error()  # must not be consumed by an invalid request
    body = {k: v for k, v in BODY.items() if k != missing}
    status, answer, _ = await post(http, f"{base}/v1/messages", body)
    assert status == 400
    assert answer["error"]["type"] == "invalid_request_error"
    assert missing in answer["error"]["message"]
    assert fake.pending == 1


async def test_forced_tool_must_exist(served: tuple[FakeAnthropic, str], http: Any) -> None:
    _, base = served
    body = {**BODY, "tool_choice": {"type": "tool", "name": "submit_review"}, "tools": []}
    status, answer, _ = await post(http, f"{base}/v1/messages", body)
    assert status == 400 and "submit_review" in answer["error"]["message"]


async def test_unanswered_tool_use_is_400(served: tuple[FakeAnthropic, str], http: Any) -> None:
    _, base = served
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "x", "input": {}}]},
        {"role": "user", "content": "again"},
    ]
    status, _, _ = await post(http, f"{base}/v1/messages", {**BODY, "messages": messages})
    assert status == 400


async def test_scripted_answer_has_the_real_shape(served: tuple[FakeAnthropic, str], http: Any) -> None:
    fake, base = served
    fake.script_tool_answer({"summary": "s", "comments": []}, usage={"input_tokens": 11, "output_tokens": 5})
    status, msg, headers = await post(http, f"{base}/v1/messages", BODY)
    assert status == 200
    assert headers["request-id"]
    assert set(msg) == {"id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"}
    assert (msg["type"], msg["role"], msg["model"]) == ("message", "assistant", "claude-test")
    assert msg["stop_reason"] == "tool_use" and msg["stop_sequence"] is None
    [block] = msg["content"]
    assert block["type"] == "tool_use" and block["name"] == "submit_review" and block["id"].startswith("toolu_")
    assert block["input"] == {"summary": "s", "comments": []}
    assert msg["usage"]["input_tokens"] == 11 and msg["usage"]["output_tokens"] == 5
    assert set(msg["usage"]) == {
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    }


async def test_default_answer_when_script_is_empty(served: tuple[FakeAnthropic, str], http: Any) -> None:
    fake, base = served
    fake.default_answer = {"summary": "default", "comments": []}
    _, msg, _ = await post(http, f"{base}/v1/messages", BODY)
    assert msg["content"][0]["input"]["summary"] == "default"


async def test_script_is_first_in_first_out_and_counts(served: tuple[FakeAnthropic, str], http: Any) -> None:
    fake, base = served
    fake.script_overloaded(times=2)
    fake.script_text_answer("plain")
    fake.script_empty_answer()
    statuses = [(await post(http, f"{base}/v1/messages", BODY))[:2] for _ in range(5)]
    assert [s for s, _ in statuses] == [529, 529, 200, 200, 200]
    assert statuses[0][1]["error"]["type"] == "overloaded_error"
    assert statuses[2][1]["content"] == [{"type": "text", "text": "plain"}]
    assert statuses[3][1]["content"] == []
    assert statuses[4][1]["content"][0]["type"] == "tool_use"
    assert len(fake.message_requests) == 5


async def test_rate_limit_carries_retry_after(served: tuple[FakeAnthropic, str], http: Any) -> None:
    fake, base = served
    fake.script_rate_limit(retry_after=7)
    status, body, headers = await post(http, f"{base}/v1/messages", BODY)
    assert status == 429 and body["error"]["type"] == "rate_limit_error"
    assert headers["retry-after"] == "7"


async def test_spend_limit_has_code_and_no_retry_after(served: tuple[FakeAnthropic, str], http: Any) -> None:
    fake, base = served
    fake.script_spend_limit()
    status, body, headers = await post(http, f"{base}/v1/messages", BODY)
    assert status == 429
    assert body["error"]["details"]["error_code"] == "enforced_spend_limit_reached"
    assert "spend limit" in body["error"]["message"]
    assert "retry-after" not in headers


async def test_count_tokens_is_deterministic(served: tuple[FakeAnthropic, str], http: Any) -> None:
    _, base = served
    body = {"model": "claude-test", "messages": [{"role": "user", "content": "x" * 400}]}
    first = await post(http, f"{base}/v1/messages/count_tokens", body)
    second = await post(http, f"{base}/v1/messages/count_tokens", body)
    assert first[0] == 200 and first[1] == second[1]
    assert first[1]["input_tokens"] >= 100


async def test_cache_marked_prefix_is_written_then_read(served: tuple[FakeAnthropic, str], http: Any) -> None:
    _, base = served
    body = {**BODY, "system": [{"type": "text", "text": "rules " * 800, "cache_control": {"type": "ephemeral"}}]}
    _, first, _ = await post(http, f"{base}/v1/messages", body)
    _, second, _ = await post(http, f"{base}/v1/messages", body)
    assert first["usage"]["cache_creation_input_tokens"] > 0 and first["usage"]["cache_read_input_tokens"] == 0
    assert second["usage"]["cache_read_input_tokens"] == first["usage"]["cache_creation_input_tokens"]
    assert second["usage"]["cache_creation_input_tokens"] == 0


async def test_real_sdk_talks_to_the_fake(served: tuple[FakeAnthropic, str]) -> None:
    fake, base = served
    fake.script_tool_answer({"summary": "ok", "comments": []})
    client = anthropic.AsyncAnthropic(api_key=KEY, base_url=base, max_retries=0)
    async with client:
        msg = await client.messages.create(**BODY)
        count = await client.messages.count_tokens(model="claude-test", messages=BODY["messages"])
    assert msg.content[0].type == "tool_use"
    assert msg._request_id and msg._request_id.startswith("req_fake")
    assert count.input_tokens > 0
    assert fake.requests[0].headers.get("anthropic-version")


async def test_sdk_sees_spend_limit_as_its_specific_class(served: tuple[FakeAnthropic, str]) -> None:
    fake, base = served
    fake.script_spend_limit()
    client = anthropic.AsyncAnthropic(api_key=KEY, base_url=base, max_retries=0)
    async with client:
        with pytest.raises(anthropic.EnforcedSpendLimitReachedError):
            await client.messages.create(**BODY)


async def test_disconnect_is_a_connection_error_for_the_sdk(served: tuple[FakeAnthropic, str]) -> None:
    fake, base = served
    fake.script_disconnect()
    client = anthropic.AsyncAnthropic(api_key=KEY, base_url=base, max_retries=0)
    async with client:
        with pytest.raises(anthropic.APIConnectionError):
            await client.messages.create(**BODY)
        msg = await client.messages.create(**BODY)  # the fake keeps serving after a dropped connection
    assert msg.stop_reason == "tool_use"


async def test_wait_for_requests_signals_arrival(served: tuple[FakeAnthropic, str], http: Any) -> None:
    fake, base = served
    await post(http, f"{base}/v1/messages", BODY)
    await fake.wait_for_requests(1, within=1)
    with pytest.raises(TimeoutError):
        await fake.wait_for_requests(2, within=0.05)
