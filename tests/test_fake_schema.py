"""The fake GitHub held to GitHub's published description: every response it sends, and every request body the app
sends it, validated against the models githubkit generates from GitHub's OpenAPI description."""

from __future__ import annotations

import re
import warnings
from typing import Any

from pydantic import TypeAdapter, ValidationError

from reviewer_app.core.states import JobState
from tests.fakes.github import RecordedRequest
from tests.harness import REPO, harness

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from githubkit_schemas.latest import models as gh

REPO_ROUTE = "/repos/{owner}/{repo}"

# (method, route pattern) -> (request body model or None, response model), for every endpoint the app calls.
SCHEMAS: dict[tuple[str, str], tuple[Any, Any]] = {
    ("GET", REPO_ROUTE + "/pulls/{number}"): (None, gh.PullRequest),
    ("GET", REPO_ROUTE + "/pulls/{number}/files"): (None, list[gh.DiffEntry]),
    ("GET", REPO_ROUTE + "/pulls/{number}/reviews"): (None, list[gh.PullRequestReview]),
    ("POST", REPO_ROUTE + "/pulls/{number}/reviews"): (
        gh.ReposOwnerRepoPullsPullNumberReviewsPostBody,
        gh.PullRequestReview,
    ),
    ("GET", REPO_ROUTE + "/pulls"): (None, list[gh.PullRequestSimple]),
    ("POST", REPO_ROUTE + "/check-runs"): (
        gh.ReposOwnerRepoCheckRunsPostBodyOneof0 | gh.ReposOwnerRepoCheckRunsPostBodyOneof1,
        gh.CheckRun,
    ),
    ("PATCH", REPO_ROUTE + "/check-runs/{run_id}"): (
        gh.ReposOwnerRepoCheckRunsCheckRunIdPatchBodyAnyof0 | gh.ReposOwnerRepoCheckRunsCheckRunIdPatchBodyAnyof1,
        gh.CheckRun,
    ),
    ("GET", REPO_ROUTE + "/commits/{ref}/check-runs"): (None, gh.ReposOwnerRepoCommitsRefCheckRunsGetResponse200),
    ("GET", REPO_ROUTE + "/issues/{number}/comments"): (None, list[gh.IssueComment]),
    ("POST", REPO_ROUTE + "/issues/{number}/comments"): (
        gh.ReposOwnerRepoIssuesIssueNumberCommentsPostBody,
        gh.IssueComment,
    ),
    ("POST", REPO_ROUTE + "/issues/comments/{comment_id}/reactions"): (
        gh.ReposOwnerRepoIssuesCommentsCommentIdReactionsPostBody,
        gh.Reaction,
    ),
    ("GET", REPO_ROUTE + "/pulls/{number}/comments"): (None, list[gh.PullRequestReviewComment]),
    ("POST", REPO_ROUTE + "/pulls/{number}/comments/{comment_id}/replies"): (
        gh.ReposOwnerRepoPullsPullNumberCommentsCommentIdRepliesPostBody,
        gh.PullRequestReviewComment,
    ),
    ("GET", REPO_ROUTE + "/compare/{basehead}"): (None, gh.CommitComparison),
    ("GET", REPO_ROUTE + "/collaborators/{user}/permission"): (None, gh.RepositoryCollaboratorPermission),
    ("GET", REPO_ROUTE + "/contents/{path}"): (None, gh.ContentFile),
    ("GET", "/app/installations/{installation_id}"): (None, gh.Installation),
    ("GET", "/app/installations"): (None, list[gh.Installation]),
    ("GET", "/app"): (None, gh.Integration),
    ("GET", REPO_ROUTE): (None, gh.FullRepository),
}


def _pattern(route: str) -> str:
    """The route as the fake registered it, without aiohttp's regular expressions: {run_id:\\d+} -> {run_id}."""
    return re.sub(r"\{(\w+):[^}]+\}", r"{\1}", route)


def disagreements(requests: list[RecordedRequest]) -> tuple[list[str], set[tuple[str, str]]]:
    """What the fake answered (2xx) or the app sent that GitHub's schema does not allow, and the endpoints seen."""
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    for r in requests:
        key = (r.method, _pattern(r.route))
        if key not in SCHEMAS or not 200 <= r.status < 300 or r.fault:
            continue
        seen.add(key)
        request_model, response_model = SCHEMAS[key]
        checks = [("response", response_model, r.response_json)]
        if request_model is not None:
            checks.append(("request", request_model, r.request_json))
        for what, model, body in checks:
            try:
                TypeAdapter(model).validate_python(body)
            except ValidationError as exc:
                errors = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:40])
                problems.append(f"{r.method} {key[1]} {what}: {errors}")
    return problems, seen


async def test_the_fake_and_the_app_speak_githubs_published_schema(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull, first = await h.open_pr()
        await h.wait_check_synced(first)
        newer = h.github.advance_head(REPO, 1)
        second = await h.deliver("pull_request", h.pr_payload(pull, "synchronize"))
        await h.wait_check_synced(second["job_id"])
        asked = await h.deliver("issue_comment", h.comment_payload(pull, "/review help"))
        assert asked["outcome"] == "replied"
        manual = await h.deliver("issue_comment", h.comment_payload(pull, "/review"))
        await h.wait_state(manual["job_id"], JobState.SUCCEEDED)
        await h.deliver("installation", h.installation_payload("suspend"))  # confirmed active: nothing cancelled
        await h.svc.outbox.run_pass()
        assert newer
        problems, seen = disagreements(h.github.requests)
    assert problems == [], "\n".join(problems)
    assert len(seen) >= 10, seen


def test_a_response_the_schema_does_not_allow_is_found() -> None:
    # The check itself: a check run whose status GitHub never sends fails it.
    bad = RecordedRequest(
        "PATCH",
        "/repos/o/r/check-runs/1",
        {},
        "token",
        1,
        False,
        200,
        None,
        route=REPO_ROUTE + r"/check-runs/{run_id:\d+}",
        request_json={"status": "reopened"},
        response_json={"id": 1},
    )
    problems, _ = disagreements([bad])
    assert any("response" in p for p in problems) and any("request" in p for p in problems)


async def test_an_archived_repository_refuses_every_write_and_nothing_is_published(tmp_path) -> None:
    # GitHub answers 403 to writes in an archived repository; the fake did not know the flag.
    async with harness(tmp_path) as h:
        h.github.archive_repo(REPO)
        _, job_id = await h.open_pr()
        job = await h.wait_state(job_id, JobState.FAILED, JobState.CANCELLED, timeout=30)
        assert h.reviews() == [] and job.review_id is None
        refused = [r for r in h.github.requests if r.method in ("POST", "PATCH") and r.status == 403]
        assert refused and all(r.response_json["message"].startswith("Repository was archived") for r in refused)
        problems, _ = disagreements(h.github.requests)
        assert problems == []
