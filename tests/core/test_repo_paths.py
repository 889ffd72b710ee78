"""A path from a pull request reaches GitHub as that path of that repository at that ref, or not at all
(reviewer_app/core/repo_paths.py, the one place a repository path becomes part of a URL).

The attack this closes: a file named ``%2e%2e/%2e%2e/%2e%2e/<org>/<private>/contents/deploy/prod.env?ref=main#``
made the app read another repository's private file with the installation's token and show it to the model."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import aiohttp
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reviewer_app.core.repo_paths import UnsafePath, url_path
from reviewer_app.github.auth import AppCredentials
from reviewer_app.github.client import GitHubClient
from tests.fakes.github import FakeGitHub, FakeGitHubThread

REPO, PRIVATE = "octo-org/public", "octo-org/private"
REF = "feature/C#-1?x"  # a branch name is data too
ATTACK = "%2e%2e/%2e%2e/%2e%2e/octo-org/private/contents/deploy/prod.env?ref=main#"


@pytest.mark.parametrize(
    ("path", "encoded"),
    [
        ("src/app.py", "src/app.py"),
        ("src/C#/Program.cs", "src/C%23/Program.cs"),
        ("docs/what?.md", "docs/what%3F.md"),
        ("%2e%2e/x", "%252e%252e/x"),
        (ATTACK, "%252e%252e/%252e%252e/%252e%252e/octo-org/private/contents/deploy/prod.env%3Fref%3Dmain%23"),
        ("a b/é/-rf", "a%20b/%C3%A9/-rf"),
        ("...", "..."),  # three dots are a name, not a step up
    ],
)
def test_each_segment_is_encoded_whole(path: str, encoded: str) -> None:
    assert url_path(path) == encoded


@pytest.mark.parametrize("path", ["", "../x", "a/../b", "./a", "a//b", "a/", "/a", "a\x00b", ".", ".."])
def test_segments_a_url_would_reinterpret_are_refused(path: str) -> None:
    with pytest.raises(UnsafePath):
        url_path(path)


# -- against the fake GitHub, which records the repository, path and ref it was asked for -----------------------


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[FakeGitHub, FakeGitHubThread, str]]:
    fake = FakeGitHub()
    inst = fake.add_installation()
    fake.add_repo(REPO, inst.id)
    fake.add_repo(PRIVATE, inst.id)  # the same installation: its token could read it
    fake.set_file(PRIVATE, "deploy/prod.env", "SECRET=hunter2")
    fake.set_file(REPO, "deploy/prod.env", "public decoy", ref="main")
    thread = FakeGitHubThread(fake)
    url = thread.start()
    try:
        yield fake, thread, url
    finally:
        thread.stop()


# Names git accepts in a tree (any bytes but NUL and "/" in a segment; git itself refuses "." and ".."), with the
# shapes an attacker reaches for.
SEGMENT = st.one_of(
    st.text(st.characters(exclude_characters="/\x00", exclude_categories=("Cs",)), min_size=1, max_size=10),
    st.sampled_from(
        ["..", ".", "%2e%2e", "%2E%2e", "%2f", "?", "#", "?ref=main#", " ", "-rf", "é", "%", "%25", ".git"]
    ),
)
PATHS = st.lists(SEGMENT, min_size=1, max_size=5).map("/".join)


async def _read(url: str, fake: FakeGitHub, path: str) -> str | None:
    async with aiohttp.ClientSession() as session:
        client = GitHubClient(session, url, AppCredentials(str(fake.app_id), fake.private_key), read_retry_delays=())
        inst = next(iter(fake.installations))
        return await client.get_file_content(inst, REPO, path, REF)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=PATHS)
@example(path=ATTACK)
@example(path="src/C#/Program.cs")
@example(path="docs/what?.md")
@example(path="../private/contents/deploy/prod.env")
def test_github_is_asked_for_exactly_that_path_of_that_repository_at_that_ref(served, path: str) -> None:
    fake, thread, url = served
    content = f"the file {path!r}"
    thread.call(fake.set_file, REPO, path, content, ref=REF)
    before = thread.call(lambda: len(fake.requests))

    text = asyncio.run(_read(url, fake, path))

    asked = [r for r in thread.call(lambda: list(fake.requests[before:])) if "/contents" in r.path]
    segments = path.split("/")
    if any(s in ("", ".", "..") for s in segments):
        assert text is None and asked == []  # unreadable: nothing sent
        return
    assert text == content
    [request] = asked
    assert request.path == f"/repos/{REPO}/contents/{path}" and request.query == {"ref": REF}
    assert "hunter2" not in (text or "")
