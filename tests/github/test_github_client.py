"""GitHubClient against the fake GitHub over real HTTP: auth, token renewal, retries, error mapping."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from reviewer_app.core.errors import JobError, PermanentError, RateLimited, TransientError
from reviewer_app.github.auth import AppCredentials
from reviewer_app.github.client import GitHubClient, redact
from tests.fakes.github import FakeGitHub, added_file, pull_file, running

REPO = "octo-org/widgets"
INSTALLATION = 77
START = 1_700_000_000.0


class FakeClock:
    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@functools.lru_cache
def credentials(app_id: int, private_key: str) -> AppCredentials:
    """One credentials object per key for the session: parsing a PEM key costs ~60 ms."""
    return AppCredentials(str(app_id), private_key)


@dataclass
class Env:
    fake: FakeGitHub
    client: GitHubClient
    clock: FakeClock
    make_client: Callable[..., GitHubClient]


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    clock = FakeClock()
    fake = FakeGitHub(clock=clock)
    fake.add_installation(INSTALLATION, "octo-org")
    fake.add_repo(REPO, INSTALLATION)
    fake.add_pull(REPO, 1, files=[added_file("src/app.py", ["import os", "print(os.name)", ""])])
    async with running(fake) as url, aiohttp.ClientSession() as session:

        def make_client(**overrides: Any) -> GitHubClient:
            options: dict[str, Any] = {"clock": clock, "read_retry_delays": (0, 0), "request_timeout": 5}
            options.update(overrides)
            return GitHubClient(session, url, credentials(fake.app_id, fake.private_key), **options)

        yield Env(fake, make_client(), clock, make_client)


def pull_requests(fake: FakeGitHub, number: int = 1) -> list[int]:
    return [r.status for r in fake.requests_matching("GET", rf"/pulls/{number}$")]


async def test_app_info_gives_bot_login_and_is_fetched_once(env: Env) -> None:
    assert await env.client.bot_login() == "reviewer-app[bot]"
    assert (await env.client.app_info())["id"] == env.fake.app_id
    assert len(env.fake.requests_matching("GET", r"^/app$")) == 1
    assert env.fake.requests_matching("GET", r"^/app$")[0].auth == "jwt"


async def test_every_call_names_the_media_type_and_api_version(env: Env) -> None:
    # The fake refuses a call without them; the token fetch goes through gidgethub's own helper.
    await env.client.app_info()
    await env.client.get_pull(INSTALLATION, REPO, 1)
    await env.client.create_issue_comment(INSTALLATION, REPO, 1, "hello")
    assert [r.status for r in env.fake.requests] == [200, 201, 200, 201]
    assert env.fake.counters["bad_api_headers"] == 0


async def test_token_is_fetched_once_for_many_calls(env: Env) -> None:
    for _ in range(5):
        await env.client.get_pull(INSTALLATION, REPO, 1)
    await env.client.list_reviews(INSTALLATION, REPO, 1)
    assert env.fake.counters["access_tokens"] == 1


async def test_concurrent_callers_share_one_token_fetch(env: Env) -> None:
    await asyncio.gather(*(env.client.get_pull(INSTALLATION, REPO, 1) for _ in range(10)))
    assert env.fake.counters["access_tokens"] == 1


async def test_token_renewed_before_expiry_during_a_long_job(env: Env) -> None:
    env.fake.token_lifetime = 600  # renewal margin is 300 s, so a token serves 300 s of the clock
    for _ in range(12):
        env.clock.advance(100)
        pull = await env.client.get_pull(INSTALLATION, REPO, 1)
        assert pull["number"] == 1
    assert env.fake.counters["access_tokens"] == 4  # fetched at t=100, 400, 700, 1000
    assert env.fake.counters["expired_token_requests"] == 0
    # Answered every time: in full under each new token (GitHub's ETags vary by token), else 304, unchanged.
    assert pull_requests(env.fake) == [200, 304, 304, 200, 304, 304, 200, 304, 304, 200, 304, 304]


async def test_after_a_full_page_answered_304_the_next_page_its_kept_copy_never_named_is_read(env: Env) -> None:
    # GitHub's ETag covers the body, not the Link header: page 1 of 100 reviews is unchanged when a 101st lands on
    # page 2, so it is answered 304, and the kept copy said there was no next page.
    for n in range(100):
        env.fake.add_review_by(REPO, 1, f"person{n}", f"review {n}")
    assert len(await env.client.list_reviews(INSTALLATION, REPO, 1)) == 100
    env.fake.add_review_by(REPO, 1, "late", "the 101st")
    reviews = await env.client.list_reviews(INSTALLATION, REPO, 1)
    assert len(reviews) == 101 and reviews[-1]["body"] == "the 101st"
    assert len(await env.client.list_reviews(INSTALLATION, REPO, 1)) == 101  # both pages kept: both answer 304
    pages = [(r.query.get("page"), r.status) for r in env.fake.requests_matching("GET", r"/pulls/1/reviews$")]
    assert pages == [(None, 200), (None, 304), ("2", 200), (None, 304), ("2", 304)]


async def test_a_fresh_list_sends_no_conditional_request(env: Env) -> None:
    await env.client.list_reviews(INSTALLATION, REPO, 1)
    await env.client.list_reviews(INSTALLATION, REPO, 1, fresh=True)
    await env.client.list_reviews(INSTALLATION, REPO, 1)
    assert [r.status for r in env.fake.requests_matching("GET", r"/pulls/1/reviews$")] == [200, 200, 304]


async def test_401_drops_the_token_and_retries_once(env: Env) -> None:
    await env.client.get_pull(INSTALLATION, REPO, 1)
    env.fake.revoke_tokens()
    await env.client.get_pull(INSTALLATION, REPO, 1)
    assert pull_requests(env.fake) == [200, 401, 200]
    assert env.fake.counters["access_tokens"] == 2


async def test_persistent_401_is_retried_only_once(env: Env) -> None:
    fault = env.fake.inject("GET", r"/pulls/1$", "unauthorized", times=None)
    with pytest.raises(PermanentError, match="credentials"):
        await env.client.get_pull(INSTALLATION, REPO, 1)
    assert fault.hits == 2
    assert env.fake.counters["access_tokens"] == 2


async def test_500_on_a_read_is_retried_in_place(env: Env) -> None:
    fault = env.fake.inject("GET", r"/pulls/1$", "error", times=2, status=500)
    pull = await env.client.get_pull(INSTALLATION, REPO, 1)
    assert pull["head"]["sha"] == env.fake.pulls[(REPO, 1)].head_sha
    assert fault.hits == 2
    assert pull_requests(env.fake) == [500, 500, 200]


async def test_persistent_5xx_becomes_transient_error(env: Env) -> None:
    fault = env.fake.inject("GET", r"/pulls/1$", "error", times=None, status=502)
    with pytest.raises(TransientError, match="502"):
        await env.client.get_pull(INSTALLATION, REPO, 1)
    assert fault.hits == 3  # one try and two retries


async def test_write_is_not_retried_in_place(env: Env) -> None:
    fault = env.fake.inject("POST", r"/issues/1/comments$", "error", times=1, status=500)
    with pytest.raises(TransientError):
        await env.client.create_issue_comment(INSTALLATION, REPO, 1, "hello")
    assert fault.hits == 1
    assert env.fake.issue_comments_for(REPO, 1) == []


async def test_hang_becomes_transient_error_through_the_timeout(env: Env) -> None:
    client = env.make_client(request_timeout=0.1)
    fault = env.fake.inject("GET", r"/pulls/1$", "hang", times=None)
    with pytest.raises(TransientError, match="in time"):
        await client.get_pull(INSTALLATION, REPO, 1)
    assert fault.hits == 3


@pytest.mark.parametrize(
    ("fault", "params", "wait"),
    [
        ("secondary_rate_limit", {"retry_after": 120}, 120),
        ("secondary_rate_limit", {"retry_after": None}, 60),  # no hint: at least a minute
        ("secondary_rate_limit", {"retry_after": 30, "status": 429}, 30),
        ("too_many_requests", {"retry_after": 45}, 45),
        ("primary_rate_limit", {"reset": START + 900}, 900),
    ],
)
async def test_rate_limits_become_rate_limited_with_retry_at(
    env: Env, fault: str, params: dict[str, Any], wait: float
) -> None:
    injected = env.fake.inject("GET", r"/pulls/1$", fault, times=None, **params)
    with pytest.raises(RateLimited) as caught:
        await env.client.get_pull(INSTALLATION, REPO, 1)
    assert caught.value.retry_at == START + wait
    assert injected.hits == 1  # never retried in place: the dispatcher waits instead


async def test_missing_pull_is_permanent(env: Env) -> None:
    with pytest.raises(PermanentError, match="not found"):
        await env.client.get_pull(INSTALLATION, REPO, 99)


async def test_repo_outside_the_installation_is_permanent(env: Env) -> None:
    env.fake.add_installation(88, "someone-else")
    env.fake.add_repo("someone-else/private", 88)
    with pytest.raises(PermanentError, match="not found"):
        await env.client.get_pull(INSTALLATION, "someone-else/private", 1)


async def test_suspended_installation_is_permanent(env: Env) -> None:
    env.fake.suspend_installation(INSTALLATION)
    with pytest.raises(PermanentError, match="suspended"):
        await env.client.get_pull(INSTALLATION, REPO, 1)


async def test_unprocessable_review_is_permanent_with_githubs_message(env: Env) -> None:
    head = env.fake.pulls[(REPO, 1)].head_sha
    with pytest.raises(PermanentError, match="must be part of the diff"):
        await env.client.create_review(
            INSTALLATION,
            REPO,
            1,
            commit_id=head,
            body="x",
            comments=[{"path": "src/app.py", "line": 40, "side": "RIGHT", "body": "no such line"}],
        )
    assert env.fake.reviews_for(REPO, 1) == []


async def test_pull_files_are_paginated(env: Env) -> None:
    files = [pull_file(f"f{i:03}.txt", f"@@ -1 +1 @@\n-a\n+{i}") for i in range(250)]
    env.fake.add_pull(REPO, 2, files=files)
    listed = await env.client.list_pull_files(INSTALLATION, REPO, 2)
    assert [f["filename"] for f in listed] == [f"f{i:03}.txt" for i in range(250)]
    pages = env.fake.requests_matching("GET", r"/pulls/2/files$")
    assert [r.query.get("page", "1") for r in pages] == ["1", "2", "3"]


async def test_lost_response_on_review_post_raises_but_the_review_exists(env: Env) -> None:
    head = env.fake.pulls[(REPO, 1)].head_sha
    fault = env.fake.inject("POST", r"/pulls/1/reviews$", "lost_response")
    with pytest.raises(TransientError):
        await env.client.create_review(
            INSTALLATION,
            REPO,
            1,
            commit_id=head,
            body="Looks fine <!-- marker:1 -->",
            comments=[{"path": "src/app.py", "line": 2, "side": "RIGHT", "body": "nice"}],
        )
    assert fault.hits == 1
    [review] = env.fake.reviews_for(REPO, 1)
    assert review["user"]["login"] == "reviewer-app[bot]"
    assert "marker:1" in review["body"]


async def test_writes_of_one_installation_go_out_one_at_a_time(env: Env) -> None:
    env.fake.inject("POST", r"/issues/1/comments$", "hang", times=None, delay=0.03)
    await asyncio.gather(*(env.client.create_issue_comment(INSTALLATION, REPO, 1, f"c{i}") for i in range(4)))
    assert len(env.fake.issue_comments_for(REPO, 1)) == 4
    assert env.fake.max_concurrent_writes[INSTALLATION] == 1


async def test_no_secret_reaches_errors_or_logs(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client = env.make_client(request_timeout=0.1)
    head = env.fake.pulls[(REPO, 1)].head_sha
    errors: list[JobError] = []
    await client.get_pull(INSTALLATION, REPO, 1)
    env.fake.revoke_tokens()
    env.fake.inject("GET", r"/pulls/1$", "error", times=None)
    env.fake.inject("GET", r"/reviews$", "secondary_rate_limit")
    env.fake.inject("GET", r"/comments$", "hang", times=None)
    env.fake.inject("POST", r"/reviews$", "lost_response")
    calls = [
        client.get_pull(INSTALLATION, REPO, 1),
        client.list_reviews(INSTALLATION, REPO, 1),
        client.list_issue_comments(INSTALLATION, REPO, 1),
        client.create_review(INSTALLATION, REPO, 1, commit_id=head, body="b"),
        client.create_review(INSTALLATION, REPO, 1, commit_id="0" * 40, body="b"),
        client.get_pull(INSTALLATION, REPO, 404),
    ]
    for call in calls:
        with pytest.raises(JobError) as caught:
            await call
        errors.append(caught.value)
    env.fake.suspend_installation(INSTALLATION)
    client.tokens.invalidate(INSTALLATION)
    with pytest.raises(PermanentError) as suspended:
        await client.get_pull(INSTALLATION, REPO, 1)
    errors.append(suspended.value)

    secrets = [*env.fake.issued_tokens, env.fake.private_key.splitlines()[1]]
    assert len(env.fake.issued_tokens) >= 2
    texts = [caplog.text, repr(client.tokens._cache), repr(AppCredentials("1", env.fake.private_key))]
    texts += [f"{e!s} {e!r} {e.reason} {e.__cause__!r}" for e in errors]
    for text in texts:
        for secret in secrets:
            assert secret not in text
        assert "eyJ" not in text and "PRIVATE KEY" not in text


def test_redact_scrubs_tokens_jwts_and_keys() -> None:
    text = "token ghs_abc123XYZ and eyJhbGciOi.eyJpc3Mi.c2lnbmF0dXJl and raw-secret"
    assert redact(text, ["raw-secret"]) == "token <redacted> and <redacted> and <redacted>"


async def test_check_runs_round_trip(env: Env) -> None:
    head = env.fake.pulls[(REPO, 1)].head_sha
    run = await env.client.create_check_run(
        INSTALLATION,
        REPO,
        name="AI review",
        head_sha=head,
        external_id="job-1",
        output={"title": "Reviewing", "summary": "started"},
    )
    assert run["status"] == "in_progress"
    await env.client.update_check_run(
        INSTALLATION,
        REPO,
        run["id"],
        status="completed",
        conclusion="success",
        output={"title": "Done", "summary": "3 comments"},
    )
    [listed] = await env.client.list_check_runs_for_ref(INSTALLATION, REPO, head, check_name="AI review")
    assert (listed["id"], listed["conclusion"], listed["external_id"]) == (run["id"], "success", "job-1")
    assert listed["app"]["id"] == env.fake.app_id
    newer = await env.client.create_check_run(INSTALLATION, REPO, name="AI review", head_sha=head, external_id="job-2")
    every = await env.client.list_check_runs_for_ref(INSTALLATION, REPO, head, check_name="AI review")
    assert [r["external_id"] for r in every] == ["job-2", "job-1"]  # older runs stay visible for reconciling
    latest = await env.client.list_check_runs_for_ref(INSTALLATION, REPO, head, latest_only=True)
    assert [r["id"] for r in latest] == [newer["id"]]
    assert await env.client.list_check_runs_for_ref(INSTALLATION, REPO, head, check_name="other") == []


async def test_reads_of_contents_compare_permission_and_pulls(env: Env) -> None:
    env.fake.set_file(REPO, ".github/reviewer.yml", "max_files: 10\n")
    assert await env.client.get_file_content(INSTALLATION, REPO, ".github/reviewer.yml", "main") == "max_files: 10\n"
    assert await env.client.get_file_content(INSTALLATION, REPO, "absent.yml", "main") is None
    old = env.fake.pulls[(REPO, 1)].head_sha
    new = env.fake.advance_head(REPO, 1)
    assert (await env.client.compare(INSTALLATION, REPO, old, new))["status"] == "ahead"
    env.fake.set_permission(REPO, "maintainer", "write")
    assert await env.client.collaborator_permission(INSTALLATION, REPO, "maintainer") == "write"
    assert await env.client.collaborator_permission(INSTALLATION, REPO, "stranger") == "none"
    env.fake.add_pull(REPO, 2)
    env.fake.add_pull(REPO, 3, state="closed")
    assert sorted(p["number"] for p in await env.client.list_open_pulls(INSTALLATION, REPO)) == [1, 2]


async def test_comments_and_reactions(env: Env) -> None:
    comment = env.fake.add_issue_comment(REPO, 1, "alice", "/review")
    [listed] = await env.client.list_issue_comments(INSTALLATION, REPO, 1)
    assert listed["id"] == comment["id"]
    reaction = await env.client.create_reaction(INSTALLATION, REPO, comment["id"], "eyes")
    assert reaction["content"] == "eyes"
    assert [r["content"] for r in env.fake.reactions[comment["id"]]] == ["eyes"]


async def test_deliveries_paginate_by_cursor_and_redeliver(env: Env) -> None:
    ids = [env.fake.add_delivery("pull_request", "opened")["id"] for _ in range(5)]
    first = await env.client.list_app_deliveries(per_page=2)
    assert [d["id"] for d in first.deliveries] == ids[::-1][:2]
    assert first.next_cursor is not None
    second = await env.client.list_app_deliveries(per_page=2, cursor=first.next_cursor)
    assert [d["id"] for d in second.deliveries] == ids[::-1][2:4]
    await env.client.redeliver(ids[0])
    assert env.fake.redelivery_requests == [ids[0]]
    with pytest.raises(PermanentError, match="not found"):
        await env.client.redeliver(123456)


async def test_reactions_on_a_review_comment_are_read_every_page_with_githubs_ids(env: Env) -> None:
    # GitHub sends no webhook for a reaction: the app lists them. Each a person's, ids past 2**31, more than a page;
    # a comment of another kind (a conversation comment) is no review comment: 404.
    from pydantic import TypeAdapter

    from tests.fakes.github.routes.issues import add_reaction
    from tests.github.test_fake_schema import gh

    pull = env.fake.pulls[(REPO, 1)]
    await env.client.create_review(
        INSTALLATION,
        REPO,
        1,
        commit_id=pull.head_sha,
        body="review",
        comments=[{"path": "src/app.py", "line": 2, "side": "RIGHT", "body": "a finding"}],
    )
    [comment] = env.fake.review_comments_for(REPO, 1)
    for n in range(120):
        add_reaction(env.fake, comment["id"], f"user{n}", "-1" if n % 2 else "+1")
    add_reaction(env.fake, comment["id"], "user0", "+1")  # one reaction per kind and person: nothing new
    reactions = await env.client.list_review_comment_reactions(INSTALLATION, REPO, comment["id"])
    assert len(reactions) == 120 and len(env.fake.requests_matching("GET", r"/reactions$")) == 2
    assert [r["content"] for r in reactions[:3]] == ["+1", "-1", "+1"] and reactions[1]["user"]["login"] == "user1"
    assert all(r["id"] > 2**31 and r["user"]["id"] > 2**31 for r in reactions)
    TypeAdapter(list[gh.Reaction]).validate_python(reactions)
    conversation = env.fake.add_issue_comment(REPO, 1, "alice", "hello")
    with pytest.raises(PermanentError):
        await env.client.list_review_comment_reactions(INSTALLATION, REPO, conversation["id"])
