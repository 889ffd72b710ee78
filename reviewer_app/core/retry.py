"""The retry decision: a pure function of the error, the attempt and the clock."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from reviewer_app.core.errors import Deferred, JobError, PermanentError, TransientError


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    base_seconds: float = 10.0
    max_seconds: float = 600.0
    jitter: float = 0.25  # +/- fraction of the delay, so a burst of failures does not retry in lockstep


@dataclass(frozen=True)
class Retry:
    at: float  # epoch seconds when the job becomes claimable again
    counts_attempt: bool  # False for rate limits: waiting as told is not a failure
    reason: str


@dataclass(frozen=True)
class GiveUp:
    reason: str


RetryDecision = Retry | GiveUp


def backoff_delay(policy: RetryPolicy, attempt: int, rand: float) -> float:
    """Exponential delay for the ``attempt``-th failure (1-based), capped, with jitter; rand in [0, 1)."""
    raw = policy.base_seconds * (2 ** max(attempt - 1, 0))
    capped = min(raw, policy.max_seconds)
    return max(0.0, capped * (1 + policy.jitter * (2 * rand - 1)))


def decide_retry(
    error: BaseException,
    *,
    attempt: int,
    policy: RetryPolicy,
    now: float,
    rand: float | None = None,
) -> RetryDecision:
    """Retry when, or give up, for a failed ``attempt`` (1-based, already counted)."""
    reason = error.reason if isinstance(error, JobError) else f"unexpected error: {type(error).__name__}"
    if isinstance(error, Deferred):  # rate limits included
        return Retry(at=max(error.retry_at, now), counts_attempt=False, reason=reason)
    if isinstance(error, PermanentError):
        return GiveUp(reason)
    if attempt >= policy.max_attempts:
        return GiveUp(f"{final_wording(reason)} (gave up after {attempt} attempts)")
    r = random.random() if rand is None else rand
    delay = backoff_delay(policy, attempt, r)
    if isinstance(error, TransientError) and error.retry_after is not None:
        delay = max(delay, error.retry_after)
    return Retry(at=now + delay, counts_attempt=True, reason=reason)


def final_wording(reason: str) -> str:
    """A reason worded for a retry ("GitHub answered 502 on ...; will retry"), as the last word on a job that gives
    up: the promise of a retry dropped."""
    return re.sub(r"[;,]?\s*will retry\.?$", "", reason)
