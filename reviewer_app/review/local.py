"""A local review (`reviewer-app review --local [BASE]`): the commits of a git checkout reviewed by the App's own stages
(gate, gather, ask with its evidence check and verification, the publish stage's ranking and rendering, as a dry run),
with no GitHub token and nothing sent anywhere but the model's requests.

The stages read a pull request through the GitHub client's calls; here ``LocalGitHub`` answers the calls a review
makes (the pull request, its files, a comparison, file contents, a directory) from the checkout's git objects, and
holds no network client at all: a call a local review does not make is an AttributeError, not a request. The commits
stand for the pull request: HEAD is its head, the base the diff starts from is its base (where .github/reviewer.yml is
read, as the App reads it from the base branch), the commits' messages its title and description.

The codebase seam: where the App reads the repository at the head from GitHub (or from the codebase's snapshot of
it), a local review reads the checkout's own objects: ``get_contents`` and ``get_file_content`` are that seam, and the
codebase's archive (``download_archive``) is `git archive` of the base commit.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from reviewer_app.core.errors import ArchiveTooLarge, PermanentError
from reviewer_app.core.file_text import as_read, decode
from reviewer_app.core.pull_url import PullRef
from reviewer_app.github.client import GitHubClient
from reviewer_app.github.graphql import BlobAnswer
from reviewer_app.review import local_git
from reviewer_app.review.local_git import Commits
from reviewer_app.review.one_pr import OnePullRequest, OneReview, review_one
from reviewer_app.review.progress import Progress, reviewers
from reviewer_app.review.settings import ReviewSettings
from reviewer_app.settings.config import Config
from reviewer_app.store.factory import make_store

LOCAL_NUMBER = 1  # the job's "pull request" number: one review, never looked up anywhere
LOCAL_LOGIN = "you"


class LocalGitHub:
    """The GitHub calls of a review, answered from a git checkout (see the module's note)."""

    def __init__(self, commits: Commits) -> None:
        self.commits = commits
        self._files: list[dict[str, Any]] | None = None

    async def files_changed(self) -> list[dict[str, Any]]:
        if self._files is None:
            self._files = await asyncio.to_thread(local_git.changed_files, self.commits)
        return self._files

    async def bot_login(self) -> str:
        return LOCAL_LOGIN

    async def list_reviews(self, installation_id: int, repo: str, number: int) -> list[dict[str, Any]]:
        return []  # nothing was ever posted from here

    async def get_pull(self, installation_id: int, repo: str, number: int) -> dict[str, Any]:
        c = self.commits
        return {
            "number": number,
            "state": "open",
            "draft": False,
            "title": c.title,
            "body": c.description,
            "html_url": c.root.as_uri(),
            "head": {"sha": c.head, "ref": c.branch},
            # The base's "ref" is where the repository's settings are read: the base commit, as the App reads them
            # from the base branch (a change cannot rewrite its own review rules).
            "base": {"sha": c.base, "ref": c.base},
            "changed_files": len(await self.files_changed()),
        }

    async def list_pull_files(self, installation_id: int, repo: str, number: int) -> list[dict[str, Any]]:
        return [dict(f) for f in await self.files_changed()]

    async def compare(self, installation_id: int, repo: str, base: str, head: str) -> dict[str, Any]:
        return {"status": "ahead", "merge_base_commit": {"sha": self.commits.base}, "files": []}

    async def get_file_content(self, installation_id: int, repo: str, path: str, ref: str) -> str | None:
        data = await asyncio.to_thread(self._file, ref, path)
        return None if data is None else as_read(data)

    async def read_blobs(
        self, installation_id: int, repo: str, files: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], BlobAnswer]:
        answers: dict[tuple[str, str], BlobAnswer] = {}
        for ref, path in dict.fromkeys(files):
            data = await asyncio.to_thread(self._file, ref, path)
            if data is None:
                answers[(ref, path)] = BlobAnswer(missing=True)
            elif (text := decode(data)) is None:
                answers[(ref, path)] = BlobAnswer(binary=True)
            else:
                answers[(ref, path)] = BlobAnswer(text=text)
        return answers

    async def get_contents(
        self, installation_id: int, repo: str, path: str, ref: str
    ) -> dict[str, Any] | list[dict[str, Any]] | None:
        return await asyncio.to_thread(self._contents, ref, path)

    async def download_archive(self, installation_id: int, repo: str, ref: str, dest: Path, *, max_bytes: int) -> None:
        """The codebase's archive of ``ref`` from the checkout's own objects (`git archive`): nothing is downloaded."""
        await asyncio.to_thread(self._archive, ref, dest, max_bytes)

    def _archive(self, ref: str, dest: Path, max_bytes: int) -> None:
        prefix = f"{self.commits.repo.replace('/', '-')}-{ref[:7]}/"
        try:
            data = local_git.git(self.commits.root, "archive", "--format=tar.gz", f"--prefix={prefix}", ref)
        except local_git.GitError as exc:
            raise PermanentError(f"git archive of {ref[:12]} failed: {exc}") from None
        if len(data) > max_bytes:
            raise ArchiveTooLarge(f"the archive of {ref[:12]} is larger than {max_bytes:,} bytes")
        dest.write_bytes(data)

    def _file(self, ref: str, path: str) -> bytes | None:
        if ref == local_git.EMPTY_TREE:
            return None
        try:
            return local_git.file_at(self.commits.root, ref, path)
        except local_git.GitError:
            return None

    def _contents(self, ref: str, path: str) -> dict[str, Any] | list[dict[str, Any]] | None:
        try:
            return local_git.contents_at(self.commits.root, ref, path)
        except local_git.GitError:
            return None


@dataclass(frozen=True)
class LocalReview:
    """What a local review reports: the commits reviewed, and the review as the App would have posted it."""

    commits: Commits
    files: int  # how many files the commits change
    review: OneReview


async def review_local(cfg: Config, commits: Commits, progress: Progress) -> LocalReview:
    """Review ``commits`` with the App's stages on a temporary database that lives as long as the review."""
    from reviewer_app.review.model_client import ModelEndpoint, make_client

    github = LocalGitHub(commits)
    files = len(await github.files_changed())
    progress.step(f"{files} file(s) changed in {len(commits.messages)} commit(s) since {commits.base_label}")
    ref = PullRef("file", "localhost", *commits.repo.split("/", 1), LOCAL_NUMBER)
    with tempfile.TemporaryDirectory(prefix="reviewer-app-local-") as tmp:
        store = make_store(replace(cfg, database_url=f"sqlite:///{Path(tmp) / 'review.db'}"))
        await store.open()
        try:
            client = make_client(ModelEndpoint.from_config(cfg), timeout=cfg.model_timeout_seconds, max_retries=2)
            try:
                claude, verifier = reviewers(cfg, client, progress)
                # Not a GitHubClient: the calls a review makes, answered from git (and no others: no network here).
                reviewer = OnePullRequest(cast(GitHubClient, github), claude, ReviewSettings.from_config(cfg), verifier)
                done = await review_one(
                    store, reviewer, ref, post=False, clock=time.time, timeout=cfg.job_timeout_seconds
                )
            finally:
                await client.close()
        finally:
            await store.close()
    return LocalReview(commits, files, done)
