"""The gate's decisions (core/gate.py), driven directly: whether a review job is still wanted, over plain facts."""

from __future__ import annotations

import pytest

from reviewer_app.core.cancel_reasons import COVERED_PREFIX
from reviewer_app.core.gate import (
    AUTO_OFF_TEXT,
    DRAFT_SKIP_TEXT,
    STALE_READ_SECONDS,
    AutomaticFacts,
    Moved,
    Skip,
    Wait,
    asker_refusal,
    automatic_verdict,
    head_verdict,
    known_older,
    looks_on_github,
    reads_may_lag,
    request_answered,
    requester_refusal,
    review_of_jobs,
)
from tests.helpers import sha

HEAD = sha(1)


def facts(**changes: object) -> AutomaticFacts:
    base: dict[str, object] = {"trigger": "auto", "head_sha": HEAD, "draft": False, "auto": True, "drafts": False}
    return AutomaticFacts(**{**base, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("case", "verdict"),
    [
        (facts(), None),
        (facts(auto=False), Skip(AUTO_OFF_TEXT)),
        (facts(auto=False, draft=True), Skip(AUTO_OFF_TEXT)),
        (facts(trigger="draft", draft=True), Skip(DRAFT_SKIP_TEXT)),
        (facts(trigger="draft", draft=True, drafts=True), None),
        (
            facts(trigger="draft"),
            Skip("skipped: the pull request is no longer a draft; its ready-for-review review covers this head"),
        ),
        (facts(draft_job=7), Wait("waiting for the draft's review of this head (job 7) to finish")),
        (facts(trigger="draft", draft=True, drafts=True, draft_job=7), None),  # only a ready PR's push waits
        (
            facts(last_reviewed=HEAD),
            Skip(f"{COVERED_PREFIX}commit {HEAD} was already reviewed; comment /review to review it again"),
        ),
        (facts(last_reviewed=sha(2)), None),
        (facts(last_reviewed=HEAD, published=True), None),  # its own review: found by its marker, not "covered"
    ],
)
def test_an_automatic_review_is_decided_on_the_pull_request_as_it_is_now(
    case: AutomaticFacts, verdict: Skip | Wait | None
) -> None:
    assert automatic_verdict(case) == verdict


@pytest.mark.parametrize(
    ("case", "looks"),
    [
        (facts(), True),
        (facts(last_reviewed=sha(2)), False),  # the store remembers the PR's reviews
        (facts(published=True), False),
        (facts(answered=True), False),  # a stored answer: an attempt of this job may have published
    ],
)
def test_githubs_markers_are_read_only_where_the_store_knows_no_review(case: AutomaticFacts, looks: bool) -> None:
    assert looks_on_github(case) is looks


@pytest.mark.parametrize(
    ("state", "current", "older", "verdict"),
    [
        ("open", HEAD, False, None),
        ("open", "", False, None),  # GitHub showed no head: nothing to compare
        ("closed", HEAD, False, Skip("the pull request was closed")),
        ("closed", sha(2), True, Skip("the pull request was closed")),
        ("open", sha(2), False, Moved(sha(2))),
        (
            "open",
            sha(2),
            True,
            Wait(f"GitHub still shows {sha(2)[:12]}, which this job's head replaced; reading the pull request again"),
        ),
    ],
)
def test_the_head_read_now_closes_supersedes_or_waits(
    state: str, current: str, older: bool, verdict: Skip | Wait | Moved | None
) -> None:
    assert head_verdict(state=state, current=current, head_sha=HEAD, older=older) == verdict


def test_a_read_may_lag_only_for_a_push_that_named_its_predecessor_and_only_for_a_while() -> None:
    assert reads_may_lag(before_sha=sha(0), created_at=100.0, now=100.0 + STALE_READ_SECONDS)
    assert not reads_may_lag(before_sha=sha(0), created_at=100.0, now=100.1 + STALE_READ_SECONDS)
    assert not reads_may_lag(before_sha=None, created_at=100.0, now=100.0)


def test_a_head_is_older_when_the_pushes_links_lead_back_to_it() -> None:
    a, b, c, d = sha(10), sha(11), sha(12), sha(13)
    # a -> b -> c (this job's head, pushed over b)
    pushes = [(b, a)]
    assert known_older(a, job_head=c, job_before=b, pushes=pushes)
    assert known_older(b, job_head=c, job_before=b, pushes=pushes)
    assert not known_older(d, job_head=c, job_before=b, pushes=pushes)  # not on the way back: a newer push
    # a was force-pushed back over b: it is newer than the b this job's chain passes.
    assert not known_older(a, job_head=c, job_before=b, pushes=[*pushes, (a, b)])


def test_only_write_access_may_request_a_review_or_an_answer_beyond_the_author() -> None:
    assert requester_refusal("octocat", "write") is None
    assert requester_refusal("octocat", "admin") is None
    assert requester_refusal("octocat", "read") == Skip(
        "skipped: octocat may not request reviews here (read access; reviews can be requested by people with write "
        "access)"
    )
    assert asker_refusal("octocat", "admin") is None
    refusal = asker_refusal("octocat", "unknown")
    assert refusal is not None and "has unknown access" in refusal.reason


def test_a_request_is_answered_by_an_earlier_jobs_review_by_the_apps_bot_only() -> None:
    marker = f"<!-- reviewer-app:review job=4 sha={sha(3)} -->"
    reviews = [
        {"id": 10, "user": {"login": "mallory"}, "body": marker},  # anyone can paste a marker
        {"id": 11, "user": {"login": "app[bot]"}, "body": "no marker"},
        {"id": 12, "user": {"login": "app[bot]"}, "body": f"review\n{marker}"},
    ]
    assert review_of_jobs(reviews, bot_login="app[bot]", job_ids=[4]) == 12
    assert review_of_jobs(reviews, bot_login="app[bot]", job_ids=[5]) is None
    assert request_answered(None) is None
    assert request_answered(12) == Skip(f"{COVERED_PREFIX}the request was answered by review 12 of an earlier commit")
