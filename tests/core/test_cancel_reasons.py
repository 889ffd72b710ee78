"""Why a job was cancelled is a column with a closed set of values, on both stores."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reviewer_app.core.admission import (
    NO_ACCESS,
    PR_CLOSED,
    PR_CLOSED_AT_WORKER,
    UNINSTALLED,
    CancelPR,
    InstallationChange,
)
from reviewer_app.core.cancel_reasons import CancelReason, cancel_reason, ended_with_episode
from reviewer_app.store.base import Delivery
from tests.store.test_store_contract import NOW, admit, delivery, spec


@pytest.mark.parametrize(
    ("outcome", "reason"),
    [
        (PR_CLOSED, CancelReason.PR_CLOSED),
        (PR_CLOSED_AT_WORKER, CancelReason.PR_CLOSED),
        (UNINSTALLED, CancelReason.UNINSTALLED),
        (NO_ACCESS, CancelReason.NO_ACCESS),
        ("skipped: draft pull request", CancelReason.SKIPPED),
        ("covered: review 3 covers this head", CancelReason.COVERED),
        ("refused: the daily budget is spent", CancelReason.REFUSED),
        ("something else", CancelReason.OTHER),
    ],
)
def test_each_outcome_gives_its_reason(outcome: str, reason: CancelReason) -> None:
    assert cancel_reason(outcome) == reason


async def test_a_closed_pull_request_cancels_its_pending_jobs_as_pr_closed(store) -> None:
    r = await admit(store, spec())
    await store.admit(delivery(), CancelPR(1, 1, PR_CLOSED), now=NOW, max_attempts=3)
    job = await store.get_job(r.job_id)
    assert (job.state, job.outcome, job.cancel_reason) == ("cancelled", PR_CLOSED, CancelReason.PR_CLOSED)


async def test_an_uninstall_cancels_as_uninstalled(store) -> None:
    r = await admit(store, spec())
    change = InstallationChange(installation_id=7, account="o", active=False, reason=UNINSTALLED)
    await store.admit(Delivery("u-1", "installation", "deleted"), change, now=NOW, max_attempts=3)
    assert (await store.get_job(r.job_id)).cancel_reason == CancelReason.UNINSTALLED


async def test_a_worker_cancel_keeps_its_words_and_names_its_reason(store) -> None:
    r = await admit(store, spec())
    [lease] = await store.claim(owner="w", limit=1, now=NOW, lease_seconds=30)
    assert await store.cancel_if_lease_held(lease, now=NOW + 1, outcome="skipped: draft pull request")
    job = await store.get_job(r.job_id)
    assert (job.outcome, job.cancel_reason) == ("skipped: draft pull request", CancelReason.SKIPPED)


async def test_an_operator_cancel_is_operator_and_a_retry_clears_it(store) -> None:
    r = await admit(store, spec())
    assert await store.cancel_job(r.job_id, now=NOW, reason="cancelled by an operator")
    assert (await store.get_job(r.job_id)).cancel_reason == CancelReason.OPERATOR
    assert await store.retry_job(r.job_id, now=NOW + 1)
    job = await store.get_job(r.job_id)
    assert (job.state, job.cancel_reason) == ("queued", None)


async def test_jobs_that_were_not_cancelled_have_no_reason(store) -> None:
    r = await admit(store, spec())
    [lease] = await store.claim(owner="w", limit=1, now=NOW, lease_seconds=30)
    assert await store.complete_if_lease_held(lease, now=NOW + 1, outcome="published")
    assert (await store.get_job(r.job_id)).cancel_reason is None


async def test_the_check_run_reads_why_from_the_column_and_shows_the_words_of_the_outcome(store) -> None:
    from reviewer_app.github.check_run_text import desired_check

    r = await admit(store, spec())
    [lease] = await store.claim(owner="w", limit=1, now=NOW, lease_seconds=30)
    assert await store.cancel_if_lease_held(lease, now=NOW + 1, outcome="refused: limit of 3 reviews per day reached")
    cancelled = await store.get_job(r.job_id)
    refused = desired_check(cancelled)
    assert (refused.title, refused.conclusion) == ("Review skipped: budget limit reached", "neutral")
    assert refused.summary.startswith("No review was run: the limit of 3 reviews per day reached.")
    # The words alone decide nothing: an operator's cancellation that quotes them is shown as cancelled.
    operator = desired_check(replace(cancelled, cancel_reason=CancelReason.OPERATOR))
    assert (operator.title, operator.conclusion) == ("Review cancelled", "cancelled")


@pytest.mark.parametrize(
    ("reason", "ended"),
    [
        *((r, True) for r in ("pr_closed", "uninstalled", "suspended", "repo_removed", "no_access")),
        *((r, False) for r in ("skipped", "covered", "refused", "operator", "other")),
        (None, False),
    ],
)
def test_an_episode_ends_by_its_reason(reason: str | None, ended: bool) -> None:
    assert ended_with_episode(CancelReason(reason) if reason else None) is ended
