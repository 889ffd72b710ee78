"""The fake Bedrock and Vertex AI endpoints as the real SDK clients see them: what each platform accepts (a SigV4
signature for bedrock in its region, a token its OAuth endpoint minted) and what it refuses, in its own shapes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.fakes.platforms import (
    AWS_ACCESS_KEY,
    AWS_SECRET_KEY,
    BEDROCK_VERSION,
    VERTEX_VERSION,
    FakeBedrock,
    FakeVertex,
    in_client_environment,
)

BEDROCK_MODEL = "anthropic.claude-haiku-4-5-20251001-v1:0"
VERTEX_MODEL = "claude-haiku-4-5@20251001"
HELLO = [{"role": "user", "content": "Hello"}]


@pytest.fixture
async def bedrock() -> AsyncIterator[FakeBedrock]:
    fake = FakeBedrock()
    async with fake.serve():
        yield fake


@pytest.fixture
async def vertex(tmp_path: Path) -> AsyncIterator[FakeVertex]:
    fake = FakeVertex()
    async with fake.serve():
        with in_client_environment(fake, tmp_path):
            yield fake


def bedrock_client(fake: FakeBedrock, **kw: Any) -> anthropic.AsyncAnthropicBedrock:
    options: dict[str, Any] = {
        "aws_access_key": AWS_ACCESS_KEY,
        "aws_secret_key": AWS_SECRET_KEY,
        "aws_region": fake.region,
        "base_url": fake.base_url,
        "max_retries": 0,
        **kw,
    }
    return anthropic.AsyncAnthropicBedrock(**options)


def vertex_client(fake: FakeVertex, **kw: Any) -> anthropic.AsyncAnthropicVertex:
    options: dict[str, Any] = {
        "region": fake.region,
        "project_id": fake.project,
        "base_url": f"{fake.base_url}/v1",
        "max_retries": 0,
        **kw,
    }
    return anthropic.AsyncAnthropicVertex(**options)


async def test_bedrock_takes_a_signed_invoke_with_its_version_and_names_the_model_as_anthropic_does(bedrock) -> None:
    async with bedrock_client(bedrock) as client:
        message = await client.messages.create(
            model=BEDROCK_MODEL, max_tokens=64, messages=HELLO, extra_body={"anthropic_version": BEDROCK_VERSION}
        )
    assert message.model == "claude-haiku-4-5-20251001"
    [request] = bedrock.message_requests
    assert request.path == f"/model/{BEDROCK_MODEL}/invoke" and "model" not in request.body
    assert request.body["anthropic_version"] == BEDROCK_VERSION
    assert bedrock.model_ids == [BEDROCK_MODEL]
    [signed] = bedrock.signed_headers
    assert {"host", "x-amz-date", "content-type"} <= set(signed)


async def test_bedrock_refuses_the_sdks_default_version_a_model_in_the_body_and_unknown_model_ids(bedrock) -> None:
    async with bedrock_client(bedrock) as client:
        # The SDK's own default anthropic_version is not the one Bedrock documents: the app sends Bedrock's.
        with pytest.raises(anthropic.BadRequestError, match="anthropic_version must be bedrock-2023-05-31"):
            await client.messages.create(model=BEDROCK_MODEL, max_tokens=64, messages=HELLO)
        with pytest.raises(anthropic.BadRequestError, match="model identifier is invalid"):
            await client.messages.create(
                model="claude-haiku-4-5",
                max_tokens=64,
                messages=HELLO,
                extra_body={"anthropic_version": BEDROCK_VERSION},
            )
    # The SDK moves the model to the path; a body that still names it is refused, as Bedrock refuses it.
    body = {"anthropic_version": BEDROCK_VERSION, "model": BEDROCK_MODEL, "max_tokens": 64, "messages": HELLO}
    status, answer, _ = await signed_post(bedrock, json.dumps(body).encode())
    assert status == 400 and "extraneous key [model]" in answer["message"]
    assert bedrock.model_ids == []


async def signed_post(fake: FakeBedrock, signed_body: bytes, sent_body: bytes | None = None) -> tuple[int, Any, Any]:
    """POST to the invoke path, signed (with the test keys) over ``signed_body`` and sending ``sent_body``."""
    url = f"{fake.base_url}/model/{BEDROCK_MODEL}/invoke"
    signed = AWSRequest(method="POST", url=url, data=signed_body, headers={"content-type": "application/json"})
    SigV4Auth(Credentials(AWS_ACCESS_KEY, AWS_SECRET_KEY), "bedrock", fake.region).add_auth(signed)
    async with aiohttp.ClientSession() as http:
        data = signed_body if sent_body is None else sent_body
        async with http.post(url, data=data, headers=dict(signed.headers.items())) as response:
            return response.status, await response.json(), response.headers


@pytest.mark.parametrize(
    ("client_options", "why"),
    [
        ({"aws_secret_key": "not-the-secret"}, "signature we calculated does not match"),
        ({"aws_region": "eu-west-1"}, "scoped to a valid region \\(us-east-1\\)"),
        ({"aws_access_key": "AKIAOTHERKEY00000000"}, "security token included in the request is invalid"),
    ],
)
async def test_bedrock_refuses_a_signature_it_cannot_verify_with_403_in_aws_shape(bedrock, client_options, why) -> None:
    async with bedrock_client(bedrock, **client_options) as client:
        with pytest.raises(anthropic.PermissionDeniedError, match=why) as raised:
            await client.messages.create(
                model=BEDROCK_MODEL, max_tokens=64, messages=HELLO, extra_body={"anthropic_version": BEDROCK_VERSION}
            )
    assert raised.value.response.headers["x-amzn-ErrorType"].startswith("InvalidSignatureException")
    assert bedrock.model_ids == []


async def test_bedrock_refuses_a_body_changed_after_signing_and_a_request_without_a_signature(bedrock) -> None:
    status, answer, _ = await signed_post(bedrock, b'{"a": 1}', sent_body=b'{"a": 2}')
    assert status == 403 and "does not match" in answer["message"]
    url = f"{bedrock.base_url}/model/{BEDROCK_MODEL}/invoke"
    async with aiohttp.ClientSession() as http:
        async with http.post(url, json={"anthropic_version": BEDROCK_VERSION}) as unsigned:
            assert unsigned.status == 403
            assert unsigned.headers["x-amzn-ErrorType"].startswith("IncompleteSignatureException")


async def test_bedrock_errors_come_in_aws_shape_without_retry_after(bedrock) -> None:
    bedrock.script_rate_limit(retry_after=7)
    bedrock.script_overloaded(retry_after=1)
    async with bedrock_client(bedrock) as client:
        ask = {"model": BEDROCK_MODEL, "max_tokens": 64, "messages": HELLO}
        with pytest.raises(anthropic.RateLimitError) as throttled:
            await client.messages.create(**ask, extra_body={"anthropic_version": BEDROCK_VERSION})
        with pytest.raises(anthropic.InternalServerError) as unavailable:
            await client.messages.create(**ask, extra_body={"anthropic_version": BEDROCK_VERSION})
    assert throttled.value.response.headers["x-amzn-ErrorType"].startswith("ThrottlingException")
    assert "retry-after" not in throttled.value.response.headers
    assert throttled.value.body == {"message": "Number of request tokens has exceeded your per-minute rate limit."}
    assert unavailable.value.status_code == 503  # Anthropic's 529 is Bedrock's ServiceUnavailableException


async def test_vertex_trades_the_service_accounts_jwt_for_a_token_and_answers_rawpredict(vertex) -> None:
    async with vertex_client(vertex) as client:
        counted = await client.messages.count_tokens(
            model=VERTEX_MODEL, messages=HELLO, extra_body={"anthropic_version": VERTEX_VERSION}
        )
        message = await client.messages.create(
            model=VERTEX_MODEL, max_tokens=64, messages=HELLO, extra_body={"anthropic_version": VERTEX_VERSION}
        )
    assert counted.input_tokens > 0 and message.model == "claude-haiku-4-5-20251001"
    assert vertex.token_requests == 1 and len(vertex.tokens) == 1  # one token, used for both requests
    [request] = vertex.message_requests
    assert request.path == (
        f"/v1/projects/{vertex.project}/locations/{vertex.region}/publishers/anthropic/models/{VERTEX_MODEL}:rawPredict"
    )
    assert "model" not in request.body and request.headers["authorization"] == f"Bearer {next(iter(vertex.tokens))}"
    assert vertex.model_ids == [VERTEX_MODEL, VERTEX_MODEL]


async def test_vertex_refuses_a_token_it_did_not_mint_another_project_and_the_sdks_default_version(vertex) -> None:
    async with vertex_client(vertex, access_token="ya29.made-up") as client:
        with pytest.raises(anthropic.AuthenticationError) as refused:
            await client.messages.create(
                model=VERTEX_MODEL, max_tokens=64, messages=HELLO, extra_body={"anthropic_version": VERTEX_VERSION}
            )
    assert refused.value.body["error"]["status"] == "UNAUTHENTICATED"  # Google's shape, not Anthropic's
    async with vertex_client(vertex, project_id="someone-elses-project") as client:
        with pytest.raises(anthropic.PermissionDeniedError):
            await client.messages.create(
                model=VERTEX_MODEL, max_tokens=64, messages=HELLO, extra_body={"anthropic_version": VERTEX_VERSION}
            )
    async with vertex_client(vertex) as client:
        with pytest.raises(anthropic.BadRequestError, match="anthropic_version: must be vertex-2023-10-16"):
            await client.messages.create(model=VERTEX_MODEL, max_tokens=64, messages=HELLO)
    assert vertex.model_ids == []


async def test_vertex_token_endpoint_refuses_an_assertion_signed_by_another_key(vertex, tmp_path) -> None:
    from google.auth.exceptions import RefreshError

    from tests.fakes.keys import generate_key_pair

    adc = json.loads(vertex.adc_file(tmp_path).read_text())
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**adc, "private_key": generate_key_pair().private_pem}))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(other))
        async with vertex_client(vertex) as client:
            with pytest.raises(RefreshError, match="invalid_grant"):
                await client.messages.create(
                    model=VERTEX_MODEL, max_tokens=64, messages=HELLO, extra_body={"anthropic_version": VERTEX_VERSION}
                )
    assert vertex.tokens == set() and vertex.model_ids == []
