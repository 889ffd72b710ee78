"""Claude through each REVIEWER_MODEL_PROVIDER: the client the configuration chooses, against the fake of that
provider's wire format (tests/fakes/platforms.py) with the real SDK, credentials from the standard environment."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import anthropic
import pytest

from reviewer_app.core.errors import RateLimited, TransientError
from reviewer_app.core.states import JobState
from reviewer_app.review.batches import BatchPoller
from reviewer_app.review.claude import ClaudeReviewer, min_cacheable_tokens
from reviewer_app.review.claude_errors import DEFAULT_RATE_LIMIT_WAIT
from reviewer_app.review.model_client import ModelEndpoint, ModelUnavailable, make_client
from reviewer_app.settings.config import load_config
from tests.fakes.keys import generate_key_pair
from tests.fakes.platforms import FakeBedrock, FakeVertex, fake_for, in_client_environment
from tests.store.test_batches_store import deferred_job
from tests.store.test_store_contract import NOW

PROVIDERS = ["anthropic", "bedrock", "vertex"]
GATEWAY = "X-Gateway-Key: gw-123\nX-Route: claude-reviews"
ANSWER = {"summary": "One finding.", "comments": []}
BEDROCK_DEFAULT = "anthropic.claude-sonnet-4-5-20250929-v1:0"
VERTEX_DEFAULT = "claude-sonnet-4-5@20250929"


@contextlib.asynccontextmanager
async def reviewer_for(env: dict[str, str], provider: str, **settings: str) -> AsyncIterator[ClaudeReviewer]:
    """The reviewer `serve` builds for this configuration (review/model_client.py chooses the client)."""
    cfg = load_config({**env, "REVIEWER_MODEL_PROVIDER": provider, **settings}, require_webhook_secret=False)
    async with make_client(ModelEndpoint.from_config(cfg), timeout=5.0, max_retries=0) as client:
        yield ClaudeReviewer(client, cfg.model, provider=cfg.provider, clock=lambda: NOW)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_review_reaches_each_provider_with_its_model_id_and_the_gateway_headers(tmp_path, provider) -> None:
    fake = fake_for(provider)
    fake.script_tool_answer(ANSWER)
    async with fake.serve():
        with in_client_environment(fake, tmp_path) as env:
            async with reviewer_for(env, provider, ANTHROPIC_CUSTOM_HEADERS=GATEWAY) as reviewer:
                answer = await reviewer.review("diff --git a/x.py b/x.py\n+print('hello')\n")
    assert answer.summary == "One finding."
    [request] = fake.message_requests
    assert (request.headers["x-gateway-key"], request.headers["x-route"]) == ("gw-123", "claude-reviews")
    if isinstance(fake, FakeBedrock | FakeVertex):
        assert fake.model_ids[-1] == reviewer.model == {"bedrock": BEDROCK_DEFAULT, "vertex": VERTEX_DEFAULT}[provider]
    if isinstance(fake, FakeBedrock):
        assert reviewer.count_calls == 0  # the SDK's Bedrock client has no token counting: estimated, not asked
        assert "x-gateway-key" in fake.signed_headers[-1]  # the gateway's headers are signed with the rest
    else:
        assert reviewer.count_calls > 0
    assert request.system[0]["text"] and request.tool_choice == {"type": "tool", "name": "submit_review"}


async def test_bedrock_throttling_waits_the_default_minute_as_bedrock_says_no_retry_after(tmp_path) -> None:
    fake = FakeBedrock()
    fake.script_rate_limit(retry_after=7)  # the fake drops it: Bedrock sends no retry-after
    async with fake.serve():
        with in_client_environment(fake, tmp_path) as env:
            async with reviewer_for(env, "bedrock") as reviewer:
                with pytest.raises(RateLimited) as waited:
                    await reviewer.review("+x = 1\n")
    assert waited.value.retry_at == NOW + DEFAULT_RATE_LIMIT_WAIT


async def test_a_credentials_chain_that_fails_is_a_retried_job_error_naming_only_its_type(tmp_path) -> None:
    fake = FakeVertex()
    async with fake.serve():
        with in_client_environment(fake, tmp_path) as env:
            sign_with_another_key(Path(env["GOOGLE_APPLICATION_CREDENTIALS"]))
            async with reviewer_for(env, "vertex") as reviewer:
                with pytest.raises(TransientError, match=r"credentials could not be loaded \(RefreshError\)") as failed:
                    await reviewer.review("+x = 1\n")
    assert "PRIVATE KEY" not in failed.value.reason and fake.message_requests == []


def sign_with_another_key(adc: Path) -> None:
    """The service account key file, with a key the token endpoint does not know: its grant is refused."""
    key = generate_key_pair().private_pem
    adc.write_text(json.dumps({**json.loads(adc.read_text()), "private_key": key}))


@pytest.mark.parametrize(
    ("provider", "cleared", "says"),
    [
        ("bedrock", ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"), "Amazon Bedrock: No AWS region"),
        ("vertex", ("CLOUD_ML_REGION",), "Google Vertex AI: No region was given"),
    ],
)
def test_a_client_without_its_region_is_one_line_saying_what_to_set(monkeypatch, tmp_path, provider, cleared, says):
    for name in cleared:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))  # no profile can name a region
    cfg = load_config({"REVIEWER_MODEL_PROVIDER": provider}, require_webhook_secret=False)
    with pytest.raises(ModelUnavailable, match=says) as raised:
        make_client(ModelEndpoint.from_config(cfg), timeout=1.0)
    assert "\n" not in str(raised.value)


def test_cache_minimums_go_by_the_claude_api_name_of_any_providers_model_id() -> None:
    assert min_cacheable_tokens("anthropic.claude-haiku-4-5-20251001-v1:0") == 4096
    assert min_cacheable_tokens("eu.anthropic.claude-haiku-4-5-20251001-v1:0") == 4096
    assert min_cacheable_tokens("claude-haiku-4-5@20251001") == 4096
    assert min_cacheable_tokens("anthropic.claude-3-5-haiku-20241022-v1:0") == 2048
    assert min_cacheable_tokens("global.anthropic.claude-sonnet-4-5-20250929-v1:0") == 1024


async def test_batches_an_earlier_provider_sent_are_settled_as_errored_and_their_jobs_woken(store, tmp_path) -> None:
    # A host switched from the Claude API to Bedrock with a batch still out: Bedrock cannot be asked about it, so its
    # requests end errored and each job asks again interactively (instead of waiting on it forever).
    job_id = await deferred_job(store)
    client = anthropic.AsyncAnthropicBedrock(
        aws_access_key="AKIAUNUSED0000000000",
        aws_secret_key="unused",
        aws_region="us-east-1",
        base_url="http://127.0.0.1:9",
    )
    poller = BatchPoller(client, store, clock=lambda: NOW + 5, unavailable="Amazon Bedrock has no Message Batches")
    assert await poller.run_once() == 1
    [request] = await store.batch_requests_of(job_id)
    assert (request.state, request.error) == ("errored", "Amazon Bedrock has no Message Batches")
    job = await store.get_job(job_id)
    assert job.state is JobState.QUEUED and job.next_attempt_at == NOW + 5
    await client.close()
