"""The store contract: claims, leases, fencing, retries, supersession, cancellation, deduplication."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from reviewer_app.core.admission import CancelPR, Enqueue, JobSpec
from reviewer_app.core.job_records import StoredAnswer
from reviewer_app.core.states import JobState
from reviewer_app.store.base import Delivery, Usage
from tests.helpers import sha

NOW = 1_800_000_000.0


def spec(
    pr: int = 1,
    head: int | str = 1,
    *,
    trigger: str = "auto",
    priority: int = 10,
    delay: float = 0,
    event_at: float | None = None,
) -> JobSpec:
    return JobSpec(
        repo_id=1,
        repo_full_name="o/r",
        installation_id=7,
        pr_number=pr,
        head_sha=sha(head),
        trigger=trigger,
        priority=priority,
        delay_seconds=delay,
        event_at=event_at,
    )


_n = 0


def delivery() -> Delivery:
    global _n
    _n += 1
    return Delivery(f"d-{_n}", "pull_request", "synchronize")


async def admit(store, s: JobSpec, now: float = NOW, d: Delivery | None = None):
    return await store.admit(d or delivery(), Enqueue(s), now=now, max_attempts=3)


async def test_admit_then_claim_counts_the_attempt(store) -> None:
    r = await admit(store, spec())
    assert r.outcome == "enqueued" and r.job_id
    [lease] = await store.claim(owner="w1", limit=5, now=NOW, lease_seconds=30)
    assert (lease.job_id, lease.attempt, lease.owner, lease.expires_at) == (r.job_id, 1, "w1", NOW + 30)
    job = await store.get_job(r.job_id)
    assert job.state == JobState.RUNNING and job.lease_owner == "w1" and job.attempts == 1
    assert await store.claim(owner="w2", limit=5, now=NOW, lease_seconds=30) == []
    [attempt] = await store.attempts_of(r.job_id)
    assert attempt.lease_owner == "w1" and attempt.finished_at is None


async def test_duplicate_delivery_and_replayed_revision_make_one_job(store) -> None:
    d = delivery()
    first = await admit(store, spec(), d=d)
    again = await admit(store, spec(), d=d)
    replay = await admit(store, spec())
    assert first.outcome == "enqueued"
    assert again.outcome == "duplicate-delivery" and again.job_id == first.job_id
    assert replay.outcome == "duplicate-revision" and replay.job_id == first.job_id
    assert len(await store.list_jobs()) == 1


async def test_newer_head_supersedes_pending_jobs_and_records_by_whom(store) -> None:
    a = await admit(store, spec(head=1))
    b = await admit(store, spec(head=2))
    c = await admit(store, spec(head=3))
    other_pr = await admit(store, spec(pr=2, head=9))
    assert c.superseded == (b.job_id,) and b.superseded == (a.job_id,)
    ja, jb = await store.get_job(a.job_id), await store.get_job(b.job_id)
    assert ja.state == jb.state == JobState.SUPERSEDED
    assert ja.superseded_by == b.job_id and jb.superseded_by == c.job_id
    assert sha(3) in jb.outcome
    assert (await store.get_job(other_pr.job_id)).state == JobState.QUEUED
    leases = await store.claim(owner="w", limit=10, now=NOW, lease_seconds=30)
    assert sorted(le.job_id for le in leases) == sorted([c.job_id, other_pr.job_id])


async def test_supersession_reaches_a_running_job_whose_writes_then_fail(store) -> None:
    a = await admit(store, spec(head=1))
    [lease] = await store.claim(owner="w", limit=1, now=NOW, lease_seconds=30)
    b = await admit(store, spec(head=2))
    assert b.superseded == (a.job_id,)
    assert await store.renew_lease(lease, now=NOW + 1, lease_seconds=30) is None
    assert not await store.complete_if_lease_held(lease, now=NOW + 1, outcome="done")
    assert (await store.get_job(a.job_id)).state == JobState.SUPERSEDED


async def test_an_older_event_does_not_supersede_a_newer_one(store) -> None:
    new = await admit(store, spec(head=2, event_at=200))
    old = await admit(store, spec(head=1, event_at=100))
    assert old.superseded == ()
    assert (await store.get_job(new.job_id)).state == JobState.QUEUED


async def test_the_event_time_and_the_replaced_head_are_stored_once_in_their_columns(store) -> None:
    r = await admit(store, replace(spec(event_at=123.5), before_sha=sha(0)))
    job = await store.get_job(r.job_id)
    assert job.event_at == 123.5 and not {"event_at", "before"} & set(job.details.to_dict())
    # The column is what ordering reads: the head this job replaced, pushed again late, is known older.
    older = await admit(store, spec(head=0))
    assert older.job_id and (await store.get_job(older.job_id)).state == JobState.SUPERSEDED


async def test_closed_cancels_pending_jobs_of_that_pr_only(store) -> None:
    a = await admit(store, spec(pr=1))
    b = await admit(store, spec(pr=2))
    r = await store.admit(delivery(), CancelPR(1, 1, "pull request closed"), now=NOW, max_attempts=3)
    assert r.cancelled == (a.job_id,)
    assert (await store.get_job(a.job_id)).state == JobState.CANCELLED
    assert (await store.get_job(a.job_id)).outcome == "pull request closed"
    assert (await store.get_job(b.job_id)).state == JobState.QUEUED


async def test_fenced_writes_refuse_a_stale_attempt(store) -> None:
    r = await admit(store, spec())
    [stale] = await store.claim(owner="old", limit=1, now=NOW, lease_seconds=10)
    assert await store.rescue_expired(now=NOW + 11) == [r.job_id]
    [fresh] = await store.claim(owner="new", limit=1, now=NOW + 11, lease_seconds=10)
    assert fresh.attempt == 2 and fresh.token != stale.token
    assert not await store.complete_if_lease_held(stale, now=NOW + 12, outcome="stale result")
    assert not await store.save_progress_if_lease_held(stale, now=NOW + 12, review_id=1)
    assert await store.renew_lease(stale, now=NOW + 12, lease_seconds=10) is None
    assert await store.complete_if_lease_held(fresh, now=NOW + 12, outcome="fresh result")
    job = await store.get_job(r.job_id)
    assert job.state == JobState.SUCCEEDED and job.outcome == "fresh result" and job.review_id is None
    outcomes = [a.outcome for a in await store.attempts_of(r.job_id)]
    assert outcomes == ["lease_expired", "succeeded"]


async def test_renewal_extends_the_lease(store) -> None:
    await admit(store, spec())
    [lease] = await store.claim(owner="w", limit=1, now=NOW, lease_seconds=10)
    assert await store.renew_lease(lease, now=NOW + 8, lease_seconds=10) == NOW + 18
    assert await store.rescue_expired(now=NOW + 12) == []


async def test_batch_renewal_extends_only_the_leases_still_held(store) -> None:
    for pr in (1, 2, 3):
        await admit(store, spec(pr=pr))
    a, b, c = await store.claim(owner="w", limit=3, now=NOW, lease_seconds=10)
    assert await store.complete_if_lease_held(b, now=NOW + 1, outcome="done")  # b's lease ended with its job
    assert await store.rescue_expired(now=NOW + 11) == sorted([a.job_id, c.job_id])  # a and c expired...
    [c2] = await store.claim(owner="other", limit=1, now=NOW + 11, lease_seconds=10)  # ...and one is claimed again
    [a_again] = [x for x in (a, c) if x.job_id != c2.job_id]
    [a2] = await store.claim(owner="other", limit=1, now=NOW + 11, lease_seconds=10)
    assert a2.job_id == a_again.job_id
    # The old attempts hold nothing any more; the new ones are extended, each under its own token.
    assert await store.renew_leases([a, b, c], now=NOW + 12, lease_seconds=10) == set()
    assert await store.renew_leases([a2, c2, b], now=NOW + 12, lease_seconds=30) == {a2.token, c2.token}
    assert await store.renew_leases([], now=NOW + 12, lease_seconds=30) == set()
    assert await store.rescue_expired(now=NOW + 25) == []  # renewed to NOW + 42
    assert sorted(await store.rescue_expired(now=NOW + 43)) == sorted([a2.job_id, c2.job_id])


async def test_retry_is_delayed_and_deferral_gives_the_attempt_back(store) -> None:
    r = await admit(store, spec())
    [l1] = await store.claim(owner="w", limit=1, now=NOW, lease_seconds=10)
    assert await store.retry_if_lease_held(l1, now=NOW, at=NOW + 50, error="boom", counts_attempt=True)
    assert await store.claim(owner="w", limit=1, now=NOW + 49, lease_seconds=10) == []
    assert await store.next_wakeup(now=NOW) == NOW + 50
    [l2] = await store.claim(owner="w", limit=1, now=NOW + 50, lease_seconds=10)
    assert l2.attempt == 2
    assert await store.retry_if_lease_held(l2, now=NOW + 50, at=NOW + 60, error="rate limited", counts_attempt=False)
    [l3] = await store.claim(owner="w", limit=1, now=NOW + 60, lease_seconds=10)
    assert l3.attempt == 2
    job = await store.get_job(r.job_id)
    assert job.last_error == "rate limited"


async def test_failure_is_terminal_and_visible(store) -> None:
    r = await admit(store, spec())
    [lease] = await store.claim(owner="w", limit=1, now=NOW, lease_seconds=10)
    assert await store.fail_if_lease_held(lease, now=NOW, error="PR deleted")
    job = await store.get_job(r.job_id)
    assert job.state == JobState.FAILED and job.last_error == "PR deleted" and job.finished_at == NOW


async def test_expired_lease_on_the_last_attempt_fails(store) -> None:
    r = await admit(store, spec())  # max_attempts=3
    for i in range(3):
        [lease] = await store.claim(owner="w", limit=1, now=NOW + i * 20, lease_seconds=10)
        await store.rescue_expired(now=NOW + i * 20 + 11)
    job = await store.get_job(r.job_id)
    assert job.state == JobState.FAILED and "lease expired" in job.last_error and lease.attempt == 3


async def test_priority_then_eligibility_order_claims(store) -> None:
    auto = await admit(store, spec(pr=1))
    manual = await admit(store, spec(pr=2, trigger="manual", priority=0))
    later = await admit(store, spec(pr=3, delay=100))
    leases = await store.claim(owner="w", limit=1, now=NOW, lease_seconds=10)
    assert [le.job_id for le in leases] == [manual.job_id]
    leases = await store.claim(owner="w", limit=5, now=NOW, lease_seconds=10)
    assert [le.job_id for le in leases] == [auto.job_id]
    leases = await store.claim(owner="w", limit=5, now=NOW + 100, lease_seconds=10)
    assert [le.job_id for le in leases] == [later.job_id]


async def test_concurrent_claims_never_hand_one_job_to_two_workers(store) -> None:
    for pr in range(40):
        await admit(store, spec(pr=pr))
    results = await asyncio.gather(*[store.claim(owner=f"w{i}", limit=3, now=NOW, lease_seconds=10) for i in range(20)])
    ids = [le.job_id for leases in results for le in leases]
    assert len(ids) == len(set(ids)) == 40


async def test_progress_and_usage_are_recorded_under_the_lease(store) -> None:
    r = await admit(store, spec())
    [lease] = await store.claim(owner="w", limit=1, now=NOW, lease_seconds=10)
    assert await store.save_progress_if_lease_held(lease, now=NOW, check_run_id=55, answer=StoredAnswer("ok"))
    await store.record_usage_if_lease_held(lease, Usage("claude-x", 100, 20, 5, 7))
    assert await store.complete_if_lease_held(lease, now=NOW, outcome="reviewed")
    job = await store.get_job(r.job_id)
    assert job.check_run_id == 55 and job.answer == StoredAnswer("ok")
    [a] = await store.attempts_of(r.job_id)
    assert (a.model, a.input_tokens, a.output_tokens, a.cache_creation_tokens, a.cache_read_tokens) == (
        "claude-x",
        100,
        20,
        5,
        7,
    )


async def test_operator_cancel_and_retry(store) -> None:
    r = await admit(store, spec())
    assert await store.cancel_job(r.job_id, now=NOW, reason="cancelled by operator")
    assert (await store.get_job(r.job_id)).state == JobState.CANCELLED
    assert await store.retry_job(r.job_id, now=NOW)
    job = await store.get_job(r.job_id)
    assert job.state == JobState.QUEUED and job.attempts == 0
    assert not await store.retry_job(r.job_id, now=NOW)  # queued: nothing to retry


async def test_paused_queue_admits_but_does_not_claim(store) -> None:
    await store.set_setting("queue_paused", "1")
    await admit(store, spec())
    assert await store.claim(owner="w", limit=1, now=NOW, lease_seconds=10) == []
    await store.set_setting("queue_paused", "0")
    assert len(await store.claim(owner="w", limit=1, now=NOW, lease_seconds=10)) == 1


async def test_a_skip_stands_only_if_no_event_for_its_revision_came_while_the_job_ran(store) -> None:
    r = await admit(store, spec())
    [lease] = await store.claim(owner="w", limit=1, now=NOW, lease_seconds=30)
    snapshot = await store.get_job(r.job_id)
    again = await admit(store, spec())  # the same revision, automatic: a duplicate of the running job, which it pokes
    assert again.outcome == "duplicate-revision" and again.job_id == r.job_id
    assert not await store.skip_if_unpoked(lease, pokes=snapshot.pokes, now=NOW, outcome="skipped: a draft")
    job = await store.get_job(r.job_id)
    assert job.state == JobState.RUNNING and job.pokes == snapshot.pokes + 1
    assert await store.skip_if_unpoked(lease, pokes=job.pokes, now=NOW, outcome="skipped: a draft")
    job = await store.get_job(r.job_id)
    assert (job.state, job.outcome) == (JobState.CANCELLED, "skipped: a draft")
    [attempt] = await store.attempts_of(r.job_id)
    assert attempt.outcome == "cancelled" and attempt.finished_at == NOW


async def test_concurrent_finishes_go_together_each_under_its_own_token(store) -> None:
    """Finishes that arrive together are written as one batch (finish_batches.py); each job still changes only if
    its own token holds it, and each attempt is closed with its own state, error and usage."""
    lost_id = (await admit(store, spec(pr=1))).job_id
    [stale] = await store.claim(owner="old", limit=1, now=NOW, lease_seconds=5)
    ids = [(await admit(store, spec(pr=pr))).job_id for pr in range(2, 14)]
    leases = await store.claim(owner="w", limit=20, now=NOW, lease_seconds=60)
    assert await store.rescue_expired(now=NOW + 6) == [lost_id]
    [fresh] = await store.claim(owner="new", limit=1, now=NOW + 6, lease_seconds=60)
    by_id = {le.job_id: le for le in leases}
    at = NOW + 7
    results = await asyncio.gather(
        store.complete_if_lease_held(stale, now=at, outcome="stale result"),
        *(
            store.complete_if_lease_held(by_id[i], now=at, outcome=f"reviewed {i}", usage=Usage("m", i, 2 * i))
            for i in ids[:6]
        ),
        *(store.fail_if_lease_held(by_id[i], now=at, error=f"broke {i}") for i in ids[6:9]),
        *(store.cancel_if_lease_held(by_id[i], now=at, outcome="pull request closed") for i in ids[9:11]),
        store.supersede_if_lease_held(by_id[ids[11]], now=at, outcome="superseded: newer head"),
    )
    assert results == [False] + [True] * 12
    for i in ids[:6]:
        job = await store.get_job(i)
        assert (job.state, job.outcome, job.finished_at, job.lease_token) == (
            JobState.SUCCEEDED,
            f"reviewed {i}",
            at,
            None,
        )
        [a] = await store.attempts_of(i)
        assert (a.outcome, a.finished_at, a.model, a.input_tokens, a.output_tokens) == ("succeeded", at, "m", i, 2 * i)
    for i in ids[6:9]:
        job = await store.get_job(i)
        assert (job.state, job.last_error) == (JobState.FAILED, f"broke {i}")
        assert [(a.outcome, a.error) for a in await store.attempts_of(i)] == [("failed", f"broke {i}")]
    for i in ids[9:11]:
        job = await store.get_job(i)
        assert (job.state, job.cancel_reason) == (JobState.CANCELLED, "pr_closed")
    assert (await store.get_job(ids[11])).state == JobState.SUPERSEDED
    lost = await store.get_job(lost_id)
    assert lost.state == JobState.RUNNING and lost.lease_token == fresh.token
    assert [a.outcome for a in await store.attempts_of(lost_id)] == ["lease_expired", None]


async def test_a_stale_and_the_current_lease_of_one_job_finishing_together(store) -> None:
    r = await admit(store, spec())
    [stale] = await store.claim(owner="old", limit=1, now=NOW, lease_seconds=5)
    await store.rescue_expired(now=NOW + 6)
    [fresh] = await store.claim(owner="new", limit=1, now=NOW + 6, lease_seconds=60)
    results = await asyncio.gather(
        store.complete_if_lease_held(stale, now=NOW + 7, outcome="stale result"),
        store.complete_if_lease_held(fresh, now=NOW + 7, outcome="fresh result"),
    )
    assert results == [False, True]
    job = await store.get_job(r.job_id)
    assert (job.state, job.outcome) == (JobState.SUCCEEDED, "fresh result")
    assert [a.outcome for a in await store.attempts_of(r.job_id)] == ["lease_expired", "succeeded"]
