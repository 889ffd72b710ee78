"""The fake GitHub held to GitHub's published description: every response it sends, and every request body the app
sends it, validated against the models githubkit generates from GitHub's OpenAPI description."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from reviewer_app.core.states import JobState
from reviewer_app.review.repo_config import CONFIG_PATH
from tests.fakes.github import RecordedRequest, added_file
from tests.harness import REPO, harness
from tests.helpers import SECRET, eventually

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from githubkit_schemas.latest import models as gh

REPO_ROUTE = "/repos/{owner}/{repo}"

# (method, route pattern) -> (request body model or None, response model), for every endpoint the app calls.
SCHEMAS: dict[tuple[str, str], tuple[Any, Any]] = {
    ("GET", REPO_ROUTE): (None, gh.FullRepository),
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
    ("POST", REPO_ROUTE + "/pulls/comments/{comment_id}/reactions"): (
        gh.ReposOwnerRepoPullsCommentsCommentIdReactionsPostBody,
        gh.Reaction,
    ),
    ("GET", REPO_ROUTE + "/pulls/comments/{comment_id}/reactions"): (None, list[gh.Reaction]),
    ("POST", REPO_ROUTE + "/pulls/{number}/comments/{comment_id}/replies"): (
        gh.ReposOwnerRepoPullsPullNumberCommentsCommentIdRepliesPostBody,
        gh.PullRequestReviewComment,
    ),
    ("GET", REPO_ROUTE + "/compare/{basehead}"): (None, gh.CommitComparison),
    ("GET", REPO_ROUTE + "/collaborators/{user}/permission"): (None, gh.RepositoryCollaboratorPermission),
    # A file (a symlink to a file is served as that file), a symlink, a submodule, or a directory's listing.
    ("GET", REPO_ROUTE + "/contents/{path}"): (
        None,
        gh.ContentFile | gh.ContentSymlink | gh.ContentSubmodule | list[gh.ContentDirectoryItems],
    ),
    ("GET", REPO_ROUTE + "/contents"): (None, list[gh.ContentDirectoryItems]),
    # Answered 302 to a download link, with no body (only 2xx bodies are checked): tests/codebase/test_snapshot.py.
    ("GET", REPO_ROUTE + "/tarball/{ref}"): (None, None),
    ("GET", "/app/installations/{installation_id}"): (None, gh.Installation),
    ("GET", REPO_ROUTE + "/installation"): (None, gh.Installation),
    ("GET", "/user"): (None, gh.PrivateUser | gh.PublicUser),
    ("GET", "/app/installations"): (None, list[gh.Installation]),
    ("GET", "/app"): (None, gh.Integration),
    ("POST", "/app/installations/{installation_id}/access_tokens"): (
        gh.AppInstallationsInstallationIdAccessTokensPostBody,
        gh.InstallationToken,
    ),
    ("GET", "/installation/repositories"): (None, gh.InstallationRepositoriesGetResponse200),
    ("GET", "/app/hook/deliveries"): (None, list[gh.HookDeliveryItem]),
    ("POST", "/app/hook/deliveries/{delivery_id}/attempts"): (
        None,
        gh.AppHookDeliveriesDeliveryIdAttemptsPostResponse202,
    ),
    ("POST", "/app-manifests/{code}/conversions"): (None, gh.AppManifestsCodeConversionsPostResponse201),
}
# Answered by the fake but not GitHub's REST API: its GraphQL endpoint (every document and answer is checked against
# GitHub's GraphQL schema by graphql-core, tests/fakes/github/graphql.py), github.com's App-registration pages the
# setup flow posts a form to, and the fake's own admin routes.
NOT_REST = ("/graphql", "/settings/apps/new", "/organizations/{org}/settings/apps/new")

# Where the app names GitHub's REST endpoints: every module of reviewer_app/github/ (the client's calls, one concern
# per module, and the token fetch, gidgethub's helper) and the setup page's manifest conversion.
ROOT = Path(__file__).resolve().parents[2]
APP_SOURCES = (*sorted((ROOT / "reviewer_app/github").glob("*.py")), ROOT / "reviewer_app/web/setup_page.py")
_URL = re.compile(
    r'(?:"(?P<method>GET|POST|PATCH|PUT|DELETE)",\s*)?f?"(?:\{[^}]*\})?(?P<url>/(?:app|installation|repos|user\b)[^"]*)"'
)
_IMPLIED = {"/app/installations/{installation_id}/access_tokens": "POST", "/app-manifests/{code}/conversions": "POST"}


def shape(route: str) -> str:
    """A route with its variables and query template blanked: /repos/{owner}/{name}/contents/{+path}{?ref} and
    /repos/{owner}/{repo}/contents/{path} are one endpoint."""
    route = re.sub(r"\{\?[^}]*\}", "", route)
    route = re.sub(r"\{[^}]*\}\.\.\.\{[^}]*\}", "{}", route)  # compare/{base}...{head} is {basehead}
    return re.sub(r"\{[^}]*\}", "{}", route)


def endpoints_the_app_names() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for source in APP_SOURCES:
        text = source.read_text()
        for m in _URL.finditer(text):
            url = m["url"]
            found.add((m["method"] or _IMPLIED.get(url, "GET"), shape(url)))
            if "{+path}" in url:  # an empty path: the root directory's listing
                found.add(("GET", shape(url.split("/{+path}")[0])))
        # gidgethub's helper names the token endpoint itself.
        if "get_installation_access_token" in text:
            found.add(("POST", shape("/app/installations/{installation_id}/access_tokens")))
    return found


def test_every_endpoint_the_app_calls_is_held_to_githubs_schema() -> None:
    # Lists what is covered (SCHEMAS) and fails when the app calls an endpoint the table does not cover, or when the
    # table keeps one the app no longer calls.
    called = endpoints_the_app_names()
    covered = {(method, shape(route)) for method, route in SCHEMAS}
    assert len(called) >= 20, sorted(called)
    assert called - covered == set(), f"endpoints the app calls with no GitHub schema here: {sorted(called - covered)}"
    assert covered - called == set(), f"schemas of endpoints the app no longer calls: {sorted(covered - called)}"


def _pattern(route: str) -> str:
    """The route as the fake registered it, without aiohttp's regular expressions: {run_id:\\d+} -> {run_id}."""
    return re.sub(r"\{(\w+):[^}]+\}", r"{\1}", route).rstrip("/") or "/"  # /contents/ is /contents


def disagreements(requests: list[RecordedRequest]) -> tuple[list[str], set[tuple[str, str]]]:
    """What the fake answered (2xx) or the app sent that GitHub's schema does not allow, and the endpoints seen."""
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    for r in requests:
        key = (r.method, _pattern(r.route))
        if not 200 <= r.status < 300 or r.fault or key[1] in NOT_REST or key[1].startswith("/_fake"):
            continue
        if key not in SCHEMAS:
            problems.append(
                f"{r.method} {key[1]}: an endpoint with no GitHub schema in tests/github/test_fake_schema.py"
            )
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


async def test_recovery_redelivery_and_the_repository_tools_speak_githubs_schema(tmp_path) -> None:
    # The calls the review of one pull request does not make: the missed-webhook duties (deliveries, redelivery,
    # installations, their repositories, open pull requests) and the model's reads of files, links, submodules and
    # folders. Thread replies are held to the schema in tests/review/test_replies.py, the manifest conversion in
    # tests/web/test_setup.py.
    from tests.github.test_recovery import recovery

    # The codebase off: its snapshot would serve the reads, and this test holds GitHub's contents API to its schema.
    async with harness(tmp_path, REVIEWER_MAX_TOOL_TURNS="8", REVIEWER_CODEBASE="0") as h:
        gh = h.github
        gh.webhook_url, gh.webhook_secret = str(h.client.make_url("/api/github/webhooks")), SECRET
        gh.set_file(REPO, CONFIG_PATH, "repository_tools: true\n")
        for call in (
            {"path": "src/util.py"},
            {"path": "docs/util.py"},
            {"path": "vendor/lib"},
            {"path": "link"},
        ):
            h.anthropic.script_tool_answer(call, name="read_file")
        for folder in ("", "vendor"):
            h.anthropic.script_tool_answer({"path": folder}, name="list_directory")
        pull = gh.add_pull(REPO, 1, files=[added_file("src/app.py", ["import util", "util.helper()"])])
        gh.set_file(REPO, "src/util.py", "def helper():\n    return 1\n", ref=pull.head_sha)
        gh.set_symlink(REPO, "docs/util.py", "../src/util.py", ref=pull.head_sha)
        gh.set_symlink(REPO, "link", "../../etc/passwd", ref=pull.head_sha)
        gh.set_submodule(REPO, "vendor/lib", "https://example.invalid/lib.git", ref=pull.head_sha)
        gh.set_file(REPO, "vendor/README.md", "vendored\n", ref=pull.head_sha)
        gh.add_delivery("pull_request", "opened", status_code=502, payload=h.pr_payload(pull))
        r = recovery(h)
        assert await r.redeliver_failed_once() == 1
        [job] = await eventually(_jobs(h))
        await h.wait_state(job.id, JobState.SUCCEEDED)
        await r.sweep_once()
        problems, seen = disagreements(h.github.requests)
    assert problems == [], "\n".join(problems)
    expected = {
        ("GET", "/app/hook/deliveries"),
        ("POST", "/app/hook/deliveries/{delivery_id}/attempts"),
        ("GET", "/app/installations"),
        ("GET", "/installation/repositories"),
        ("GET", REPO_ROUTE + "/pulls"),
        ("GET", REPO_ROUTE + "/contents/{path}"),
        ("GET", REPO_ROUTE + "/contents"),
    }
    assert expected <= seen, expected - seen
    reads = [r for r in h.github.requests if "/contents" in r.path and r.status == 200]
    kinds = {k if isinstance(k, str) else "listing" for k in (_kind(r.response_json) for r in reads)}
    assert {"file", "symlink", "submodule", "listing"} <= kinds, kinds


def _kind(body: Any) -> str | None:
    return None if isinstance(body, list) else body.get("type")


def _jobs(h):
    async def listed():
        return await h.store.list_jobs() or None

    return listed


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
