"""The webhook bodies the tests build are held to GitHub's webhook schemas (githubkit's models of GitHub's
description): every builder, for every event and action the app handles, makes a body the schema accepts and that
carries no field the schema does not declare; the app decides on such bodies as it should (so its handlers read only
fields the real events have); and a body that drifts from the schema is refused where every test sends it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from gidgethub import sansio

from reviewer_app.core.admission import (
    AUTO_ACTIONS,
    CancelPR,
    Enqueue,
    Ignore,
    InstallationChange,
    Reply,
    ReposRemoved,
    SetPause,
)
from reviewer_app.web.events import Decisions, make_router
from tests.harness import REPO, SOURCE, harness
from tests.helpers import encode, pr_payload, sha, webhook_headers
from tests.payloads import (
    APP_ID,
    HANDLED,
    SchemaMismatch,
    check_run_event,
    check_suite_event,
    installation_event,
    installation_repositories_event,
    issue_comment_event,
    pull_request_event,
    repository_entry,
    rest_review_comment,
    review_comment_event,
    schema_problems,
    validate,
)

WIDGETS = [repository_entry("octo/widgets", 1001)]
RETARGET = {"base": {"ref": {"from": "main"}, "sha": {"from": sha("old base")}}}

# (event, body, what the app decides on it): every handled event and action, and the variants the app tells apart.
CASES: list[tuple[str, str, dict[str, Any], type]] = [
    *[(f"pull_request {a}", "pull_request", pull_request_event(a), Enqueue) for a in sorted(AUTO_ACTIONS)],
    ("pull_request opened draft", "pull_request", pull_request_event("opened", draft=True), Enqueue),
    ("pull_request synchronize before", "pull_request", pull_request_event("synchronize", before=sha(0)), Enqueue),
    ("pull_request closed", "pull_request", pull_request_event("closed"), CancelPR),
    ("pull_request edited title", "pull_request", pull_request_event("edited"), Ignore),
    ("pull_request edited base", "pull_request", pull_request_event("edited", changes=RETARGET), Enqueue),
    ("pull_request by an outsider", "pull_request", pull_request_event(author_association="NONE"), Enqueue),
    ("issue_comment /review", "issue_comment", issue_comment_event("/review"), Enqueue),
    ("issue_comment pause", "issue_comment", issue_comment_event("/review pause", association="OWNER"), SetPause),
    ("issue_comment resume", "issue_comment", issue_comment_event("/review resume"), Reply),
    ("issue_comment help", "issue_comment", issue_comment_event("/review help"), Reply),
    ("issue_comment outsider", "issue_comment", issue_comment_event("/review", association="NONE"), Reply),
    (
        "issue_comment by a bot",
        "issue_comment",
        issue_comment_event("/review", login="x[bot]", user_type="Bot"),
        Ignore,
    ),
    (
        "issue_comment question to the app",
        "issue_comment",
        issue_comment_event("@reviewer-app why is this needed?", login="alice", association="NONE"),
        Enqueue,
    ),
    (
        "pull_request_review_comment reply by the author",
        "pull_request_review_comment",
        review_comment_event(rest_review_comment(11, login="alice", body="Why?", in_reply_to=10), login="alice"),
        Enqueue,
    ),
    (
        "pull_request_review_comment starting a thread",
        "pull_request_review_comment",
        review_comment_event(rest_review_comment(12, login="alice", body="Hm"), login="alice"),
        Ignore,
    ),
    (
        "pull_request_review_comment by a bot",
        "pull_request_review_comment",
        review_comment_event(rest_review_comment(13, login="x[bot]", body="Why?", in_reply_to=10), login="x[bot]"),
        Ignore,
    ),
    ("check_run rerequested", "check_run", check_run_event(), Enqueue),
    ("check_suite rerequested", "check_suite", check_suite_event(), Enqueue),
    *[
        (f"installation {a}", "installation", installation_event(a), InstallationChange)
        for a in ("created", "unsuspend", "new_permissions_accepted")
    ],
    *[(f"installation {a}", "installation", installation_event(a), Reply) for a in ("deleted", "suspend")],
    (
        "installation_repositories added",
        "installation_repositories",
        installation_repositories_event("added", added=WIDGETS),
        InstallationChange,
    ),
    (
        "installation_repositories removed",
        "installation_repositories",
        installation_repositories_event("removed", removed=WIDGETS),
        ReposRemoved,
    ),
]


def _ids(cases: list[tuple[Any, ...]]) -> list[str]:
    return [case[0] for case in cases]


@pytest.mark.parametrize("name,event,payload,decided", CASES, ids=_ids(CASES))
async def test_each_builder_makes_a_body_github_sends_and_the_app_decides_on_it(name, event, payload, decided) -> None:
    assert schema_problems(event, payload) is None
    decisions = Decisions(app_id=APP_ID, app_slug="reviewer-app")
    await make_router().dispatch(_event(event, payload), decisions)
    [decision] = decisions.items
    assert isinstance(decision, decided), decision


def test_every_event_and_action_the_app_handles_has_a_case_here() -> None:
    routed = set(make_router()._shallow_routes)
    assert routed == set(HANDLED) | {"ping"}  # a newly routed event needs its builder and its cases
    covered = {(event, payload["action"]) for _, event, payload, _ in CASES}
    assert covered == {(event, action) for event, actions in HANDLED.items() for action in actions}
    assert AUTO_ACTIONS | {"closed", "edited"} == set(HANDLED["pull_request"])


async def test_the_harness_builders_make_bodies_github_sends(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE], draft=True)
        bodies = [("pull_request", h.pr_payload(pull, action)) for action in HANDLED["pull_request"]]
        bodies.append(("pull_request", h.pr_payload(pull, "synchronize", before=sha(0))))
        bodies.append(("issue_comment", h.comment_payload(pull, "/review", association="OWNER")))
        run = {"id": 1, "head_sha": pull.head_sha, "external_id": "reviewer-app-job-1", "check_suite": {"id": 2}}
        for event in ("check_run", "check_suite"):
            bodies += [(event, h.rerun_payload(pull, run, event=event, fork=fork)) for fork in (False, True)]
        bodies += [("installation", h.installation_payload(action)) for action in HANDLED["installation"]]
        bodies += [("installation_repositories", h.repositories_payload("added", added=[REPO]))]
        bodies += [("installation_repositories", h.repositories_payload("removed", removed=[REPO]))]
        for event, payload in bodies:
            assert schema_problems(event, payload) is None, (event, payload.get("action"))


# Drifts a builder could make: a required field dropped, a field of the wrong type, a field GitHub does not send, an
# action GitHub does not send for the event.
def _drop(path: str) -> Any:
    def change(payload: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = payload
        for key in parents:
            node = node[key]
        del node[last]

    return change


DRIFTS = [
    ("pull_request", pull_request_event("opened"), _drop("pull_request.node_id"), "pull_request.node_id"),
    ("pull_request", pull_request_event("opened"), _drop("pull_request.head.repo"), "head.repo"),
    ("pull_request", pull_request_event("synchronize"), _drop("before"), "before"),
    ("pull_request", pull_request_event("edited"), _drop("changes"), "changes"),
    ("pull_request", pull_request_event("opened"), lambda p: p["pull_request"].update(number="1"), "number"),
    ("pull_request", pull_request_event("opened"), lambda p: p["pull_request"].update(invented=1), "invented"),
    ("pull_request", pull_request_event("opened"), lambda p: p.update(action="frobnicated"), "frobnicated"),
    ("issue_comment", issue_comment_event("/review"), _drop("comment.user"), "comment.user"),
    ("issue_comment", issue_comment_event("/review"), _drop("issue.number"), "issue.number"),
    ("check_run", check_run_event(), _drop("check_run.check_suite"), "check_suite"),
    ("check_suite", check_suite_event(), _drop("check_suite.head_sha"), "head_sha"),
    ("check_suite", check_suite_event(), lambda p: p["check_suite"]["app"].update(id="4242"), "app.id"),
    ("installation", installation_event("deleted"), _drop("installation.account"), "account"),
    ("installation_repositories", installation_repositories_event("added"), _drop("repositories_added"), "added"),
]


@pytest.mark.parametrize("event,payload,drift,named", DRIFTS, ids=[f"{d[0]}-{d[3]}" for d in DRIFTS])
def test_a_body_that_drifts_from_githubs_schema_is_refused_where_tests_send_it(event, payload, drift, named) -> None:
    validate(event, payload)
    drift(payload)
    with pytest.raises(SchemaMismatch, match=named):
        validate(event, payload)
    with pytest.raises(SchemaMismatch, match=named):  # the one hook every test's delivery goes through
        webhook_headers(encode(payload), event=event)
    assert webhook_headers(encode(payload), event=event, as_github_sends=False)["X-GitHub-Event"] == event


def test_the_old_hand_built_pull_request_body_is_refused() -> None:
    # What tests/helpers.py built before: hundreds of required fields missing.
    old = {
        "action": "opened",
        "number": 1,
        "pull_request": {"number": 1, "state": "open", "head": {"sha": sha(1)}, "base": {"sha": sha(2)}},
        "repository": {"id": 1001, "full_name": "octo/widgets"},
        "installation": {"id": 77},
    }
    problem = schema_problems("pull_request", old)
    assert problem is not None and "validation errors" in problem
    assert schema_problems("pull_request", pr_payload()) is None


def _event(event: str, payload: dict[str, Any]) -> sansio.Event:
    return sansio.Event(json.loads(json.dumps(payload)), event=event, delivery_id="schema-test")
