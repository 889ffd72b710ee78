"""The fake GitHub itself: JWT and token checks, review anchoring, pagination, and its fault injection."""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import jwt
import pytest
from gidgethub.apps import get_jwt

from tests.fakes.github import (
    API_HEADERS,
    FakeGitHub,
    FakeGitHubThread,
    added_file,
    commentable_lines,
    pull_file,
    running,
)
from tests.fakes.keys import test_key_pair

REPO = "octo-org/widgets"
PATCH = "@@ -1,4 +1,5 @@\n context one\n-removed two\n+added two\n+added three\n context four\n context five"


@dataclass
class Api:
    fake: FakeGitHub
    url: str
    session: aiohttp.ClientSession

    def app_jwt(self, private_key: str | None = None, iss: Any = None) -> str:
        return get_jwt(app_id=str(iss or self.fake.app_id), private_key=private_key or self.fake.private_key)

    async def token(self, installation_id: int = 77) -> str:
        status, body, _ = await self.call(
            "POST", f"/app/installations/{installation_id}/access_tokens", bearer=self.app_jwt()
        )
        assert status == 201, body
        return str(body["token"])

    async def call(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        bearer: str | None = None,
        json: Any = None,
        params: dict[str, str] | None = None,
    ) -> tuple[int, Any, Mapping[str, str]]:
        headers = dict(API_HEADERS)
        if token:
            headers["Authorization"] = f"token {token}"
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        async with self.session.request(method, self.url + path, headers=headers, json=json, params=params) as resp:
            return resp.status, await resp.json(), resp.headers


@pytest.fixture
async def api() -> AsyncIterator[Api]:
    fake = FakeGitHub()
    fake.add_installation(77, "octo-org")
    fake.add_repo(REPO, 77)
    fake.add_pull(REPO, 1, files=[pull_file("src/app.py", PATCH), {"filename": "logo.png", "status": "added"}])
    async with running(fake) as url, aiohttp.ClientSession() as session:
        yield Api(fake, url, session)


async def test_app_endpoint_accepts_the_apps_jwt_only(api: Api) -> None:
    status, body, headers = await api.call("GET", "/app", bearer=api.app_jwt())
    assert status == 200 and body["slug"] == "reviewer-app"
    assert headers["x-ratelimit-limit"] == "5000" and "x-ratelimit-reset" in headers

    other_key = test_key_pair("another app").private_pem
    status, body, _ = await api.call("GET", "/app", bearer=api.app_jwt(private_key=other_key))
    assert status == 401
    status, _, _ = await api.call("GET", "/app", bearer=api.app_jwt(iss=999))
    assert status == 401
    expired = jwt.encode(
        {"iat": int(time.time()) - 700, "exp": int(time.time()) - 60, "iss": str(api.fake.app_id)},
        api.fake.private_key,
        algorithm="RS256",
    )
    status, _, _ = await api.call("GET", "/app", bearer=expired)
    assert status == 401


async def test_installation_tokens(api: Api) -> None:
    status, _, _ = await api.call("POST", "/app/installations/999/access_tokens", bearer=api.app_jwt())
    assert status == 404
    api.fake.add_installation(88, "suspended-org")
    api.fake.suspend_installation(88)
    status, _, _ = await api.call("POST", "/app/installations/88/access_tokens", bearer=api.app_jwt())
    assert status == 403

    token = await api.token()
    status, _, _ = await api.call("GET", f"/repos/{REPO}/pulls/1", token=token)
    assert status == 200
    api.fake.add_repo("suspended-org/other", 88)
    status, _, _ = await api.call("GET", "/repos/suspended-org/other/pulls", token=token)
    assert status == 404  # a token only sees its own installation's repositories

    api.fake.expire_tokens()
    status, body, _ = await api.call("GET", f"/repos/{REPO}/pulls/1", token=token)
    assert (status, body["message"]) == (401, "Bad credentials")
    assert api.fake.counters["expired_token_requests"] == 1


def test_commentable_lines_follow_the_hunks() -> None:
    left, right = commentable_lines(PATCH)
    assert right == {1, 2, 3, 4, 5}
    assert left == {1, 2, 3, 4}
    left, right = commentable_lines("@@ -10,2 +20,2 @@\n a\n-b\n+c\n\\ No newline at end of file")
    assert (left, right) == ({10, 11}, {20, 21})


@pytest.mark.parametrize(
    ("comment", "ok"),
    [
        ({"path": "src/app.py", "line": 2, "side": "RIGHT"}, True),
        ({"path": "src/app.py", "line": 2, "side": "LEFT"}, True),
        ({"path": "src/app.py", "line": 9, "side": "RIGHT"}, False),
        ({"path": "src/app.py", "line": 5, "side": "LEFT"}, False),
        ({"path": "logo.png", "line": 1, "side": "RIGHT"}, False),  # no patch: nothing to anchor on
        ({"path": "absent.py", "line": 1, "side": "RIGHT"}, False),
    ],
)
async def test_review_comments_must_sit_on_the_diff(api: Api, comment: dict[str, Any], ok: bool) -> None:
    token = await api.token()
    head = api.fake.pulls[(REPO, 1)].head_sha
    review = {"commit_id": head, "body": "b", "event": "COMMENT", "comments": [{**comment, "body": "c"}]}
    status, body, _ = await api.call("POST", f"/repos/{REPO}/pulls/1/reviews", token=token, json=review)
    if ok:
        assert status == 200 and body["user"]["login"] == "reviewer-app[bot]" and body["state"] == "COMMENTED"
        assert len(api.fake.review_comments_for(REPO, 1)) == 1
    else:
        assert status == 422 and body["errors"]
        assert api.fake.reviews_for(REPO, 1) == []


TWO_HUNKS = "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n@@ -10,3 +10,4 @@\n j\n-k\n+K\n+K2\n l"


@pytest.mark.parametrize(
    ("comment", "ok"),
    [
        # LEFT takes a removed line or a context line by its old number, as GitHub does; never an added line's number.
        ({"line": 2, "side": "LEFT"}, True),
        ({"line": 11, "side": "LEFT"}, True),
        ({"line": 12, "side": "LEFT"}, True),
        ({"line": 13, "side": "LEFT"}, False),
        ({"line": 5, "side": "LEFT"}, False),
        # Multi-line: both ends in one hunk, the start strictly before the end.
        ({"start_line": 10, "start_side": "RIGHT", "line": 12, "side": "RIGHT"}, True),
        ({"start_line": 11, "start_side": "LEFT", "line": 12, "side": "RIGHT"}, True),
        ({"start_line": 3, "start_side": "RIGHT", "line": 11, "side": "RIGHT"}, False),
        ({"start_line": 12, "start_side": "RIGHT", "line": 12, "side": "RIGHT"}, False),
        ({"start_line": 12, "start_side": "RIGHT", "line": 11, "side": "RIGHT"}, False),
        ({"start_line": 5, "start_side": "RIGHT", "line": 11, "side": "RIGHT"}, False),
    ],
)
async def test_left_and_multi_line_comments_follow_githubs_rules(api: Api, comment: dict[str, Any], ok: bool) -> None:
    pull = api.fake.add_pull(REPO, 2, files=[pull_file("src/two.py", TWO_HUNKS)])
    token = await api.token()
    review = {
        "commit_id": pull.head_sha,
        "body": "b",
        "event": "COMMENT",
        "comments": [{"path": "src/two.py", **comment, "body": "c"}],
    }
    status, body, _ = await api.call("POST", f"/repos/{REPO}/pulls/2/reviews", token=token, json=review)
    assert (status == 200) == ok, body
    assert len(api.fake.review_comments_for(REPO, 2)) == (1 if ok else 0)


async def test_review_on_an_unknown_commit_is_unprocessable(api: Api) -> None:
    token = await api.token()
    review = {"commit_id": "f" * 40, "body": "b", "event": "COMMENT"}
    status, _, _ = await api.call("POST", f"/repos/{REPO}/pulls/1/reviews", token=token, json=review)
    assert status == 422


async def test_pagination_links_and_page_size(api: Api) -> None:
    api.fake.add_pull(REPO, 2, files=[added_file(f"f{i}.py", ["x"]) for i in range(205)])
    token = await api.token()
    status, body, headers = await api.call("GET", f"/repos/{REPO}/pulls/2/files", token=token)
    assert len(body) == 30 and 'rel="next"' in headers["Link"] and "page=7" in headers["Link"]
    _, body, headers = await api.call(
        "GET", f"/repos/{REPO}/pulls/2/files", token=token, params={"per_page": "500", "page": "3"}
    )
    assert len(body) == 5 and body[0]["filename"] == "f200.py"
    assert 'rel="next"' not in headers["Link"] and 'rel="prev"' in headers["Link"]


async def test_check_runs_list_latest_per_name(api: Api) -> None:
    token = await api.token()
    head = api.fake.pulls[(REPO, 1)].head_sha
    for name in ("review", "review", "lint"):
        status, _, _ = await api.call(
            "POST", f"/repos/{REPO}/check-runs", token=token, json={"name": name, "head_sha": head}
        )
        assert status == 201
    _, body, _ = await api.call("GET", f"/repos/{REPO}/commits/{head}/check-runs", token=token)
    assert body["total_count"] == 2
    _, body, _ = await api.call(
        "GET", f"/repos/{REPO}/commits/{head}/check-runs", token=token, params={"filter": "all", "check_name": "review"}
    )
    assert body["total_count"] == 2 and {r["name"] for r in body["check_runs"]} == {"review"}
    status, _, _ = await api.call(
        "PATCH", f"/repos/{REPO}/check-runs/{body['check_runs'][0]['id']}", token=token, json={"status": "completed"}
    )
    assert status == 422  # completed needs a conclusion


async def test_contents_and_compare(api: Api) -> None:
    api.fake.set_file(REPO, "docs/guide.md", "hello\n")
    token = await api.token()
    _, body, _ = await api.call("GET", f"/repos/{REPO}/contents/docs/guide.md", token=token, params={"ref": "main"})
    assert base64.b64decode(body["content"]) == b"hello\n"
    status, _, _ = await api.call("GET", f"/repos/{REPO}/contents/nope.md", token=token)
    assert status == 404
    old = api.fake.pulls[(REPO, 1)].head_sha
    pushed = api.fake.advance_head(REPO, 1)
    forced = api.fake.advance_head(REPO, 1, force=True)
    _, body, _ = await api.call("GET", f"/repos/{REPO}/compare/{old}...{pushed}", token=token)
    assert (body["status"], body["ahead_by"]) == ("ahead", 1)
    _, body, _ = await api.call("GET", f"/repos/{REPO}/compare/{pushed}...{forced}", token=token)
    assert body["status"] == "diverged"


async def test_lost_response_applies_the_write(api: Api) -> None:
    token = await api.token()
    api.fake.inject("POST", r"/issues/1/comments$", "lost_response")
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await api.call("POST", f"/repos/{REPO}/issues/1/comments", token=token, json={"body": "hi"})
    assert [c["body"] for c in api.fake.issue_comments_for(REPO, 1)] == ["hi"]


async def test_advance_head_fault_moves_the_head_after_serving(api: Api) -> None:
    token = await api.token()
    before = api.fake.pulls[(REPO, 1)].head_sha
    api.fake.inject("GET", r"/pulls/1$", "advance_head", new_sha="a" * 40)
    _, body, _ = await api.call("GET", f"/repos/{REPO}/pulls/1", token=token)
    assert body["head"]["sha"] == before
    assert api.fake.pulls[(REPO, 1)].head_sha == "a" * 40


async def test_faults_count_down_and_match_method_and_path(api: Api) -> None:
    token = await api.token()
    fault = api.fake.inject("GET", r"/pulls/1$", "error", times=2, status=502)
    statuses = [(await api.call("GET", f"/repos/{REPO}/pulls/1", token=token))[0] for _ in range(3)]
    assert statuses == [502, 502, 200] and fault.hits == 2
    api.fake.inject("GET", r"/pulls/1$", "primary_rate_limit", reset=1234)
    status, body, headers = await api.call("GET", f"/repos/{REPO}/pulls/1", token=token)
    assert (status, headers["x-ratelimit-remaining"], headers["x-ratelimit-reset"]) == (403, "0", "1234")
    api.fake.inject("*", r"/pulls/1$", "secondary_rate_limit", retry_after=7)
    status, body, headers = await api.call("GET", f"/repos/{REPO}/pulls/1", token=token)
    assert (status, headers["retry-after"]) == (403, "7") and "secondary rate limit" in body["message"]


async def test_threaded_server_serves_and_runs_calls_on_its_loop() -> None:
    fake = FakeGitHub()
    with FakeGitHubThread(fake) as server:
        server.call(fake.add_installation, 5, "octo-org")
        async with aiohttp.ClientSession() as session:
            token = get_jwt(app_id=str(fake.app_id), private_key=fake.private_key)
            async with session.post(
                f"{server.base_url}/app/installations/5/access_tokens",
                headers={**API_HEADERS, "Authorization": f"Bearer {token}"},
            ) as resp:
                assert resp.status == 201
        assert server.call(lambda: fake.counters["access_tokens"]) == 1


@pytest.mark.parametrize(
    ("drop", "replace", "status"),
    [
        ("Accept", None, 415),
        (None, {"Accept": "application/vnd.github.v3+json"}, 415),  # gidgethub's default, not the documented one
        ("X-GitHub-Api-Version", None, 400),
        (None, {"X-GitHub-Api-Version": "2020-01-01"}, 400),
    ],
)
async def test_api_calls_without_the_media_type_or_version_are_refused(api: Api, drop, replace, status) -> None:
    headers = {**API_HEADERS, "Authorization": f"Bearer {api.app_jwt()}", **(replace or {})}
    headers.pop(drop or "", None)
    async with api.session.get(api.url + "/app", headers=headers) as resp:
        assert resp.status == status
        assert "Accept" in (await resp.json())["message"] or "Version" in (await resp.json())["message"]
    assert api.fake.counters["bad_api_headers"] == 1


async def test_a_get_carries_an_etag_and_an_unchanged_answer_is_a_free_304(api: Api) -> None:
    token = await api.token()
    url, headers = f"{api.url}/repos/{REPO}/pulls/1", {**API_HEADERS, "Authorization": f"token {token}"}
    async with api.session.get(url, headers=headers) as first:
        tag, used = first.headers["ETag"], first.headers["x-ratelimit-used"]
    async with api.session.get(url, headers={**headers, "If-None-Match": tag}) as again:
        assert again.status == 304 and await again.read() == b""
        assert again.headers["ETag"] == tag and again.headers["x-ratelimit-used"] == used  # not counted
    other = {**API_HEADERS, "Authorization": f"token {await api.token()}", "If-None-Match": tag}
    async with api.session.get(url, headers=other) as renewed:
        assert renewed.status == 200  # GitHub's answers vary by Authorization: another token's copy is no match
    api.fake.advance_head(REPO, 1)
    async with api.session.get(url, headers={**headers, "If-None-Match": tag}) as moved:
        assert moved.status == 200 and moved.headers["ETag"] != tag


async def test_graphql_is_counted_in_points_under_its_own_resource_and_refused_past_the_limit(api: Api) -> None:
    token = await api.token()
    headers = {**API_HEADERS, "Authorization": f"token {token}"}
    query = {
        "query": 'query { rateLimit { cost remaining used } repository(owner: "octo-org", name: "widgets") {'
        ' object(expression: "main:README.md") { __typename } } }'
    }
    async with api.session.post(f"{api.url}/graphql", headers=headers, json=query) as resp:
        body = await resp.json()
        assert body["data"]["rateLimit"] == {"cost": 1, "remaining": 4999, "used": 1}
        assert resp.headers["x-ratelimit-resource"] == "graphql" and resp.headers["x-ratelimit-used"] == "1"
    api.fake.rate_limits.used[("77", "graphql", int(api.fake.clock()) // 3600)] = 5000
    async with api.session.post(f"{api.url}/graphql", headers=headers, json=query) as resp:
        body = await resp.json()
        assert resp.status == 200 and body["errors"][0]["type"] == "RATE_LIMITED" and "data" not in body
        assert resp.headers["x-ratelimit-remaining"] == "0"


async def test_review_comment_reactions_are_listed_filtered_and_refused_as_on_github(api: Api) -> None:
    # GitHub's "List reactions for a pull request review comment": the `content` filter, 422 for a reaction GitHub
    # does not have, 404 for a comment of another repository or kind.
    from tests.fakes.github.routes.issues import add_reaction

    api.fake.review_comments[(REPO, 1)] = [{"id": 2**33, "path": "src/app.py", "line": 2, "body": "finding"}]
    add_reaction(api.fake, 2**33, "alice", "-1")
    add_reaction(api.fake, 2**33, "bob", "+1")
    token = await api.token()
    path = f"/repos/{REPO}/pulls/comments/{2**33}/reactions"
    status, body, _ = await api.call("GET", path, token=token)
    assert status == 200 and [(r["user"]["login"], r["content"]) for r in body] == [("alice", "-1"), ("bob", "+1")]
    status, body, _ = await api.call("GET", path, token=token, params={"content": "-1"})
    assert status == 200 and [r["user"]["login"] for r in body] == ["alice"]
    status, _, _ = await api.call("GET", path, token=token, params={"content": "thumbsdown"})
    assert status == 422
    status, _, _ = await api.call("GET", f"/repos/{REPO}/pulls/comments/12345/reactions", token=token)
    assert status == 404
