"""GitHub requests per review do not grow with the pull request (issue 30): the whole app against the fake GitHub,
counted from the fake's request log. A review reads its files a hundred to a GraphQL query and repeats its reads of
the pull request, its reviews and the repository's config conditionally (a 304 costs no rate limit)."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from reviewer_app.core.states import JobState
from tests.fakes.github import Pull, RecordedRequest, pull_file
from tests.harness import REPO, Harness, harness

BUDGET = 15  # requests a review may cost the installation's rate limit, whatever its size (issue 30)
FIRST_BUDGET = 16  # ... the first review of a repository, which also fetches its archive (issue 40)


def module(index: int, changed: bool) -> str:
    """A small module; its head changes one line of the middle function."""
    lines = [f'"""Module {index}."""', ""]
    for f in range(5):
        body = f"    return {f} * {index}  # changed" if changed and f == 2 else f"    return {f} + {index}"
        lines += [f"def f{f}(x):", "    y = x + 1", body, ""]
    return "\n".join(lines) + "\n"


def module_patch(index: int) -> str:
    old, new = module(index, False).split("\n"), module(index, True).split("\n")
    at = next(i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b)
    start, after = max(at - 3, 0), old[at + 1 : at + 4]
    body = [" " + ln for ln in old[start:at]] + ["-" + old[at], "+" + new[at]] + [" " + ln for ln in after]
    count = at - start + 1 + len(after)
    return f"@@ -{start + 1},{count} +{start + 1},{count} @@\n" + "\n".join(body)


def sized_pull(h: Harness, number: int, files: int, *, first: int = 0) -> Pull:
    """A pull request changing one line in each of ``files`` modules (numbered from ``first``), their text on the
    fake at both commits."""
    numbers = range(first, first + files)
    paths = {i: f"src/pkg{i // 50}/mod_{i}.py" for i in numbers}
    pull = h.github.add_pull(REPO, number, files=[pull_file(paths[i], module_patch(i)) for i in numbers])
    for i in numbers:
        h.github.set_file(REPO, paths[i], module(i, True), ref=pull.head_sha)
        h.github.set_file(REPO, paths[i], module(i, False), ref=pull.base_sha)
    return pull


async def review_requests(h: Harness, pull: Pull, **event: Any) -> list[RecordedRequest]:
    """Every request the fake served from the webhook (``pull_request`` opened, or ``event``) to the review's check
    run completed."""
    seen = len(h.github.requests)
    answer = await h.deliver("pull_request", h.pr_payload(pull, **event))
    job = await h.wait_check_synced(answer["job_id"], timeout=120)
    assert job.state is JobState.SUCCEEDED, job
    return h.github.requests[seen:]


def counted(requests: list[RecordedRequest]) -> list[RecordedRequest]:
    """The requests GitHub counts against the installation: its token's, less those answered 304."""
    return [r for r in requests if r.auth == "token" and r.status != 304]


def by_route(requests: list[RecordedRequest]) -> Counter[str]:
    return Counter(f"{r.method} {r.route or r.path}" for r in requests)


@pytest.mark.parametrize("files", [40, 300])
async def test_a_review_costs_the_same_few_requests_whatever_its_size(tmp_path: Path, files: int) -> None:
    async with harness(tmp_path) as h:
        requests = await review_requests(h, sized_pull(h, 1, files))
        later = await review_requests(h, sized_pull(h, 2, files, first=files))  # another of the same repository
    # The first review of the repository fetches its archive (one request); the next finds it cached.
    assert [r.status for r in requests if "/tarball/" in r.path] == [302]
    assert [r for r in later if "/tarball/" in r.path] == []
    assert len(counted(requests)) <= FIRST_BUDGET, by_route(counted(requests))
    assert len(counted(later)) <= BUDGET, by_route(counted(later))
    graphql = [r for r in requests if r.path == "/graphql"]
    # Every file's head is read, a hundred to a GraphQL query of one point; the contents route reads only the config.
    assert len(graphql) == math.ceil(files / 100), by_route(requests)
    assert all(r.response_json["data"]["rateLimit"]["cost"] == 1 for r in graphql)
    assert [r.path for r in requests if "/contents/" in r.path] == [f"/repos/{REPO}/contents/.github/reviewer.yml"]
    # The gate's second and later reads of the pull request are answered 304.
    assert [r.status for r in requests if r.route.endswith("/pulls/{number}")][1:] == [304] * (
        sum(1 for r in requests if r.route.endswith("/pulls/{number}")) - 1
    )


async def test_a_second_review_of_the_same_pull_request_reads_what_did_not_change_for_free(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        h.github.set_file(REPO, ".github/reviewer.yml", "nits: fold\n")
        pull = sized_pull(h, 1, 10)
        await review_requests(h, pull)
        before = pull.head_sha
        h.github.advance_head(REPO, 1)  # a push: the same files at a new head
        for i in range(10):
            h.github.set_file(REPO, f"src/pkg0/mod_{i}.py", module(i, True), ref=pull.head_sha)
        requests = await review_requests(h, pull, action="synchronize", before=before)
    config = [r.status for r in requests if r.path.endswith("/contents/.github/reviewer.yml")]
    assert config == [304]  # the repository's config did not change: GitHub counts nothing for it
