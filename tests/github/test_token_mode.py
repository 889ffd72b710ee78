"""Token mode's parts, one by one: a pull request's URL and the API it names (github.com, or a GitHub Enterprise
Server), the GitHub client acting with a person's token against the fake GitHub (whose calls it may make, whom it
acts as, what its errors say and never show), the marker rule of `review --post`, and the dry-run records."""

from __future__ import annotations

import aiohttp
import pytest

from reviewer_app.core.errors import PermanentError
from reviewer_app.core.job_records import JobDetails, WouldPublish
from reviewer_app.core.markers import make_marker, review_naming_head
from reviewer_app.core.pull_url import NotAPullRequestURL, parse_pull_url
from reviewer_app.core.states import JobState
from reviewer_app.github.api_errors import redact
from reviewer_app.github.auth import TOKEN_INSTALLATION, PersonalToken
from reviewer_app.github.check_run_text import desired_check
from reviewer_app.github.client import GitHubClient
from reviewer_app.review.repo_config import parse_repo_config
from reviewer_app.store.base import Job
from tests.fakes.github import FakeGitHub, added_file, running

REPO = "octo-org/widgets"
SHA = "a" * 40


@pytest.mark.parametrize(
    ("url", "repo", "number", "api", "web"),
    [
        (
            "https://github.com/octo-org/widgets/pull/12",
            "octo-org/widgets",
            12,
            "https://api.github.com",
            "https://github.com/octo-org/widgets/pull/12",
        ),
        (
            "https://github.com/octo-org/widgets/pull/12/files?diff=split#r1",
            "octo-org/widgets",
            12,
            "https://api.github.com",
            "https://github.com/octo-org/widgets/pull/12",
        ),
        (
            " https://www.github.com/o/r.js/pull/3/commits ",
            "o/r.js",
            3,
            "https://api.github.com",
            "https://www.github.com/o/r.js/pull/3",
        ),
        (
            "https://ghe.example.com/team/service/pull/7",
            "team/service",
            7,
            "https://ghe.example.com/api/v3",
            "https://ghe.example.com/team/service/pull/7",
        ),
        (
            "http://ghe.internal:8443/team/service/pull/7",
            "team/service",
            7,
            "http://ghe.internal:8443/api/v3",
            "http://ghe.internal:8443/team/service/pull/7",
        ),
        (
            "https://someone:secret@ghe.example.com/team/service/pull/7",
            "team/service",
            7,
            "https://ghe.example.com/api/v3",
            "https://ghe.example.com/team/service/pull/7",
        ),
    ],
)
def test_a_pull_requests_url_names_its_repository_number_and_api(
    url: str, repo: str, number: int, api: str, web: str
) -> None:
    ref = parse_pull_url(url)
    assert (ref.repo, ref.number, ref.api_url, ref.web_url) == (repo, number, api, web)


@pytest.mark.parametrize(
    "url",
    [
        "",
        "github.com/o/r/pull/1",
        "https://github.com/o/r/pulls/1",
        "https://github.com/o/r/pull/0",
        "https://github.com/o/r/pull/1e3",
        "https://github.com/o/r/pull/²",
        "https://github.com/o o/r/pull/1",
        "https://github.com/o/r",
        "https://[::1/o/r/pull/1",
    ],
)
def test_anything_else_is_not_a_pull_request_url(url: str) -> None:
    with pytest.raises(NotAPullRequestURL, match="expected https://HOST/OWNER/REPO/pull/NUMBER"):
        parse_pull_url(url)


def test_a_personal_token_is_never_shown_and_is_no_app() -> None:
    token = PersonalToken("github_pat_11ABCDEF_secretsecret")
    assert "secret" not in repr(token) and "secret" not in str(token)
    with pytest.raises(PermanentError, match="not an App"):
        token.app_jwt()
    assert token.renews is False
    # A fine-grained token's shape is scrubbed from error text even when it is not one the client holds.
    assert redact("refused github_pat_11ABCDEF_x9 and ghp_abc") == "refused <redacted> and <redacted>"


async def test_the_client_acts_as_the_tokens_person_with_what_the_token_may_do() -> None:
    fake = FakeGitHub()
    inst = fake.add_installation()
    fake.add_repo(REPO, inst.id)
    fake.set_permission(REPO, "bob", "read")
    pull = fake.add_pull(REPO, 1, files=[added_file("a.py", ["x = 1"])])
    token = fake.add_user_token("bob")
    reader = fake.add_user_token("bob", permissions={"pull_requests": "read"})
    expired = fake.add_user_token("bob", expires_at=0)
    async with running(fake) as url, aiohttp.ClientSession() as session:

        def client(value: str) -> GitHubClient:
            return GitHubClient(session, url, PersonalToken(value), read_retry_delays=())

        github = client(token)
        assert await github.bot_login() == "bob"  # GET /user, asked once
        assert await github.bot_login() == "bob"
        assert len(fake.requests_matching("GET", "^/user$")) == 1
        assert (await github.get_pull(TOKEN_INSTALLATION, REPO, 1))["head"]["sha"] == pull.head_sha
        review = await github.create_review(
            TOKEN_INSTALLATION, REPO, 1, commit_id=pull.head_sha, body="Hi", event="COMMENT"
        )
        assert review["user"]["login"] == "bob"
        # The App's own calls need the App's JWT, which a person's token is not.
        with pytest.raises(PermanentError, match="not an App"):
            await github.app_info()
        # A token without the permission is refused as GitHub refuses it, and says so for a token.
        with pytest.raises(PermanentError, match="Resource not accessible by personal access token") as refused:
            await client(reader).create_review(
                TOKEN_INSTALLATION, REPO, 1, commit_id=pull.head_sha, body="x", event="COMMENT"
            )
        assert "does the token have this permission?" in refused.value.reason and reader not in refused.value.reason
        # A token GitHub no longer takes: one request, no renewal (there is nothing to renew), and said plainly.
        before = len(fake.requests)
        with pytest.raises(PermanentError, match="GitHub rejected the token") as rejected:
            await client(expired).get_pull(TOKEN_INSTALLATION, REPO, 1)
        assert len(fake.requests) == before + 1 and expired not in rejected.value.reason
        # Another person's private repository is not there for this token.
        fake.add_repo("elsewhere/secret", inst.id)
        with pytest.raises(PermanentError, match="not found \\(or the token cannot see it\\)"):
            await github.get_pull(TOKEN_INSTALLATION, "elsewhere/secret", 1)
    assert {r.auth for r in fake.requests} == {"user"}


def test_review_post_counts_only_a_marker_of_the_head_by_the_same_person() -> None:
    ours = {"id": 1, "user": {"login": "Bob"}, "body": f"Review\n\n{make_marker(1, SHA)}", "commit_id": SHA}
    pasted = {"id": 2, "user": {"login": "mallory"}, "body": make_marker(1, SHA), "commit_id": SHA}
    own_words = {"id": 3, "user": {"login": "bob"}, "body": "LGTM", "commit_id": SHA}
    older = {"id": 4, "user": {"login": "bob"}, "body": make_marker(1, "b" * 40), "commit_id": "b" * 40}
    assert review_naming_head([pasted, own_words, older, ours], login="bob", head_sha=SHA) is ours
    assert review_naming_head([pasted, own_words, older], login="bob", head_sha=SHA) is None


def test_the_would_be_review_is_kept_with_the_jobs_details_and_read_back() -> None:
    would = WouldPublish(
        body="The review.",
        comments=({"path": "a.py", "line": 2, "side": "RIGHT", "body": "Here."},),
        kind="review",
        why="REVIEWER_DRY_RUN is set",
    )
    details = JobDetails(would_publish=would)
    assert JobDetails.from_json(details.to_json()) == details
    # A malformed record reads as absent; a comment without its place is dropped.
    assert JobDetails.from_dict({"would_publish": {"body": 3}}).would_publish is None
    read = JobDetails.from_dict({"would_publish": {"body": "x", "comments": [{"line": 1}, "no"]}}).would_publish
    assert read == WouldPublish(body="x")


def test_a_repository_asks_for_a_dry_run_in_its_settings() -> None:
    assert parse_repo_config("dry_run: true\n", max_input_tokens=1000, max_parts=1).dry_run is True
    assert parse_repo_config("auto: false\n", max_input_tokens=1000, max_parts=1).dry_run is False
    wrong = parse_repo_config("dry_run: maybe\n", max_input_tokens=1000, max_parts=1)
    assert wrong.dry_run is False and wrong.errors == ("dry_run must be true or false",)


def test_a_dry_runs_check_run_says_nothing_was_posted_and_nothing_of_the_findings() -> None:
    held = WouldPublish(body="f2 is wrong", why="dry_run: true in .github/reviewer.yml")
    job = Job(
        **{name: None for name in ("lease_owner", "lease_token", "lease_expires_at", "last_error", "superseded_by")},
        **{name: None for name in ("check_run_id", "check_run_status", "review_id", "publish_intent_at", "answer")},
        id=1,
        revision_key="k",
        repo_id=1,
        repo_full_name=REPO,
        installation_id=1,
        pr_number=1,
        head_sha=SHA,
        trigger="auto",
        priority=10,
        state=JobState.SUCCEEDED,
        details=JobDetails(would_publish=held),
        attempts=1,
        max_attempts=5,
        next_attempt_at=0.0,
        outcome="dry run",
        event_at=None,
        created_at=0.0,
        started_at=0.0,
        finished_at=1.0,
        updated_at=1.0,
    )
    view = desired_check(job)
    assert (view.status, view.conclusion, view.title) == ("completed", "neutral", "Dry run: review not posted")
    assert "nothing was posted" in view.summary and "dry_run: true in .github/reviewer.yml" in view.summary
    assert "f2" not in view.summary
