"""The repository at the head from the fake GitHub's archive route: one REST request for the first review, none for
the next heads of the same base (the index re-parses only changed blobs), a refresh once the base moved on too far,
least recently used repositories evicted, the installation token never sent to the download, and no codebase (the
review goes on) when the archive cannot be had."""

from __future__ import annotations

import asyncio
import functools
import io
import secrets
import tarfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import aiohttp
import pytest

from reviewer_app.codebase import ChangedText, Codebase, CodebaseSettings, open_codebase
from reviewer_app.codebase.snapshot import Snapshot
from reviewer_app.github.auth import AppCredentials
from reviewer_app.github.client import GitHubClient
from tests.fakes.github import FakeGitHub, running

REPO = "octo-org/widgets"
OTHER = "octo-org/gadgets"
INSTALLATION = 77

STORE = "class Store:\n    def load(self, key):\n        return key\n"
SERVICE = "from store import Store\n\n\ndef serve(key):\n    return Store().load(key)\n"


@functools.lru_cache
def credentials(app_id: int, private_key: str) -> AppCredentials:
    return AppCredentials(str(app_id), private_key)


@dataclass
class Env:
    fake: FakeGitHub
    client: GitHubClient
    settings: CodebaseSettings
    base: str

    async def open(
        self,
        head: str = "h" * 40,
        base: str | None = None,
        repo: str = REPO,
        changed: Mapping[str, str | ChangedText | None] | None = None,
    ) -> Codebase | None:
        files = changed or {}
        return await open_codebase(
            self.client,
            self.settings,
            installation_id=INSTALLATION,
            repo=repo,
            base_ref="main",
            base_sha=base or self.base,
            head_sha=head,
            changed={p: t if isinstance(t, ChangedText) else ChangedText(p, t) for p, t in files.items()},
        )

    def tarball_requests(self) -> list[int]:
        return [r.status for r in self.fake.requests_matching("GET", r"/tarball/")]


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    fake = FakeGitHub()
    fake.add_installation(INSTALLATION, "octo-org")
    repo = fake.add_repo(REPO, INSTALLATION)
    fake.add_repo(OTHER, INSTALLATION)
    fake.set_file(REPO, "store.py", STORE)
    fake.set_file(REPO, "service.py", SERVICE)
    fake.set_file(REPO, "docs/old.md", "old\n")
    fake.set_file(OTHER, "x.py", "def x():\n    return 1\n")
    settings = CodebaseSettings(cache_dir=tmp_path / "cache")
    async with running(fake) as url, aiohttp.ClientSession() as session:
        client = GitHubClient(session, url, credentials(fake.app_id, fake.private_key), read_retry_delays=(0, 0))
        yield Env(fake, client, settings, repo.branches["main"])


async def test_the_first_review_fetches_one_archive_and_overlays_the_changed_files(env: Env) -> None:
    codebase = await env.open(
        changed={"store.py": STORE.replace("return key", "return key.strip()"), "docs/old.md": None}
    )
    assert isinstance(codebase, Snapshot)
    assert env.tarball_requests() == [302]
    assert env.fake.counters["archive_downloads"] == 1
    assert env.fake.counters["archive_download_with_token"] == 0  # the installation token stays with the API
    assert "key.strip()" in (codebase.read_file("store.py") or "")  # the head's text, not the base's
    assert codebase.read_file("docs/old.md") is None  # removed by the pull request
    assert codebase.list_directory("") == ["service.py", "store.py"]
    assert "service.py:5 in serve (call)" in codebase.find_references("load")


async def test_a_rename_moves_the_file(env: Env) -> None:
    codebase = await env.open(changed={"lib/store.py": ChangedText("lib/store.py", STORE, previous_path="store.py")})
    assert codebase is not None
    assert codebase.read_file("store.py") is None and "class Store" in (codebase.read_file("lib/store.py") or "")
    assert codebase.list_directory("lib") == ["store.py"]


async def test_a_changed_file_the_review_did_not_read_is_the_base_with_its_diff_applied_never_the_base(
    env: Env,
) -> None:
    from reviewer_app.core.diff import parse_patch

    patch = (
        "@@ -1,3 +1,3 @@\n class Store:\n     def load(self, key):\n-        return key\n+        return key.strip()\n"
    )
    stale = "@@ -1,1 +1,1 @@\n-class Nothing:\n+class Else:\n"  # not a patch of the base's text
    codebase = await env.open(
        changed={
            "store.py": ChangedText("store.py", None, diff=parse_patch("store.py", patch)),
            "service.py": ChangedText("service.py", None, diff=parse_patch("service.py", stale)),
        }
    )
    assert codebase is not None
    assert codebase.read_file("store.py", 3, 3) == "store.py: lines 3-3 of 3\n     3 |         return key.strip()"
    # A diff that does not apply: the file is left out (the tools read it from GitHub), not served as the base had it.
    assert codebase.read_file("service.py") is None


async def test_a_new_head_of_the_same_base_asks_github_nothing_and_parses_only_what_changed(env: Env) -> None:
    first = await env.open()
    assert isinstance(first, Snapshot) and first.parsed == 2  # store.py and service.py
    second = await env.open("i" * 40, changed={"store.py": STORE + "\n\ndef extra():\n    return 2\n"})
    assert isinstance(second, Snapshot)
    assert env.tarball_requests() == [302]
    assert second.parsed == 1  # only the changed blob
    assert "store.py:6-7: function extra" in second.find_definition("extra")


async def test_the_archive_is_fetched_again_once_the_base_moved_on_too_far(env: Env) -> None:
    env.settings = replace(env.settings, refresh_commits=3)
    await env.open()
    newer = [env.fake.add_commit(REPO, parent=env.base) for _ in range(3)]
    await env.open(base=newer[0])
    await env.open(base=newer[1])
    assert env.tarball_requests() == [302]  # the base moved twice: the cached tree serves
    await env.open(base=newer[2])
    assert env.tarball_requests() == [302, 302]  # three moves: fetched again
    env.settings = replace(env.settings, refresh_seconds=0)
    await env.open(base=newer[1])
    assert env.tarball_requests() == [302, 302, 302]  # older than the refresh time


async def test_the_least_recently_used_repository_is_evicted(env: Env) -> None:
    await env.open(repo=OTHER)
    await env.open()
    folders = sorted(p.name for p in env.settings.cache_dir.iterdir())
    assert folders == ["octo-org+gadgets", "octo-org+widgets"]
    # Over the limit: the next fetch (the base moved on) removes everything but the repository in use.
    env.settings = replace(env.settings, cache_bytes=1, refresh_commits=1)
    await env.open(base=env.fake.add_commit(REPO, parent=env.base), head="j" * 40)
    assert sorted(p.name for p in env.settings.cache_dir.iterdir()) == ["octo-org+widgets"]


@pytest.mark.parametrize("fault", ["error", "unauthorized", "secondary_rate_limit"])
async def test_no_archive_means_no_codebase_and_the_review_goes_on(env: Env, fault: str) -> None:
    env.fake.inject("GET", r"/tarball/", fault, times=None)
    assert await env.open() is None


async def test_a_crafted_archive_from_the_server_is_refused(env: Env) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("octo-org-widgets-abc1234/../../escape.py")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"x\n"))
    env.fake.crafted_archives[REPO] = buffer.getvalue()
    assert await env.open() is None
    assert await env.open("i" * 40) is None  # the refusal is remembered: not asked for again
    assert env.tarball_requests() == [302]
    assert not any(p.name == "escape.py" for p in env.settings.cache_dir.parent.rglob("*"))
    assert not [p for p in (env.settings.cache_dir / "octo-org+widgets").iterdir() if p.name.startswith(".download")]


async def test_disabled_means_no_request(env: Env) -> None:
    env.settings = replace(env.settings, enabled=False)
    assert await env.open() is None
    assert env.tarball_requests() == []


async def test_an_archive_over_the_download_limit_is_given_up_and_remembered(env: Env) -> None:
    env.fake.set_file(REPO, "big.txt", "\n".join(secrets.token_hex(32) for _ in range(200)))  # does not compress
    env.settings = replace(env.settings, limits=replace(env.settings.limits, max_archive_bytes=2_000))
    assert await env.open() is None
    assert await env.open("i" * 40) is None
    assert env.tarball_requests() == [302]
    assert env.fake.counters["archive_downloads"] == 1
    assert [p.name for p in (env.settings.cache_dir / "octo-org+widgets").iterdir()] == ["meta.json"]  # no partial


def test_a_repositorys_fetch_lock_held_on_one_event_loop_does_not_break_another() -> None:
    # The batches test failed 1 run in 4 after the codebase merged: a lock left locked by an earlier test's loop was
    # awaited on the next test's loop ("bound to a different event loop"), and the review attempt failed.
    import threading

    from reviewer_app.codebase.snapshot import _fetch_lock

    held, done = threading.Event(), threading.Event()

    def hold_on_another_loop() -> None:
        async def hold() -> None:
            async with _fetch_lock("octo/widgets"):
                held.set()
                await asyncio.to_thread(done.wait, 10)

        asyncio.run(hold())

    other = threading.Thread(target=hold_on_another_loop)
    other.start()
    try:
        assert held.wait(10)

        async def take() -> bool:
            async with asyncio.timeout(10):
                async with _fetch_lock("octo/widgets"):
                    return True

        assert asyncio.run(take())
    finally:
        done.set()
        other.join(10)
