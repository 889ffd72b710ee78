"""Reading a review's files a hundred to a GraphQL query, and conditional reads: GitHubClient and ContentReader
against the fake GitHub over real HTTP (the fake serves blobs from GitHub's published schema and counts GraphQL
points and 304s as GitHub documents them)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import pytest
from graphql import parse

from reviewer_app.core.errors import RateLimited
from reviewer_app.github.auth import AppCredentials
from reviewer_app.github.client import GitHubClient
from reviewer_app.github.etags import EtagCache
from reviewer_app.github.graphql import blobs_query
from reviewer_app.review.reading import ContentReader, NotText
from tests.fakes.github import FakeGitHub, added_file, running
from tests.fakes.github.graphql import github_schema, schema_errors
from tests.fakes.github.graphql_cost import QueryLimitError, query_cost
from tests.fakes.github.shapes import blob_sha

REPO = "octo-org/widgets"
INSTALLATION = 77
CRAFTED = [
    'a".py',
    "b\\\\.py",
    'c") { viewer { login } } #.py',
    "d\n}\nquery X { viewer { login } }.py",
    "e{$e0}.py",
    "f:HEAD:g.py",
]


@dataclass
class Env:
    fake: FakeGitHub
    client: GitHubClient
    reader: ContentReader
    head: str


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    fake = FakeGitHub()
    fake.add_installation(INSTALLATION, "octo-org")
    fake.add_repo(REPO, INSTALLATION)
    pull = fake.add_pull(REPO, 1, files=[added_file("src/app.py", ["x = 1"])])
    async with running(fake) as url, aiohttp.ClientSession() as session:
        client = GitHubClient(
            session, url, AppCredentials(str(fake.app_id), fake.private_key), read_retry_delays=(0, 0)
        )
        yield Env(fake, client, ContentReader(client), pull.head_sha)


def graphql_posts(fake: FakeGitHub) -> int:
    return len(fake.requests_matching("POST", r"^/graphql$"))


def contents_reads(fake: FakeGitHub) -> int:
    return len(fake.requests_matching("GET", r"/contents/"))


async def test_files_are_read_a_hundred_to_a_graphql_query(env: Env) -> None:
    paths = [f"src/m{i}.py" for i in range(250)]
    for i, path in enumerate(paths):
        env.fake.set_file(REPO, path, f"x = {i}\n", ref=env.head)
    await env.reader.prefetch(INSTALLATION, REPO, [(p, env.head, None) for p in paths])
    texts = [await env.reader.read(INSTALLATION, REPO, p, env.head) for p in paths]
    assert texts == [f"x = {i}\n" for i in range(250)]
    assert graphql_posts(env.fake) == 3  # 100 + 100 + 50
    assert contents_reads(env.fake) == 0
    assert env.fake.review_threads.rejected == []


async def test_a_crafted_path_cannot_change_the_query(env: Env) -> None:
    for i, path in enumerate(CRAFTED):
        env.fake.set_file(REPO, path, f"crafted {i}\n", ref=env.head)
    await env.reader.prefetch(INSTALLATION, REPO, [(p, env.head, None) for p in CRAFTED])
    # The document the fake received is the one for that many files, whatever their names: they went as variables.
    assert env.fake.review_threads.documents == [blobs_query(len(CRAFTED))]
    for i, path in enumerate(CRAFTED):
        assert await env.reader.read(INSTALLATION, REPO, path, env.head) == f"crafted {i}\n"
    assert contents_reads(env.fake) == 0
    assert env.fake.review_threads.rejected == []


def test_the_blobs_query_is_valid_in_githubs_schema_at_every_size() -> None:
    for count in (1, 2, 100):
        assert schema_errors(blobs_query(count)) == []
        assert query_cost(github_schema(), parse(blobs_query(count)), {}).points == 1
    with pytest.raises(ValueError):
        blobs_query(101)


async def test_what_graphql_does_not_serve_whole_is_read_through_the_contents_route(env: Env) -> None:
    large = "".join(f"line {i:07d}\n" for i in range(50_000))  # 650,000 bytes: GitHub cuts Blob.text at 512,000
    env.fake.set_file(REPO, "big.txt", large, ref=env.head)
    env.fake.set_file(REPO, "logo.png", "PNG\x00\x01", ref=env.head)
    env.fake.set_file(REPO, "small.py", "ok\n", ref=env.head)
    wanted = [(p, env.head, None) for p in ("big.txt", "logo.png", "small.py", "gone.py")]
    await env.reader.prefetch(INSTALLATION, REPO, wanted)
    assert graphql_posts(env.fake) == 1

    assert await env.reader.read(INSTALLATION, REPO, "big.txt", env.head) == large  # the whole text, over REST
    assert [r.path for r in env.fake.requests_matching("GET", r"/contents/")] == [f"/repos/{REPO}/contents/big.txt"]
    with pytest.raises(NotText):  # GraphQL said binary: no second request to learn it again
        await env.reader.read(INSTALLATION, REPO, "logo.png", env.head)
    assert await env.reader.read(INSTALLATION, REPO, "gone.py", env.head) is None  # null object: no such file
    assert await env.reader.read(INSTALLATION, REPO, "small.py", env.head) == "ok\n"
    assert contents_reads(env.fake) == 1


async def test_a_written_replacement_character_is_text_and_bytes_that_are_not_utf8_are_not(env: Env) -> None:
    quoted = 'assert format_filename("/x/\\ufffd.txt") == "\ufffd.txt"\n'  # click's own test: U+FFFD, as UTF-8
    env.fake.set_file(REPO, "tests/test_utils.py", quoted, ref=env.head)
    env.fake.set_file(REPO, "legacy.txt", b"caf\xe9\n".decode("utf-8", "surrogateescape"), ref=env.head)  # Latin-1
    await env.reader.prefetch(INSTALLATION, REPO, [("tests/test_utils.py", env.head, None)])
    assert await env.reader.read(INSTALLATION, REPO, "tests/test_utils.py", env.head) == quoted  # over GraphQL
    fresh = ContentReader(env.client)
    assert await fresh.read(INSTALLATION, REPO, "tests/test_utils.py", env.head) == quoted  # over REST
    with pytest.raises(NotText):
        await fresh.read(INSTALLATION, REPO, "legacy.txt", env.head)


async def test_a_failed_graphql_read_falls_back_to_one_request_per_file(env: Env) -> None:
    env.fake.set_file(REPO, "a.py", "a\n", ref=env.head)
    env.fake.inject("POST", r"^/graphql$", "error", times=None, status=502)
    await env.reader.prefetch(INSTALLATION, REPO, [("a.py", env.head, None)])
    assert await env.reader.read(INSTALLATION, REPO, "a.py", env.head) == "a\n"
    assert contents_reads(env.fake) == 1


async def test_graphql_requests_are_counted_in_points_under_their_own_resource(env: Env) -> None:
    env.fake.set_file(REPO, "a.py", "a\n", ref=env.head)
    await env.reader.prefetch(INSTALLATION, REPO, [("a.py", env.head, None)])
    answer = env.fake.requests_matching("POST", r"^/graphql$")[-1].response_json
    assert answer["data"]["rateLimit"] == {"cost": 1, "remaining": 4999}
    await env.client.get_pull(INSTALLATION, REPO, 1)
    used = {(resource, n) for (_, resource, _), n in env.fake.rate_limits.used.items() if resource != "core" or n}
    assert ("graphql", 1) in used


def test_query_cost_follows_githubs_documented_examples() -> None:
    schema = github_schema()
    # GitHub's "simple query": 50 repositories + 50 x 10 issues = 550 nodes; 1 + 50 requests / 100 rounds to 1 point.
    simple = "query { viewer { repositories(first: 50) { nodes { name issues(first: 10) { totalCount nodes { title } } } } } }"
    cost = query_cost(schema, parse(simple), {})
    assert (cost.nodes, cost.points) == (550, 1)
    # 1 + 100 + 100 x 100 requests: 101 points; 100 + 10,000 + 1,000,000 nodes is past the 500,000 limit.
    heavy = (
        "query($n: Int!) { viewer { repositories(first: $n) { nodes { issues(first: 100) { nodes {"
        " comments(first: 100) { nodes { body } } } } } } } }"
    )
    with pytest.raises(QueryLimitError):
        query_cost(schema, parse(heavy), {"n": 100})
    assert query_cost(schema, parse(heavy), {"n": 40}).points == round((1 + 40 + 4000) / 100)
    with pytest.raises(QueryLimitError):  # every connection says first or last
        query_cost(schema, parse("query { viewer { repositories { totalCount } } }"), {})


async def test_a_repeated_read_is_conditional_and_its_304_is_used(env: Env) -> None:
    first = await env.client.get_pull(INSTALLATION, REPO, 1)
    core = sum(n for (_, resource, _), n in env.fake.rate_limits.used.items() if resource == "core")
    again = await env.client.get_pull(INSTALLATION, REPO, 1)
    reads = env.fake.requests_matching("GET", r"/pulls/1$")
    assert [r.status for r in reads] == [200, 304]
    assert again == first
    assert sum(n for (_, resource, _), n in env.fake.rate_limits.used.items() if resource == "core") == core
    again["title"] = "changed by a caller"  # a caller's change never reaches the copy a 304 stands for
    assert (await env.client.get_pull(INSTALLATION, REPO, 1))["title"] == first["title"]
    env.fake.advance_head(REPO, 1)
    moved = await env.client.get_pull(INSTALLATION, REPO, 1)
    assert moved["head"]["sha"] != first["head"]["sha"]
    assert [r.status for r in env.fake.requests_matching("GET", r"/pulls/1$")] == [200, 304, 304, 200]


async def test_a_commits_file_is_not_read_conditionally_but_the_config_on_a_branch_is(env: Env) -> None:
    env.fake.set_file(REPO, ".github/reviewer.yml", "nits: fold\n")
    for _ in range(2):
        assert await env.client.get_file_content(INSTALLATION, REPO, ".github/reviewer.yml", "main") == "nits: fold\n"
        await env.client.get_file_content(INSTALLATION, REPO, "src/app.py", env.head)
    statuses = {r.path: [] for r in env.fake.requests}
    for r in env.fake.requests_matching("GET", r"/contents/"):
        statuses[r.path].append(r.status)
    assert statuses[f"/repos/{REPO}/contents/.github/reviewer.yml"] == [200, 304]
    assert statuses[f"/repos/{REPO}/contents/src/app.py"] == [404, 404]


def test_the_etag_cache_is_bounded_by_the_bodies_it_keeps() -> None:
    cache = EtagCache(max_bytes=4096)
    for i in range(20):
        cache[f"/u/{i}"] = ('W/"x"', None, {"body": "y" * 500}, None)
    assert cache.size <= 4096
    assert "/u/19" in cache and "/u/0" not in cache
    cache["/huge"] = ('W/"h"', None, {"body": "z" * 10_000}, None)
    assert "/huge" not in cache


async def test_a_file_past_what_both_routes_serve_is_reported_unreadable(env: Env) -> None:
    huge = "x" * (1024 * 1024 + 1)  # GraphQL cuts it, and the contents route sends no content past 1 MB
    env.fake.set_file(REPO, "huge.txt", huge, ref=env.head)
    await env.reader.prefetch(INSTALLATION, REPO, [("huge.txt", env.head, None)])
    text, why = await env.reader.try_read(INSTALLATION, REPO, "huge.txt", env.head)
    assert text is None and "larger than the API's 1 MB" in str(why)
    assert (graphql_posts(env.fake), contents_reads(env.fake)) == (1, 1)


async def test_a_graphql_rate_limit_makes_the_review_wait_rather_than_read_file_by_file(env: Env) -> None:
    env.fake.set_file(REPO, "a.py", "a\n", ref=env.head)
    env.fake.rate_limits.used[(str(INSTALLATION), "graphql", int(env.fake.clock()) // 3600)] = 5000
    with pytest.raises(RateLimited):
        await env.reader.prefetch(INSTALLATION, REPO, [("a.py", env.head, None)])
    assert contents_reads(env.fake) == 0


@pytest.mark.parametrize("prefetched", [False, True])
async def test_a_file_read_under_a_stale_blob_sha_is_kept_under_the_blob_github_sent(
    env: Env, prefetched: bool
) -> None:
    # The reader kept what it read at a commit under whatever blob SHA the caller named: a file list older than the
    # commit named the old blob, and the new text was served for that blob later.
    older = env.fake.add_commit(REPO)
    env.fake.set_file(REPO, "src/app.py", "x = 1\n", ref=older)
    env.fake.set_file(REPO, "src/app.py", "x = 2\n", ref=env.head)
    stale = blob_sha("x = 1\n")
    if prefetched:
        await env.reader.prefetch(INSTALLATION, REPO, [("src/app.py", env.head, stale)])
    assert await env.reader.read(INSTALLATION, REPO, "src/app.py", env.head, blob_sha=stale) == "x = 2\n"
    assert await env.reader.read(INSTALLATION, REPO, "src/app.py", older, blob_sha=stale) == "x = 1\n"
    # Kept by what was read: the new blob is served from the cache, for any commit that names it.
    reads = env.reader.fetches
    assert await env.reader.read(INSTALLATION, REPO, "src/app.py", "f" * 40, blob_sha=blob_sha("x = 2\n")) == "x = 2\n"
    assert env.reader.fetches == reads
