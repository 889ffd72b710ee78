"""Tokens as narrow as the work (reviewer_app/github/scopes.py): each installation token is minted for one repository
and one kind of work's permissions, and the fake GitHub refuses anything past them as GitHub does (404 for another
repository, 403 for a permission the token lacks), so every test of the suite fails if a call needs more than its
token has."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from reviewer_app.core.errors import PermanentError
from reviewer_app.core.states import JobState
from reviewer_app.github.auth import AppCredentials
from reviewer_app.github.client import GitHubClient
from reviewer_app.github.scopes import APP_PERMISSIONS, WORK_PERMISSIONS, acting_as, token_request
from tests.fakes.github import FakeGitHub, added_file, running
from tests.harness import REPO, harness

OTHER = "octo-org/private"


def test_each_kind_of_work_asks_for_a_subset_of_the_apps_permissions() -> None:
    order = {"read": 1, "write": 2}
    for work, permissions in WORK_PERMISSIONS.items():
        assert all(order[level] <= order[APP_PERMISSIONS[name]] for name, level in permissions.items()), work
    assert "checks" not in WORK_PERMISSIONS["answer"]  # an answer never touches a check run
    assert all(level == "read" for level in WORK_PERMISSIONS["sweep"].values())  # the sweep writes nothing
    assert token_request("octo-org/widgets", "answer") == {
        "permissions": dict(WORK_PERMISSIONS["answer"]),
        "repositories": ["widgets"],
    }
    with pytest.raises(ValueError), acting_as("everything"):
        pass


@pytest.fixture
async def env() -> AsyncIterator[tuple[FakeGitHub, GitHubClient, int]]:
    fake = FakeGitHub()
    inst = fake.add_installation()
    fake.add_repo(REPO, inst.id)
    fake.add_repo(OTHER, inst.id)  # the same installation: a token for all of it could read this one
    for repo in (REPO, OTHER):
        fake.add_pull(repo, 1, files=[added_file("a.py", ["x = 1"])])
    async with running(fake) as url, aiohttp.ClientSession() as session:
        credentials = AppCredentials(str(fake.app_id), fake.private_key)
        yield fake, GitHubClient(session, url, credentials, read_retry_delays=()), inst.id


async def test_a_token_for_one_repository_cannot_reach_another(env) -> None:
    fake, client, inst = env
    await client.get_pull(inst, REPO, 1)
    [token] = [t for t, issued in fake.tokens.items() if issued.repositories == frozenset({"widgets"})]
    async with aiohttp.ClientSession() as session:
        headers = {
            "Authorization": f"token {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        }
        async with session.get(f"{fake.base_url}/repos/{OTHER}/pulls/1", headers=headers) as r:
            assert r.status == 404  # GitHub does not say the repository exists
        query = '{ repository(owner: "octo-org", name: "private") { pullRequest(number: 1) { id } } }'
        async with session.post(f"{fake.base_url}/graphql", json={"query": query}, headers=headers) as r:
            assert "Could not resolve to a Repository" in (await r.json())["errors"][0]["message"]


async def test_a_permission_the_work_lacks_is_refused_as_github_refuses_it(env) -> None:
    fake, client, inst = env
    with acting_as("sweep"):  # the sweep reads; it never creates a check run
        await client.list_open_pulls(inst, REPO)
        with pytest.raises(PermanentError, match="Resource not accessible by integration"):
            await client.create_check_run(inst, REPO, name="x", head_sha=fake.pulls[(REPO, 1)].head_sha)
    assert fake.token_requests[-1] == {"permissions": dict(WORK_PERMISSIONS["sweep"]), "repositories": ["widgets"]}


async def test_tokens_are_cached_per_repository_and_kind_of_work(env) -> None:
    fake, client, inst = env
    for _ in range(3):
        await client.get_pull(inst, REPO, 1)
        await client.get_pull(inst, OTHER, 1)
        with acting_as("answer"):
            await client.get_pull(inst, REPO, 1)
    assert fake.counters["access_tokens"] == 3


async def test_a_repository_the_installation_cannot_see_gets_no_token(env) -> None:
    fake, client, inst = env
    fake.add_installation(88, "someone-else")
    fake.add_repo("someone-else/secrets", 88)
    with pytest.raises(PermanentError, match="not found in installation"):
        await client.get_pull(inst, "someone-else/secrets", 1)
    assert fake.counters["access_tokens"] == 0


async def test_a_review_runs_on_tokens_for_its_repository_and_a_review_s_permissions(tmp_path) -> None:
    async with harness(tmp_path) as h:
        h.github.add_repo(OTHER, h.installation_id)
        _, job_id = await h.open_pr()
        await h.wait_state(job_id, JobState.SUCCEEDED)
        await h.wait_check_synced(job_id)
        requests = h.github.token_requests
        assert requests and all(r.get("repositories") == ["widgets"] for r in requests), requests
        kinds = {tuple(sorted(r["permissions"].items())) for r in requests}
        allowed = {tuple(sorted(WORK_PERMISSIONS[w].items())) for w in ("review", "checks", "outbox")}
        assert kinds <= allowed and tuple(sorted(WORK_PERMISSIONS["review"].items())) in kinds
