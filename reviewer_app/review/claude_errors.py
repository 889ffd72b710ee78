"""What a Claude API error means for the job: wait (a rate limit, a spend limit), retry later, or give up. Reasons never
carry a secret."""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping

from reviewer_app.core.errors import JobError, PermanentError, RateLimited, TransientError
from reviewer_app.review.sdk import anthropic

DEFAULT_RATE_LIMIT_WAIT = 60.0
# A spend limit or an empty credit balance lifts only when a person acts or the month turns, so we look again
# hourly. Waiting (RateLimited) rather than failing keeps every accepted review: it resumes on its own.
SPEND_LIMIT_WAIT = 3600.0
_SPEND_LIMIT_CODES = frozenset(
    {"enforced_spend_limit_reached", "contract_spend_limit_reached", "linked_organization_spend_limit_reached"}
)
# Fallback for answers without a machine-readable code; the API says not to rely on wording, so codes come first.
_SPEND_LIMIT_WORDS = re.compile(r"spend(ing)? limit|credit balance|usage limit|billing", re.IGNORECASE)
_SECRET_RE = re.compile(r"sk-ant-[A-Za-z0-9_\-]+")
_MAX_REASON_DETAIL = 200


class SpendLimitReached(RateLimited):
    """The account's spend limit or credit balance is exhausted: wait (long), and tell an operator."""


def map_api_error(err: anthropic.AnthropicError, *, now: float) -> JobError:
    """The job error for an SDK error: wait, retry later, or give up. Reasons never carry a secret."""
    if isinstance(err, anthropic.APIStatusError):
        return _map_status_error(err, now)
    if isinstance(err, anthropic.APITimeoutError):
        return TransientError("Anthropic API request timed out")
    if isinstance(err, anthropic.APIConnectionError):
        return TransientError("could not connect to the Anthropic API")
    if isinstance(err, anthropic.CredentialsError):
        return PermanentError("Anthropic credentials could not be loaded; check the configured API key")
    if isinstance(err, anthropic.APIResponseValidationError):
        return TransientError("Anthropic API returned an unexpected response")
    return TransientError(f"Anthropic client error ({type(err).__name__})")


def credentials_error(err: Exception) -> JobError | None:
    """The job error for a failure of a cloud platform's credential chain (botocore's, google-auth's, or the SDK's
    words for them), which the SDK raises as they are; None for anything else. Retried: a token endpoint or an instance
    role may be back on the next attempt. Named by its type only, as its text may quote a file or a URL."""
    module = type(err).__module__
    words = str(err).lower()
    if module.startswith(("botocore", "google.auth")) or (isinstance(err, RuntimeError) and "credentials" in words):
        return TransientError(
            f"the model provider's credentials could not be loaded ({type(err).__name__}): check AWS's or Google's "
            "credential settings (docs/configuration.md, Model providers)"
        )
    return None


def _map_status_error(err: anthropic.APIStatusError, now: float) -> JobError:
    status = err.status_code
    what = describe(err)
    headers = err.response.headers
    if _is_spend_limit(err):
        return SpendLimitReached(
            f"Anthropic spend limit or credit balance exhausted ({what}); raise the limit or add credit in the "
            "Anthropic Console, reviews resume on their own",
            retry_at=now + SPEND_LIMIT_WAIT,
        )
    if status == 429:
        wait = retry_after_seconds(headers)
        return RateLimited(
            f"Anthropic rate limit ({what})",
            retry_at=now + (wait if wait is not None else DEFAULT_RATE_LIMIT_WAIT),
        )
    if status >= 500 or status in (408, 409):
        return TransientError(f"Anthropic API unavailable ({what})", retry_after=retry_after_seconds(headers))
    if status == 401:
        return PermanentError(f"Anthropic API rejected the credentials ({what}); check the API key")
    if status == 403:
        return PermanentError(f"Anthropic API denied permission ({what})")
    if status == 404:
        return PermanentError(f"Anthropic API: not found ({what}); check the model name")
    if status == 413:
        return PermanentError(f"prompt too large for the Anthropic API ({what})")
    return PermanentError(f"Anthropic API rejected the request ({what})")


def _is_spend_limit(err: anthropic.APIStatusError) -> bool:
    if isinstance(err, anthropic.ContractSpendLimitReachedError | anthropic.EnforcedSpendLimitReachedError):
        return True
    if err.error_code in _SPEND_LIMIT_CODES or err.type == "billing_error" or err.status_code == 402:
        return True
    return err.status_code in (400, 429) and bool(_SPEND_LIMIT_WORDS.search(err.api_message or ""))


def describe(err: anthropic.APIStatusError) -> str:
    """'HTTP 429 rate_limit_error: <message>, request_id=...', short and scrubbed of anything key-like."""
    parts = [f"HTTP {err.status_code}"]
    if err.type:
        parts[0] += f" {err.type}"
    if err.api_message and err.status_code not in (401, 403):
        message = _SECRET_RE.sub("[redacted]", err.api_message)
        if len(message) > _MAX_REASON_DETAIL:
            message = message[:_MAX_REASON_DETAIL] + "..."
        parts[0] += f": {message}"
    if err.request_id:
        parts.append(f"request_id={err.request_id}")
    return ", ".join(parts)


def retry_after_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date), if present."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(float(ms) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)
