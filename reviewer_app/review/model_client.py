"""The one place that chooses the model client: the SDK's own client for the Claude API, Amazon Bedrock or Google
Vertex AI (core/providers.py), built from the configuration.

Credentials never pass through our settings, except the Claude API's key: Bedrock signs with whatever the AWS chain
finds (environment, profile, SSO, instance or task role; or AWS_BEARER_TOKEN_BEDROCK), Vertex AI sends the token of
Google's Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud's login, the metadata server).
Keep ``max_retries`` small: the dispatcher owns longer waits. Span content is pinned to metadata only, so no
environment variable can put prompts into traces."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reviewer_app.core.providers import ANTHROPIC, BEDROCK, PROVIDERS, Provider, parse_headers
from reviewer_app.review.sdk import anthropic  # imported at its first use

if TYPE_CHECKING:
    from reviewer_app.settings.config import Config

    ModelClient = anthropic.AsyncAnthropic | anthropic.AsyncAnthropicBedrock | anthropic.AsyncAnthropicVertex
else:
    ModelClient = Any  # the SDK's clients, named without importing it
_TRACES: Any = {"traces": {"content_mode": "metadata_only"}}


class ModelUnavailable(ValueError):
    """The provider's client cannot be built (no credentials, no region...): one line saying what to set."""


@dataclass(frozen=True)
class ModelEndpoint:
    """Where Claude is reached; None lets the SDK read the standard environment (ANTHROPIC_API_KEY, AWS_REGION...)."""

    provider: Provider = PROVIDERS[ANTHROPIC]
    api_key: str | None = None  # the Claude API's key
    base_url: str | None = None  # the provider's endpoint, or a gateway in front of it
    region: str | None = None  # Bedrock's AWS region, or Vertex AI's
    project_id: str | None = None  # Vertex AI's Google Cloud project
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)  # on every request (a gateway's)

    @classmethod
    def from_config(cls, cfg: Config) -> ModelEndpoint:
        provider = cfg.provider
        base_url, region = {
            "anthropic": (cfg.anthropic_base_url, ""),
            "bedrock": (cfg.bedrock_base_url, cfg.aws_region),
            "vertex": (cfg.vertex_base_url, cfg.vertex_region),
        }[provider.name]
        return cls(
            provider,
            api_key=cfg.anthropic_api_key or None,
            base_url=base_url or None,
            region=region or None,
            project_id=cfg.vertex_project_id or None,
            headers=parse_headers(cfg.model_headers, "ANTHROPIC_CUSTOM_HEADERS"),
        )


def make_client(endpoint: ModelEndpoint, *, timeout: float, max_retries: int = 1) -> ModelClient:
    """The SDK's client for ``endpoint``; raises ModelUnavailable with what to set when it cannot be built."""
    provider = endpoint.provider
    common: dict[str, Any] = {
        "base_url": endpoint.base_url,
        "timeout": timeout,
        "max_retries": max_retries,
        "default_headers": dict(endpoint.headers) or None,
        "open_telemetry": _TRACES,
    }
    try:
        if provider.name == ANTHROPIC:
            client: ModelClient = anthropic.AsyncAnthropic(api_key=endpoint.api_key, **common)
        elif provider.name == BEDROCK:
            client = anthropic.AsyncAnthropicBedrock(aws_region=endpoint.region, **common)
        else:
            client = anthropic.AsyncAnthropicVertex(
                region=endpoint.region or anthropic.NOT_GIVEN,
                project_id=endpoint.project_id or anthropic.NOT_GIVEN,
                **common,
            )
    except anthropic.CredentialsError as err:  # a configured profile that cannot be read
        raise ModelUnavailable(f"{_no_credentials(provider)}; {err}") from None
    except ValueError as err:  # the SDK's own one-line reasons: no region, no AWS credentials and a key at once
        raise ModelUnavailable(f"{provider.title}: {err}") from None
    if isinstance(client, anthropic.AsyncAnthropic) and not (client.api_key or client.auth_token or client.credentials):
        raise ModelUnavailable(_no_credentials(provider))
    return client


def _no_credentials(provider: Provider) -> str:
    if provider.name == ANTHROPIC:
        return "no Anthropic credentials: set ANTHROPIC_API_KEY (or pass the API key in the config)"
    return f"no credentials for {provider.title}"
