"""What a failed GitHub call means for the job: the error that says whether to retry and when, its text free of
secrets."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import aiohttp
import gidgethub

from reviewer_app.core.errors import InstallationUnavailable, JobError, PermanentError, RateLimited, TransientError
from reviewer_app.github.graphql import limit_wait
from reviewer_app.redaction import redact_url

_SECRET_RE = re.compile(
    r"gh[pousr]_[A-Za-z0-9_]+"  # GitHub tokens
    r"|github_pat_[A-Za-z0-9_]+"  # fine-grained personal access tokens
    r"|eyJ[\w-]+\.[\w-]+\.[\w-]+"  # JWTs
    r"|-----BEGIN [A-Z ]+-----.*?-----END [A-Z ]+-----",  # PEM keys
    re.S,
)


def redact(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` without anything that looks like a token, a JWT or a key, nor any of ``secrets``, nor the
    credentials of a URL."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "<redacted>")
    return redact_url(_SECRET_RE.sub("<redacted>", text))


def rate_limit_retry_at(status: int, headers: Mapping[str, str], message: str, now: float) -> float | None:
    """When to try again if this REST response is a primary or secondary rate limit; None if it is not one (a plain
    403 is a permission problem). The wait follows GitHub's guidance (``limit_wait``)."""
    if status not in (403, 429):
        return None
    lowered = {key.lower(): value for key, value in headers.items()}
    if not (
        status == 429
        or "retry-after" in lowered
        or lowered.get("x-ratelimit-remaining") == "0"
        or "rate limit" in message.lower()
    ):
        return None
    return limit_wait(headers, now)


def map_github_error(
    exc: BaseException, *, what: str, now: float, secrets: Sequence[str] = (), person: bool = False
) -> JobError:
    """The job error for a failed GitHub call on ``what`` (e.g. "pull request o/r#3"), free of secrets. ``person``: the
    call was made with a person's token (token mode), whose refusals mean something else than an App's."""
    if isinstance(exc, gidgethub.HTTPException):
        status = int(exc.status_code)
        message = redact(str(exc), secrets)
        retry_at = rate_limit_retry_at(status, exc.headers, message, now)
        if retry_at is not None:
            return RateLimited(
                f"GitHub rate limit reached on {what} ({status}); retry after {retry_at:.0f}", retry_at=retry_at
            )
        if status >= 500:
            return TransientError(f"GitHub answered {status} on {what}; will retry")
        if status == 401 and person:
            return PermanentError(f"GitHub rejected the token on {what}: it is not valid (expired or revoked?)")
        if status == 401:
            return PermanentError(f"GitHub rejected the app's credentials on {what}; check the app id and key")
        if status == 404:
            return PermanentError(f"{what} not found ({'or the token cannot see it' if person else 'deleted?'})")
        if status == 403 and person:
            return PermanentError(f"GitHub refused {what}: {message} (does the token have this permission?)")
        if status == 403 and "suspended" in message.lower():
            return InstallationUnavailable(f"GitHub refused {what}: the installation is suspended")
        if status == 403:
            return PermanentError(f"GitHub refused {what}: {message} (installation suspended or permission missing?)")
        if status == 422:
            return PermanentError(f"GitHub rejected {what}: {message}")
        return PermanentError(f"GitHub answered {status} on {what}: {message}")
    if isinstance(exc, TimeoutError):
        return TransientError(f"GitHub did not answer {what} in time; will retry")
    if isinstance(exc, aiohttp.ClientError):
        return TransientError(f"connection to GitHub failed on {what} ({type(exc).__name__}); will retry")
    return TransientError(f"unexpected failure on {what} ({type(exc).__name__})")
