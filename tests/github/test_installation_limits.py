"""One installation's rate limit is that installation's: the check-run sync and the outbox skip it until its reset
and carry on with the others (issue #38, point 4), against the fake GitHub over HTTP and a real store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import pytest

from reviewer_app.core.admission import Effect, Enqueue, JobSpec, Reply
from reviewer_app.github.auth import AppCredentials
from reviewer_app.github.checks import CheckRuns
from reviewer_app.github.client import GitHubClient
from reviewer_app.github.outbox import OutboxSender
from reviewer_app.store.base import Delivery
from tests.fakes.github import FakeGitHub, running

START = 1_800_000_000.0
LIMITED, OTHER = "octo-org/widgets", "other-org/gadgets"


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


@dataclass
class Two:
    fake: FakeGitHub
    client: GitHubClient
    clock: Clock
    limited: int  # installation ids
    other: int


@pytest.fixture
async def two() -> AsyncIterator[Two]:
    clock = Clock()
    fake = FakeGitHub(clock=clock)
    limited, other = fake.add_installation(account="octo-org"), fake.add_installation(account="other-org")
    fake.add_repo(LIMITED, limited.id)
    fake.add_repo(OTHER, other.id)
    async with running(fake) as url, aiohttp.ClientSession() as session:
        client = GitHubClient(
            session, url, AppCredentials(str(fake.app_id), fake.private_key), clock=clock, read_retry_delays=(0, 0)
        )
        yield Two(fake, client, clock, limited.id, other.id)


async def enqueue(store, two: Two, repo: str, pr: int) -> int:
    installation = two.limited if repo == LIMITED else two.other
    pull = two.fake.add_pull(repo, pr)
    spec = JobSpec(
        repo_id=two.fake.repos[repo].id,
        repo_full_name=repo,
        installation_id=installation,
        pr_number=pr,
        head_sha=pull.head_sha,
    )
    result = await store.admit(
        Delivery(f"d-{repo}-{pr}", "pull_request", "opened"), Enqueue(spec), now=START, max_attempts=3
    )
    return result.job_id


@pytest.mark.parametrize("fault", ["primary_rate_limit", "secondary_rate_limit"])
async def test_a_rate_limited_installation_does_not_hold_back_the_others_check_runs(store, two: Two, fault) -> None:
    limit = two.fake.inject("*", rf"^/repos/{LIMITED}/", fault, times=None, reset=START + 600, retry_after=600)
    first = await enqueue(store, two, LIMITED, 1)  # the oldest: the pass meets it first
    second = await enqueue(store, two, OTHER, 1)
    checks = CheckRuns(two.client, store, clock=two.clock)

    assert await checks.run_once() == 1
    assert (await store.get_job(second)).check_run_status == "queued:0"
    assert [r["status"] for r in two.fake.check_runs_for(OTHER, two.fake.pulls[(OTHER, 1)].head_sha)] == ["queued"]
    assert (await store.get_job(first)).check_run_id is None
    # Until its reset, the limited installation is not asked again; the others' new work goes on.
    hits = limit.hits
    third = await enqueue(store, two, OTHER, 2)
    assert await checks.run_once() == 1
    assert (await store.get_job(third)).check_run_status == "queued:0" and limit.hits == hits
    # After the reset it is tried again.
    two.fake.clear_faults()
    two.clock.now = START + 601
    assert await checks.run_once() == 1
    assert (await store.get_job(first)).check_run_status == "queued:0"


@pytest.mark.parametrize("fault", ["primary_rate_limit", "secondary_rate_limit"])
async def test_a_rate_limited_installation_does_not_hold_back_the_others_replies(store, two: Two, fault) -> None:
    limit = two.fake.inject("*", rf"^/repos/{LIMITED}/", fault, times=None, reset=START + 600, retry_after=600)
    for repo, installation in ((LIMITED, two.limited), (OTHER, two.other)):
        two.fake.add_pull(repo, 1)
        effect = Effect("comment", installation, repo, 1, f"help text for {repo}")
        await store.admit(
            Delivery(f"help-{repo}", "issue_comment", "created"), Reply("help", (effect,)), now=START, max_attempts=3
        )
    sender = OutboxSender(two.client, store, clock=two.clock)

    assert await sender.run_once() == 1
    assert [c["body"] for c in two.fake.issue_comments_for(OTHER, 1) if "help text" in c["body"]] != []
    [waiting] = await store.pending_effects()
    assert (waiting["repo_full_name"], waiting["attempts"]) == (LIMITED, 0)  # a wait is not a failed try
    hits = limit.hits
    assert await sender.run_once() == 0 and limit.hits == hits  # not asked again before its reset
    two.fake.clear_faults()
    two.clock.now = START + 601
    assert await sender.run_once() == 1
    assert await store.pending_effects() == []
