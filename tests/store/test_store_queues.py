"""A queue per kind of work, on every store: reviews and answers are claimed apart, each claim atomic with its owner,
expiry and fence; a job's queue follows from its trigger (migration 0016)."""

from __future__ import annotations

import asyncio

from reviewer_app.core.queues import ANSWERS, REVIEWS
from reviewer_app.core.states import JobState
from tests.store.test_store_contract import NOW, admit, spec


async def review_and_answers(store) -> tuple[list[int], list[int]]:
    """Three reviews (one a manual request, ahead of everything) and two answers, all due now."""
    reviews = [(await admit(store, spec(pr=n, head=n))).job_id for n in (1, 2)]
    reviews.append((await admit(store, spec(pr=3, head=3, trigger="manual:9", priority=0))).job_id)
    answers = [(await admit(store, spec(pr=n, head="", trigger=f"reply:{n}", priority=5))).job_id for n in (4, 5)]
    return reviews, answers


async def test_each_queue_is_claimed_apart_under_its_own_limit(store) -> None:
    reviews, answers = await review_and_answers(store)
    # The answers' claim takes only answers, however many reviews are due ahead of them (a manual one included).
    claimed = await store.claim(owner="w1", limit=5, now=NOW, lease_seconds=30, queue=ANSWERS)
    assert sorted(le.job_id for le in claimed) == answers
    assert {le.job.trigger for le in claimed} == {"reply:4", "reply:5"}
    # The reviews' claim, limited to one slot, takes the manual request first and leaves the rest queued.
    [first] = await store.claim(owner="w2", limit=1, now=NOW, lease_seconds=30, queue=REVIEWS)
    assert first.job_id == reviews[2]
    assert await store.claim(owner="w3", limit=5, now=NOW, lease_seconds=30, queue=ANSWERS) == []
    rest = await store.claim(owner="w3", limit=5, now=NOW, lease_seconds=30, queue=REVIEWS)
    assert sorted(le.job_id for le in rest) == reviews[:2]


async def test_a_claim_in_the_answers_queue_is_leased_and_fenced_like_a_reviews(store) -> None:
    await admit(store, spec(pr=1, head=1))
    answer = (await admit(store, spec(pr=2, head="", trigger="reply:7", priority=5))).job_id
    [lease] = await store.claim(owner="w1", limit=5, now=NOW, lease_seconds=30, queue=ANSWERS)
    job = await store.get_job(answer)
    assert (lease.job_id, job.state, job.lease_owner, job.lease_token, job.lease_expires_at, job.attempts) == (
        answer,
        JobState.RUNNING,
        "w1",
        lease.token,
        NOW + 30,
        1,
    )
    # Its lease expires, the rescuer hands it back to its own queue, and another worker claims it there.
    assert await store.rescue_expired(now=NOW + 31) == [answer]
    [review] = await store.claim(owner="w2", limit=5, now=NOW + 31, lease_seconds=30, queue=REVIEWS)
    assert review.job_id != answer
    [again] = await store.claim(owner="w2", limit=5, now=NOW + 31, lease_seconds=30, queue=ANSWERS)
    assert (again.job_id, again.attempt) == (answer, 2) and again.token != lease.token
    # The first attempt's writes are refused: its token no longer holds the job.
    assert not await store.complete_if_lease_held(lease, now=NOW + 32, outcome="late", usage=None)
    assert await store.complete_if_lease_held(again, now=NOW + 32, outcome="answered", usage=None)
    assert (await store.get_job(answer)).outcome == "answered"


async def test_concurrent_claims_of_both_queues_never_share_a_job_nor_cross_queues(store) -> None:
    for n in range(12):
        await admit(store, spec(pr=100 + n, head=n))
        await admit(store, spec(pr=200 + n, head="", trigger=f"reply:{n}", priority=5))
    claims = await asyncio.gather(
        *(
            store.claim(owner=f"w{i}", limit=4, now=NOW, lease_seconds=30, queue=(REVIEWS, ANSWERS)[i % 2])
            for i in range(8)
        )
    )
    ids = [le.job_id for leases in claims for le in leases]
    assert len(ids) == len(set(ids)) == 24  # every job claimed once, none twice
    for i, leases in enumerate(claims):
        answering = i % 2 == 1
        assert all(le.job.trigger.startswith("reply:") == answering for le in leases)


async def test_the_next_wakeup_looks_only_at_the_queues_asked_about(store) -> None:
    await admit(store, spec(pr=1, head=1, delay=10))
    await admit(store, spec(pr=2, head="", trigger="reply:7", priority=5, delay=50))
    assert await store.next_wakeup(now=NOW) == NOW + 10
    assert await store.next_wakeup(now=NOW, queues=[ANSWERS]) == NOW + 50
    assert await store.next_wakeup(now=NOW, queues=[REVIEWS]) == NOW + 10
    # A running job's lease expiry counts whichever queues are asked about: the rescuer has work then.
    [lease] = await store.claim(owner="w", limit=1, now=NOW + 10, lease_seconds=5, queue=REVIEWS)
    assert await store.next_wakeup(now=NOW + 10, queues=[ANSWERS]) == lease.expires_at == NOW + 15
