"""The pull request's review-work machine (core/pr_work.py), driven directly: one row per situation."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reviewer_app.core.admission import PRIORITY_MANUAL, Enqueue, JobSpec
from reviewer_app.core.job_records import JobDetails
from reviewer_app.core.pr_work import PAUSED_SKIP, PendingJob, Plan, PRFacts, order, plan_enqueue
from tests.helpers import sha

A, B, C = sha("a"), sha("b"), sha("c")


def push(head: str, *, before: str | None = None, at: float | None = None, trigger: str = "auto") -> Enqueue:
    return Enqueue(JobSpec(1, "o/r", 7, 1, head, trigger=trigger, event_at=at, before_sha=before))


def request(head: str = "", trigger: str = "manual:5") -> Enqueue:
    spec = JobSpec(1, "o/r", 7, 1, head, trigger=trigger, priority=PRIORITY_MANUAL, details=JobDetails(full=True))
    return Enqueue(spec, supersede_older_heads=False, automatic=False)


def auto(
    id: int,
    head: str,
    *,
    at: float | None = None,
    before: str | None = None,
    state: str = "queued",
    trigger: str = "auto",
) -> PendingJob:
    return PendingJob(id, head, trigger, state, at, before)


def manual(id: int, head: str, *, state: str = "running", trigger: str = "manual:5") -> PendingJob:
    return PendingJob(id, head, trigger, state)


@pytest.mark.parametrize(
    ("new_head", "before", "at", "old", "expected"),
    [
        (B, A, 100.0, auto(1, A, at=100.0), 1),  # the push names the head it replaced: newer, tie or not
        (A, None, 100.0, auto(1, B, at=100.0, before=A), -1),  # the pending one names the new head: older
        (B, None, 101.0, auto(1, A, at=100.0), 1),  # no link: the later updated_at
        (A, None, 100.0, auto(1, B, at=101.0), -1),
        (A, None, 100.0, auto(1, B, at=100.0), 0),  # a tie within GitHub's one second orders nothing
        (A, None, None, auto(1, B, at=100.0), 0),  # one side without a time: unknown
        (B, None, None, auto(1, A), 1),  # no time on either side: the order of arrival
        (A, None, 5.0, auto(1, A, at=1.0), 0),  # the same head is not ordered against itself
    ],
)
def test_order_trusts_before_over_timestamps_and_never_a_tie(new_head, before, at, old, expected) -> None:
    assert order(new_head, before, at, old) == expected


def test_a_live_job_of_the_same_revision_makes_a_duplicate() -> None:
    plan = plan_enqueue(push(A), PRFacts(live_revision_job=9))
    assert plan == Plan("duplicate-revision", "revision already admitted", duplicate_of=9)


def test_no_live_job_means_a_new_job_even_if_the_head_had_one_that_ended() -> None:
    # Close and reopen, force-push back: the store reports no live job (the earlier one was cancelled/superseded).
    assert plan_enqueue(push(A), PRFacts()) == Plan("enqueued", insert_state="queued")


def test_a_newer_push_supersedes_pending_automatic_jobs_of_older_heads() -> None:
    facts = PRFacts(pending=(auto(1, A, at=100.0), auto(2, B, at=100.0, before=A)))
    plan = plan_enqueue(push(C, before=B, at=100.0), facts)
    # Job 2 is named by `before`; job 1 ties on the timestamp and stays: its worker sees the real head.
    assert plan == Plan("enqueued", insert_state="queued", supersede=(2,))


def test_an_out_of_order_older_push_is_recorded_superseded_by_the_newer_job() -> None:
    plan = plan_enqueue(push(A, at=100.0), PRFacts(pending=(auto(4, B, at=100.0, before=A),)))
    assert plan.outcome == "superseded" and plan.insert_state == "superseded" and plan.superseded_by == 4
    assert plan.supersede == ()


def test_a_tie_supersedes_nothing_either_way() -> None:
    plan = plan_enqueue(push(A, at=100.0), PRFacts(pending=(auto(4, B, at=100.0),)))
    assert plan == Plan("enqueued", insert_state="queued")


def test_a_push_never_supersedes_a_request_but_moves_one_settled_on_another_head() -> None:
    facts = PRFacts(pending=(manual(1, ""), manual(2, A), manual(3, B, trigger="rerun:77")))
    plan = plan_enqueue(push(B, before=A, at=100.0), facts)
    # Job 1 has not read a head yet (it reviews the newest); job 3 is on the pushed head already.
    assert plan == Plan("enqueued", insert_state="queued", follow=(2,))


def test_a_request_follows_even_when_the_push_is_a_duplicate_or_paused() -> None:
    facts = PRFacts(live_revision_job=5, pending=(manual(2, A),))
    assert plan_enqueue(push(B, before=A), facts).follow == (2,)
    paused = plan_enqueue(push(B, before=A), PRFacts(paused=True, pending=(manual(2, A),)))
    assert (paused.outcome, paused.insert_state, paused.insert_outcome, paused.follow) == (
        "skipped",
        "cancelled",
        PAUSED_SKIP,
        (2,),
    )


def test_a_request_follows_a_push_of_unknown_order_but_not_one_known_older() -> None:
    # The request has no time of its own, so the order is unknown: it follows (it re-reads the head anyway).
    assert plan_enqueue(push(A, at=90.0), PRFacts(pending=(manual(2, B),))).follow == (2,)
    plan = plan_enqueue(push(A, at=90.0), PRFacts(pending=(auto(1, B, at=100.0), manual(2, B))))
    assert (plan.outcome, plan.follow) == ("superseded", ())


def test_requests_supersede_nothing() -> None:
    facts = PRFacts(pending=(auto(1, A), manual(2, B)))
    assert plan_enqueue(request(), facts) == Plan("enqueued", insert_state="queued")
    assert plan_enqueue(request(C, trigger="rerun:8"), facts) == Plan("enqueued", insert_state="queued")


def test_paused_skips_automatic_work_visibly_but_not_requests() -> None:
    assert plan_enqueue(push(A), PRFacts(paused=True)).insert_outcome == PAUSED_SKIP
    assert plan_enqueue(request(), PRFacts(paused=True)).insert_state == "queued"


def test_a_refusal_is_recorded_as_a_cancelled_job() -> None:
    plan = plan_enqueue(request(), PRFacts(refusal="limit reached"))
    assert (plan.outcome, plan.insert_state, plan.insert_outcome) == ("refused", "cancelled", "refused: limit reached")


def test_ready_for_review_replaces_a_waiting_draft_job_of_any_head_not_known_newer() -> None:
    facts = PRFacts(
        pending=(
            auto(1, A, trigger="draft"),
            auto(2, B, trigger="draft", state="running"),
            auto(3, C, trigger="draft", at=200.0),
        )
    )
    plan = plan_enqueue(push(B, at=100.0), facts)
    # 1: waiting draft job, order unknown: replaced. 2: running draft of this very head: left to finish.
    # 3: a draft job of a head known newer: stays.
    assert plan.supersede == (1,)


def test_a_draft_push_does_not_replace_a_ready_job_of_its_own_head() -> None:
    plan = plan_enqueue(push(A, trigger="draft"), PRFacts(pending=(auto(1, A),)))
    assert plan == Plan("enqueued", insert_state="queued")


def test_the_plan_is_pure_over_its_inputs() -> None:
    decision, facts = push(B, before=A), PRFacts(pending=(auto(1, A),))
    assert plan_enqueue(decision, facts) == plan_enqueue(replace(decision), replace(facts))


def test_an_observed_head_is_never_ordered_by_stale_before_links() -> None:
    # A, B, then force-pushed back to A: B's late webhook named A as its `before`. The worker of B reads A and hands
    # it over: A is current, not "older than B".
    observed = replace(push(A, at=100.0), observed=True)
    plan = plan_enqueue(observed, PRFacts(pending=(auto(3, B, at=100.0, before=A), manual(4, B))))
    assert plan == Plan("enqueued", insert_state="queued", follow=(4,))


def test_a_retargeted_base_is_skipped_while_paused_and_supersedes_nothing() -> None:
    retarget = replace(push(B, trigger="base:delivery-1"), supersede_older_heads=False)
    assert plan_enqueue(retarget, PRFacts(paused=True)).outcome == "skipped"
    assert plan_enqueue(retarget, PRFacts(pending=(auto(1, A, at=1.0),))) == Plan("enqueued", insert_state="queued")


def test_a_base_changed_and_back_costs_one_review_of_the_head() -> None:
    # open, change the base, change it back: three full reviews of one commit, three model calls.
    first = replace(push(B, trigger="base:delivery-1"), supersede_older_heads=False)
    plan = plan_enqueue(first, PRFacts(pending=(auto(1, B, at=1.0),)))
    assert plan == Plan("enqueued", insert_state="queued", replaces=(1,))  # the queued review of B, replaced
    second = replace(push(B, trigger="base:delivery-2"), supersede_older_heads=False)
    queued = PendingJob(2, B, "base:delivery-1", "queued")
    assert plan_enqueue(second, PRFacts(pending=(queued,))).duplicate_of == 2
    running = PendingJob(2, B, "base:delivery-1", "running")  # it may have read the old base: a new review
    assert plan_enqueue(second, PRFacts(pending=(running,))).outcome == "enqueued"
