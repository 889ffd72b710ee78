"""The pure retry decision."""

from __future__ import annotations

from reviewer_app.core.errors import PermanentError, RateLimited, TransientError
from reviewer_app.core.retry import GiveUp, Retry, RetryPolicy, backoff_delay, decide_retry

POLICY = RetryPolicy(max_attempts=5, base_seconds=10, max_seconds=100, jitter=0.25)


def test_backoff_grows_and_is_capped() -> None:
    delays = [backoff_delay(POLICY, a, 0.5) for a in range(1, 8)]
    assert delays[:4] == [10, 20, 40, 80]
    assert delays[4:] == [100, 100, 100]


def test_jitter_stays_within_bounds() -> None:
    assert backoff_delay(POLICY, 1, 0.0) == 7.5
    assert 12.4 < backoff_delay(POLICY, 1, 0.9999) <= 12.5


def test_transient_retries_with_growing_delay() -> None:
    d1 = decide_retry(TransientError("boom"), attempt=1, policy=POLICY, now=1000, rand=0.5)
    d2 = decide_retry(TransientError("boom"), attempt=2, policy=POLICY, now=1000, rand=0.5)
    assert isinstance(d1, Retry) and isinstance(d2, Retry)
    assert d1.at == 1010 and d2.at == 1020 and d1.counts_attempt


def test_retry_after_is_a_lower_bound() -> None:
    d = decide_retry(TransientError("busy", retry_after=55), attempt=1, policy=POLICY, now=0, rand=0.5)
    assert isinstance(d, Retry) and d.at == 55


def test_permanent_gives_up_at_once() -> None:
    d = decide_retry(PermanentError("gone"), attempt=1, policy=POLICY, now=0, rand=0.5)
    assert d == GiveUp("gone")


def test_last_attempt_gives_up() -> None:
    d = decide_retry(TransientError("boom"), attempt=5, policy=POLICY, now=0, rand=0.5)
    assert isinstance(d, GiveUp) and "5 attempts" in d.reason


def test_rate_limit_waits_as_told_without_counting() -> None:
    d = decide_retry(RateLimited("slow down", retry_at=5000), attempt=5, policy=POLICY, now=1000, rand=0.5)
    assert d == Retry(at=5000, counts_attempt=False, reason="slow down")


def test_unexpected_error_is_retried_and_named() -> None:
    d = decide_retry(KeyError("x"), attempt=1, policy=POLICY, now=0, rand=0.5)
    assert isinstance(d, Retry) and "KeyError" in d.reason


def test_a_final_failure_does_not_promise_a_retry() -> None:
    """The client words its errors for a retry; the job's last word must not read "...; will retry (gave up...)"."""
    error = TransientError("GitHub answered 502 on GET /repos/o/r/pulls/1; will retry")
    d = decide_retry(error, attempt=5, policy=POLICY, now=0, rand=0.5)
    assert d == GiveUp("GitHub answered 502 on GET /repos/o/r/pulls/1 (gave up after 5 attempts)")
    retried = decide_retry(error, attempt=1, policy=POLICY, now=0, rand=0.5)
    assert isinstance(retried, Retry) and retried.reason.endswith("; will retry")  # true while it is
