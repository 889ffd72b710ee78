"""The GraphQL calls the app makes for review threads, checked against GitHub's published schema by the fake GitHub
(tests/fakes/github/graphql.py): listing threads, resolving one, replying in one, and how failures are mapped."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from graphql import NoDeprecatedCustomRule, parse, validate

from reviewer_app.core.errors import PermanentError, RateLimited, TransientError
from reviewer_app.github.auth import AppCredentials
from reviewer_app.github.client import GitHubClient
from reviewer_app.github.graphql import (
    GRAPHQL_DOCUMENTS,
    full_database_id,
    graphql_endpoint,
    graphql_limit_retry_at,
)
from tests.fakes.github import FakeGitHub, added_file, running
from tests.fakes.github.graphql import add_thread_reply, github_schema, is_resolved, schema_errors, thread_replies

REPO = "octo-org/widgets"
INSTALLATION = 77


@pytest.fixture
async def gh() -> AsyncIterator[tuple[FakeGitHub, str, aiohttp.ClientSession]]:
    fake = FakeGitHub()
    fake.add_installation(INSTALLATION, "octo-org")
    fake.add_repo(REPO, INSTALLATION)
    fake.add_pull(REPO, 1, files=[added_file("src/app.py", [f"line {i}" for i in range(1, 9)])])
    async with running(fake) as url, aiohttp.ClientSession() as session:
        yield fake, url, session


def client(fake: FakeGitHub, url: str, session: aiohttp.ClientSession, **options: object) -> GitHubClient:
    options = {"read_retry_delays": (0, 0), "request_timeout": 5, **options}
    return GitHubClient(session, url, AppCredentials(str(fake.app_id), fake.private_key), **options)  # type: ignore[arg-type]


async def review_with_two_threads(c: GitHubClient, fake: FakeGitHub) -> list[int]:
    pull = fake.pulls[(REPO, 1)]
    comments = [{"path": "src/app.py", "line": n, "side": "RIGHT", "body": f"finding {n}"} for n in (2, 5)]
    await c.create_review(INSTALLATION, REPO, 1, commit_id=pull.head_sha, body="review", comments=comments)
    return [x["id"] for x in fake.review_comments_for(REPO, 1)]


def test_every_document_the_app_sends_is_valid_in_githubs_schema() -> None:
    assert len(GRAPHQL_DOCUMENTS) == 4  # the threads query, its two mutations, the blobs query
    for document in GRAPHQL_DOCUMENTS:
        assert schema_errors(document) == [], document


def test_no_document_reads_a_field_github_deprecates() -> None:
    # `databaseId` of reviews and comments is a deprecated 32-bit Int ("does not support 64-bit signed integer
    # identifiers. Use `fullDatabaseId` instead"): the app's ids come through fields GitHub keeps.
    for document in GRAPHQL_DOCUMENTS:
        assert validate(github_schema(), parse(document), [NoDeprecatedCustomRule]) == [], document


async def test_databaseid_cannot_carry_githubs_ids_and_fulldatabaseid_can(gh) -> None:
    # The fake answers as GitHub does for ids past 2**31 - 1: the 32-bit field is an error and null, the BigInt a
    # string with every digit.
    fake, url, session = gh
    c = client(fake, url, session)
    first, _ = await review_with_two_threads(c, fake)
    assert first > 2**31
    with pytest.raises(PermanentError, match="32-bit"):
        await c._graphql(
            REVIEW_THREADS_OLD_QUERY,
            installation_id=INSTALLATION,
            repo=REPO,
            what="old",
            write=False,
            owner="octo-org",
            name="widgets",
            number=1,
        )
    threads = await c.review_threads(INSTALLATION, REPO, 1)
    node = threads[0]["comments"]["nodes"][0]
    assert node["fullDatabaseId"] == str(first) and full_database_id(node["fullDatabaseId"]) == first


REVIEW_THREADS_OLD_QUERY = """
query ($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) { reviewThreads(first: 10) { nodes { comments(first: 5) { nodes { databaseId } } } } }
  }
}
"""


def test_full_database_id_reads_githubs_bigint_and_nothing_else() -> None:
    assert full_database_id("8589934592123") == 8589934592123
    assert full_database_id(3_000_000_000) == 3_000_000_000
    assert [full_database_id(v) for v in (None, "", "12a", 1.5, True, "-3")] == [None] * 6


def test_graphql_rate_limits_in_both_of_githubs_shapes() -> None:
    now = 1_000.0
    primary = {"errors": [{"type": "RATE_LIMITED", "message": "API rate limit exceeded for installation ID 1."}]}
    reset = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "4600"}
    assert graphql_limit_retry_at(200, reset, primary, now) == 4600.0
    secondary = {"message": "You have exceeded a secondary rate limit. Please wait a few minutes."}
    assert graphql_limit_retry_at(403, {"Retry-After": "30"}, secondary, now) == 1030.0
    assert graphql_limit_retry_at(200, {}, {"errors": [secondary]}, now) == 1060.0  # no time named: a minute
    assert graphql_limit_retry_at(429, {}, {"message": "Too Many Requests"}, now) == 1060.0
    assert graphql_limit_retry_at(200, {}, {"errors": [{"message": "Could not resolve to a node"}]}, now) is None
    assert graphql_limit_retry_at(403, {}, {"message": "Resource not accessible by integration"}, now) is None


@pytest.mark.parametrize(
    ("fault", "params", "wait"),
    [
        ("primary_rate_limit", {"reset": 4_000_000_000}, 4_000_000_000.0),  # 200, RATE_LIMITED, remaining 0
        ("secondary_rate_limit", {"retry_after": 90}, 90.0),  # 403 with retry-after
        ("secondary_rate_limit", {"status": 200, "retry_after": None}, 60.0),  # 200 with an error, no time
    ],
)
async def test_a_graphql_rate_limit_is_a_wait_not_an_error_and_is_not_retried_in_place(gh, fault, params, wait) -> None:
    fake, url, session = gh
    now = 1_000_000.0
    c = client(fake, url, session, clock=lambda: now)
    injected = fake.inject("POST", r"^/graphql$", fault, times=None, **params)
    with pytest.raises(RateLimited) as raised:
        await c.review_threads(INSTALLATION, REPO, 1)
    expected = wait if wait > now else now + wait
    assert raised.value.retry_at == pytest.approx(expected)
    assert injected.hits == 1  # "continuing may result in the banning of your integration"
    with pytest.raises(RateLimited):
        await c.resolve_review_thread(INSTALLATION, REPO, "PRRT_1")


def test_the_schema_check_rejects_what_github_would() -> None:
    github_schema()
    assert schema_errors('query { repository(owner: "o", name: "r") { pullRequest(number: 1) { threads { id } } } }')
    assert schema_errors('mutation { resolveReviewThread(input: {id: "x"}) { thread { id } } }')
    assert schema_errors("query {")


def test_graphql_endpoint_next_to_the_rest_base() -> None:
    assert graphql_endpoint("https://api.github.com") == "https://api.github.com/graphql"
    assert graphql_endpoint("https://ghe.example.com/api/v3/") == "https://ghe.example.com/api/graphql"


async def test_threads_listed_resolved_and_replied_to(gh) -> None:
    fake, url, session = gh
    c = client(fake, url, session)
    first, second = await review_with_two_threads(c, fake)
    add_thread_reply(fake, REPO, 1, second, "octocat", "I disagree")

    threads = await c.review_threads(INSTALLATION, REPO, 1)

    assert [t["id"] for t in threads] == [f"PRRT_{first}", f"PRRT_{second}"]
    opened = threads[0]["comments"]["nodes"][0]
    assert full_database_id(opened["fullDatabaseId"]) == first
    assert opened["author"] == {"__typename": "Bot", "login": "reviewer-app"}  # GraphQL drops REST's "[bot]"
    review_id = fake.reviews_for(REPO, 1)[0]["id"]
    assert opened["originalLine"] == 2 and full_database_id(opened["pullRequestReview"]["fullDatabaseId"]) == review_id
    assert threads[1]["comments"]["totalCount"] == 2
    assert threads[1]["comments"]["nodes"][1]["author"] == {"__typename": "User", "login": "octocat"}

    await c.reply_in_thread(INSTALLATION, REPO, f"PRRT_{first}", "The code changed.")
    await c.resolve_review_thread(INSTALLATION, REPO, f"PRRT_{first}")

    assert is_resolved(fake, first) and not is_resolved(fake, second)
    assert [r["body"] for r in thread_replies(fake, REPO, 1, first)] == ["The code changed."]
    assert fake.review_threads.rejected == []
    assert all(r.auth == "token" for r in fake.requests_matching("POST", r"^/graphql$"))


async def test_threads_are_paged(gh) -> None:
    fake, url, session = gh
    c = client(fake, url, session)
    pull = fake.pulls[(REPO, 1)]
    for n in range(1, 9):  # 8 reviews of one comment each...
        comment = {"path": "src/app.py", "line": n, "side": "RIGHT", "body": f"finding {n}"}
        await c.create_review(INSTALLATION, REPO, 1, commit_id=pull.head_sha, body="r", comments=[comment])
    for _ in range(100):  # ... and enough more threads for a second page
        fake.review_comments[(REPO, 1)].append({**fake.review_comments_for(REPO, 1)[0], "id": fake.next_id()})
    threads = await c.review_threads(INSTALLATION, REPO, 1)
    assert len(threads) == 108
    assert len(fake.requests_matching("POST", r"^/graphql$")) == 2


async def test_a_query_the_schema_rejects_is_a_permanent_error_and_is_recorded(gh) -> None:
    fake, url, session = gh
    c = client(fake, url, session)
    with pytest.raises(PermanentError, match="Cannot query field"):
        await c._graphql(
            "query { viewer { nope } }", installation_id=INSTALLATION, repo=REPO, what="a test", write=False
        )
    assert fake.review_threads.rejected


async def test_an_unknown_thread_is_githubs_not_found(gh) -> None:
    fake, url, session = gh
    with pytest.raises(PermanentError, match="Could not resolve"):
        await client(fake, url, session).resolve_review_thread(INSTALLATION, REPO, "PRRT_404")
    assert fake.review_threads.rejected == []  # a missing node is an answer GitHub gives, not a schema problem


async def test_a_5xx_query_is_retried_then_transient_and_a_mutation_is_never_repeated(gh) -> None:
    fake, url, session = gh
    c = client(fake, url, session)
    query = fake.inject("POST", r"^/graphql$", "error", times=None, status=502)
    with pytest.raises(TransientError, match="GraphQL"):
        await c.review_threads(INSTALLATION, REPO, 1)
    assert query.hits == 3  # the first try and two retries
    fake.clear_faults()
    mutation = fake.inject("POST", r"^/graphql$", "error", times=None, status=500)
    with pytest.raises(TransientError):
        await c.resolve_review_thread(INSTALLATION, REPO, "PRRT_1")
    assert mutation.hits == 1


async def test_a_hanging_graphql_call_times_out_as_transient(gh) -> None:
    fake, url, session = gh
    fault = fake.inject("POST", r"^/graphql$", "hang", times=None)
    with pytest.raises(TransientError):
        await client(fake, url, session, request_timeout=0.1).review_threads(INSTALLATION, REPO, 1)
    assert fault.hits == 3
    fake.release_hangs()


async def test_a_thread_says_which_person_resolved_it_and_none_when_an_app_did(gh) -> None:
    # `resolvedBy` is a User: a person who resolved a thread on GitHub's page is named, the App's own resolution
    # names nobody (a Bot is no User), and an open thread has no resolver.
    from tests.fakes.github.graphql import resolve_thread_as

    fake, url, session = gh
    c = client(fake, url, session)
    by_person, by_app = await review_with_two_threads(c, fake)
    resolve_thread_as(fake, by_person, "maintainer")
    threads = await c.review_threads(INSTALLATION, REPO, 1)
    assert [(t["isResolved"], t["resolvedBy"]) for t in threads] == [(True, {"login": "maintainer"}), (False, None)]
    await c.resolve_review_thread(INSTALLATION, REPO, threads[1]["id"])
    threads = await c.review_threads(INSTALLATION, REPO, 1)
    assert [(t["isResolved"], t["resolvedBy"]) for t in threads] == [(True, {"login": "maintainer"}), (True, None)]
    assert fake.review_threads.rejected == []
