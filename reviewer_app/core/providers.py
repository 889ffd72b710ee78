"""Where Claude is reached (the Claude API, Amazon Bedrock, Google Vertex AI) and what each offers the review: a pure
table, the model names each spells, and the gateway headers setting read into a mapping.

Capabilities follow what the provider and the SDK's client for it serve: Message Batches only on the Claude API (the
SDK refuses them on Bedrock and Vertex, whose own batch jobs are another API); token counting everywhere but through
the SDK's Bedrock client; prompt caching (``cache_control``) on all three. Bedrock and Vertex take the API version in
the request body, with the values their documentation requires."""

from __future__ import annotations

import re
from dataclasses import dataclass

ANTHROPIC, BEDROCK, VERTEX = "anthropic", "bedrock", "vertex"


@dataclass(frozen=True)
class Provider:
    name: str
    title: str  # for people: logs, errors, docs
    model: str  # REVIEWER_MODEL unless set, in this provider's spelling
    verify_model: str  # REVIEWER_VERIFY_MODEL unless set
    batches: bool  # Message Batches (half price, answered within 24 hours)
    counts_tokens: bool  # the token counting endpoint, to place cache marks where they pay
    body_version: str | None  # the request body's ``anthropic_version`` (None: the API takes a header)


PROVIDERS: dict[str, Provider] = {
    ANTHROPIC: Provider(
        ANTHROPIC,
        "the Claude API",
        "claude-sonnet-4-5",
        "claude-haiku-4-5",
        batches=True,
        counts_tokens=True,
        body_version=None,
    ),
    BEDROCK: Provider(
        BEDROCK,
        "Amazon Bedrock",
        "anthropic.claude-sonnet-4-5-20250929-v1:0",
        "anthropic.claude-haiku-4-5-20251001-v1:0",
        batches=False,
        counts_tokens=False,
        body_version="bedrock-2023-05-31",
    ),
    VERTEX: Provider(
        VERTEX,
        "Google Vertex AI",
        "claude-sonnet-4-5@20250929",
        "claude-haiku-4-5@20251001",
        batches=False,
        counts_tokens=True,
        body_version="vertex-2023-10-16",
    ),
}

# Bedrock ids: an optional inference profile's geography (us., eu., apac., global. ...), the vendor, the name, and a
# version suffix; an ARN ends with one after its last "/". Vertex ids: the name, "@", its date.
_BEDROCK_ID = re.compile(r"^(?:[a-z]{2,6}\.)?anthropic\.(?P<name>claude-[a-z0-9.-]+?)(?:-v\d+(?::\d+)?)?$")
_VERTEX_ID = re.compile(r"^(?P<name>claude-[a-z0-9.-]+)@(?P<date>\d{8})$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP token (RFC 9110)


def anthropic_model_name(model: str) -> str:
    """The Claude API's name of a model given in any provider's spelling: ``us.anthropic.claude-haiku-4-5-20251001-v1:0``
    and ``claude-haiku-4-5@20251001`` are ``claude-haiku-4-5-20251001``. Prices and cache minimums go by it."""
    tail = model.rsplit("/", 1)[-1]  # a Bedrock ARN: arn:aws:bedrock:REGION:ACCOUNT:inference-profile/ID
    if m := _BEDROCK_ID.match(tail):
        return m["name"]
    if m := _VERTEX_ID.match(tail):
        return f"{m['name']}-{m['date']}"
    return model


class HeaderError(ValueError):
    """The gateway headers setting cannot be read; the message names the line, never a value."""


def parse_headers(text: str, setting: str) -> dict[str, str]:
    """``Name: value`` lines (the SDK's ANTHROPIC_CUSTOM_HEADERS format) as a mapping; blank lines are skipped."""
    headers: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        name = name.strip()
        if not colon or not _HEADER_NAME.match(name):
            raise HeaderError(f"{setting} line {number} is not 'Name: value' with a valid header name")
        headers[name] = value.strip()
    return headers
