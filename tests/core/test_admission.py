"""Admission decisions over pull_request payloads (pure)."""

from __future__ import annotations

import pytest

from reviewer_app.core.admission import CancelPR, Enqueue, Guard, Ignore
from reviewer_app.core.events import (
    decide_comment,
    decide_observed_head,
    decide_pull_request,
    decide_rerun,
    rerun_job_id,
)
from reviewer_app.core.payload import MalformedPayload
from reviewer_app.core.timestamps import parse_time
from reviewer_app.github.checks import external_id
from tests.helpers import pr_payload, sha
from tests.payloads import DEFAULT_STAMP


@pytest.mark.parametrize("action", ["opened", "reopened", "synchronize", "ready_for_review"])
def test_review_actions_enqueue_the_head(action: str) -> None:
    d = decide_pull_request(action, pr_payload(action=action, head=sha(1)))
    assert isinstance(d, Enqueue)
    assert d.job.head_sha == sha(1) and d.job.pr_number == 1 and d.job.installation_id == 77
    assert d.job.revision_key == f"1001:1:{sha(1)}:auto"


@pytest.mark.parametrize("action", ["opened", "reopened", "synchronize"])
def test_a_draft_gets_a_draft_job_of_its_own(action: str) -> None:
    # Whether drafts are reviewed is the repository's `drafts:` setting, which the worker reads: admission queues a
    # job under its own trigger, so ready_for_review for the same head is not a duplicate of it.
    d = decide_pull_request(action, pr_payload(action=action, head=sha(1), draft=True))
    assert isinstance(d, Enqueue) and d.automatic and d.supersede_older_heads
    assert d.job.trigger == "draft" and d.job.revision_key == f"1001:1:{sha(1)}:draft"
    ready = decide_pull_request("ready_for_review", pr_payload(action="ready_for_review", head=sha(1)))
    assert isinstance(ready, Enqueue) and ready.job.revision_key != d.job.revision_key


def test_closed_cancels() -> None:
    payload = pr_payload(action="closed")
    closed_at = parse_time(payload["pull_request"]["updated_at"])
    assert closed_at is not None  # the close is ordered against the pull request's other events by its own time
    assert decide_pull_request("closed", payload) == CancelPR(
        1001, 1, "pull request closed", closed_at=closed_at, merged=False
    )


def test_a_merge_says_so_for_the_findings_fates() -> None:
    payload = pr_payload(action="closed")
    payload["pull_request"]["merged"] = True
    decision = decide_pull_request("closed", payload)
    assert isinstance(decision, CancelPR) and decision.merged is True


@pytest.mark.parametrize("action", ["edited", "labeled", "assigned"])
def test_other_actions_are_ignored_with_a_reason(action: str) -> None:
    d = decide_pull_request(action, pr_payload(action=action))
    assert isinstance(d, Ignore) and action in d.reason


def test_missing_head_is_malformed() -> None:
    p = pr_payload()
    del p["pull_request"]["head"]
    with pytest.raises(MalformedPayload):
        decide_pull_request("opened", p)


def test_debounce_applies_to_pushes_only() -> None:
    d1 = decide_pull_request("synchronize", pr_payload(), debounce_seconds=30)
    d2 = decide_pull_request("opened", pr_payload(), debounce_seconds=30)
    assert isinstance(d1, Enqueue) and d1.job.delay_seconds == 30
    assert isinstance(d2, Enqueue) and d2.job.delay_seconds == 0


@pytest.mark.parametrize(
    ("value", "job"),
    [
        (external_id(42), 42),
        ("reviewer-app-job-042", None),
        ("reviewer-app-job-", None),
        ("other-42", None),
        ("reviewer-app-job-1" + "0" * 18, None),
        (42, None),
        (None, None),
    ],
)
def test_a_check_runs_external_id_names_its_job(value: object, job: int | None) -> None:
    assert rerun_job_id({"check_run": {"external_id": value}}) == job


@pytest.mark.parametrize(
    ("association", "limited"),
    [("NONE", True), ("FIRST_TIME_CONTRIBUTOR", True), ("CONTRIBUTOR", True), ("MEMBER", False), ("OWNER", False)],
)
def test_only_outside_authors_automatic_reviews_carry_the_per_author_limit(association: str, limited: bool) -> None:
    p = pr_payload()
    p["pull_request"]["author_association"] = association
    d = decide_pull_request("opened", p, guard=Guard(reviews_per_day=5, author_per_day=3))
    assert isinstance(d, Enqueue) and d.guard is not None and d.guard.reviews_per_day == 5
    assert (d.job.details.author == "alice") is limited and (d.guard.author_per_day == 3) is limited


def test_a_decision_carries_its_delivery_and_the_time_github_gives_the_event() -> None:
    # Complete when core returns it: nothing for the receiver or the sweep to patch in afterwards.
    pushed = {**pr_payload(updated_at="2026-12-01T10:00:05Z"), "before": sha(0)}
    d = decide_pull_request("synchronize", pushed, delivery_id="d-1")
    assert isinstance(d, Enqueue) and d.job.before_sha == sha(0)
    assert d.job.event_at == parse_time("2026-12-01T10:00:05Z") and d.job.details.delivery_id == "d-1"
    retarget = pr_payload(action="edited")
    retarget["changes"] = {"base": {"ref": {"from": "old"}}}
    moved = decide_pull_request("edited", retarget, delivery_id="d-2")
    assert isinstance(moved, Enqueue) and moved.job.details.delivery_id == "d-2" and moved.job.event_at
    observed = decide_observed_head(77, 1001, "octo/widgets", pr_payload()["pull_request"], action="sweep")
    assert isinstance(observed, Enqueue) and observed.observed
    assert observed.job.event_at == parse_time(DEFAULT_STAMP) and observed.job.details.action == "sweep"


def test_requested_reviews_carry_their_delivery() -> None:
    comment = {
        "action": "created",
        "issue": {"number": 1, "pull_request": {"url": "x"}},
        "comment": {"id": 5, "body": "/review", "author_association": "OWNER", "user": {"login": "o", "type": "User"}},
        "repository": {"id": 1, "full_name": "o/r"},
        "installation": {"id": 2},
    }
    asked = decide_comment("created", comment, app_slug="reviewer-app", bot_login="reviewer-app[bot]", delivery_id="c")
    assert isinstance(asked, Enqueue) and asked.job.details.delivery_id == "c" and asked.job.event_at is None
    rerun = {
        "action": "rerequested",
        "check_run": {"id": 9, "head_sha": sha(1), "app": {"id": 3}, "pull_requests": [{"number": 1}]},
        "repository": {"id": 1, "full_name": "o/r"},
        "installation": {"id": 2},
    }
    again = decide_rerun("check_run", "rerequested", rerun, app_id=3, delivery_id="r")
    assert isinstance(again, Enqueue) and again.job.details.delivery_id == "r"
