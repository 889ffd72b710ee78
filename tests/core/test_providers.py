"""The model providers' table: each provider's model ids read as the Claude API's names (for prices and cache
minimums), and the gateway headers setting."""

from __future__ import annotations

import pytest

from reviewer_app.core.pricing import DEFAULT_PRICES, price_of
from reviewer_app.core.providers import PROVIDERS, HeaderError, anthropic_model_name, parse_headers


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5-20250929"),
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5-20250929"),
        ("us.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5-20251001"),
        ("global.anthropic.claude-opus-4-1-20250805-v1:0", "claude-opus-4-1-20250805"),
        ("apac.anthropic.claude-3-5-sonnet-20241022-v2:0", "claude-3-5-sonnet-20241022"),
        (
            "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "claude-sonnet-4-5-20250929",
        ),
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5-20250929"),
        ("claude-3-5-haiku@20241022", "claude-3-5-haiku-20241022"),
        ("my-gateway-alias", "my-gateway-alias"),  # not a provider's spelling: left as it is
    ],
)
def test_any_providers_model_id_reads_as_the_claude_api_name(model, name) -> None:
    assert anthropic_model_name(model) == name


def test_a_bedrock_or_vertex_model_costs_what_the_same_model_costs_on_the_claude_api() -> None:
    assert price_of(DEFAULT_PRICES, "anthropic.claude-haiku-4-5-20251001-v1:0") == DEFAULT_PRICES["claude-haiku-4-5"]
    assert price_of(DEFAULT_PRICES, "claude-sonnet-4-5@20250929") == DEFAULT_PRICES["claude-sonnet-4-5"]
    for provider in PROVIDERS.values():  # every default model of every provider is priced
        assert price_of(DEFAULT_PRICES, provider.model) and price_of(DEFAULT_PRICES, provider.verify_model)


def test_only_the_claude_api_has_message_batches_and_only_bedrock_and_vertex_take_the_version_in_the_body() -> None:
    assert [p.name for p in PROVIDERS.values() if p.batches] == ["anthropic"]
    assert {p.name: p.body_version for p in PROVIDERS.values()} == {
        "anthropic": None,
        "bedrock": "bedrock-2023-05-31",
        "vertex": "vertex-2023-10-16",
    }
    assert [p.name for p in PROVIDERS.values() if not p.counts_tokens] == ["bedrock"]


def test_gateway_headers_are_name_value_lines() -> None:
    text = "X-Gateway-Key: gw: with a colon\n\n  X-Route :claude \n"
    assert parse_headers(text, "H") == {"X-Gateway-Key": "gw: with a colon", "X-Route": "claude"}
    assert parse_headers("", "H") == {}
    for bad in ("s3cr3t-without-a-name", "Bad Name: s3cr3t", ": s3cr3t"):
        with pytest.raises(HeaderError, match="^H line 1 is not 'Name: value'") as raised:
            parse_headers(bad, "H")
        assert "s3cr3t" not in str(raised.value)  # a line may hold a key: it is named by its number only
