"""The GraphQL calls the app makes for review threads, checked against GitHub's published schema by the fake GitHub
(tests/fakes/github/graphql.py): listing threads, resolving one, replying in one, and how failures are mapped."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from reviewer_app.core.errors import PermanentError, TransientError
from reviewer_app.github.auth import AppCredentials
from reviewer_app.github.client import GRAPHQL_DOCUMENTS, GitHubClient, graphql_endpoint
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
    assert len(GRAPHQL_DOCUMENTS) == 3
    for document in GRAPHQL_DOCUMENTS:
        assert schema_errors(document) == [], document


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
    assert opened["databaseId"] == first
    assert opened["author"] == {"__typename": "Bot", "login": "reviewer-app"}  # GraphQL drops REST's "[bot]"
    assert (
        opened["originalLine"] == 2 and opened["pullRequestReview"]["databaseId"] == fake.reviews_for(REPO, 1)[0]["id"]
    )
    assert threads[1]["comments"]["totalCount"] == 2
    assert threads[1]["comments"]["nodes"][1]["author"] == {"__typename": "User", "login": "octocat"}

    await c.reply_in_thread(INSTALLATION, f"PRRT_{first}", "The code changed.")
    await c.resolve_review_thread(INSTALLATION, f"PRRT_{first}")

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
        await c._graphql("query { viewer { nope } }", installation_id=INSTALLATION, what="a test", write=False)
    assert fake.review_threads.rejected


async def test_an_unknown_thread_is_githubs_not_found(gh) -> None:
    fake, url, session = gh
    with pytest.raises(PermanentError, match="Could not resolve"):
        await client(fake, url, session).resolve_review_thread(INSTALLATION, "PRRT_404")
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
        await c.resolve_review_thread(INSTALLATION, "PRRT_1")
    assert mutation.hits == 1


async def test_a_hanging_graphql_call_times_out_as_transient(gh) -> None:
    fake, url, session = gh
    fault = fake.inject("POST", r"^/graphql$", "hang", times=None)
    with pytest.raises(TransientError):
        await client(fake, url, session, request_timeout=0.1).review_threads(INSTALLATION, REPO, 1)
    assert fault.hits == 3
    fake.release_hangs()
