"""Reading files of a pull request's commits, cached: many at once through GitHub's GraphQL API (a hundred to a
request), one at a time through its contents API for what GraphQL does not serve whole; and diffs computed from
them."""

from __future__ import annotations

import difflib
import hashlib
import logging
from collections.abc import Hashable, Sequence

import cachetools

from reviewer_app.core.diff import FileDiff, PatchParseError, parse_patch
from reviewer_app.core.errors import JobError, RateLimited
from reviewer_app.core.file_text import NOT_TEXT
from reviewer_app.github.client import GitHubClient
from reviewer_app.github.graphql import BLOBS_PER_QUERY

log = logging.getLogger(__name__)

CACHE_BYTES = 32 * 1024 * 1024
DIFF_CONTEXT_LINES = 3  # what GitHub's patches carry


class NotText(ValueError):
    """The file is not text (a NUL byte, or bytes that are not UTF-8)."""


def git_blob_sha(text: str) -> str:
    """The SHA git (and GitHub) names a blob holding ``text`` by."""
    data = text.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


class ContentReader:
    """Files at a commit, read once, kept by (repository, commit, path) and by the SHA of the blob read.

    Both keys name immutable content, so an entry never goes stale; the cache is bounded by total characters. The
    blob key is the hash of the text GitHub sent, never a caller's word: a file list older than the commit read names
    another blob, and text kept under it would be served for that blob later. ``prefetch`` reads many files in a few
    GraphQL requests; ``read`` then finds them here, and reads what is not (too large for GraphQL, or never
    prefetched) through the contents API.
    """

    def __init__(self, github: GitHubClient, *, cache_bytes: int = CACHE_BYTES) -> None:
        self.github = github
        self._cache: cachetools.LRUCache[Hashable, str | None] = cachetools.LRUCache(
            maxsize=cache_bytes, getsizeof=lambda text: len(text or "") + 1
        )
        self.fetches = 0  # requests made, for tests and the benchmark

    def _held(self, repo: str, path: str, ref: str, blob_sha: str | None) -> tuple[bool, str | None]:
        """``(True, text)`` when the file is kept: by the blob the caller names, or by its commit and path."""
        for key in ((repo, "blob", blob_sha), (repo, ref, path)) if blob_sha else ((repo, ref, path),):
            if key in self._cache:
                return True, self._cache[key]
        return False, None

    def _keep_read(self, repo: str, path: str, ref: str, text: str | None) -> None:
        """What GitHub sent for ``path`` at ``ref``, kept under that and under the SHA of its blob."""
        self._keep((repo, ref, path), text)
        if text is not None and text != NOT_TEXT:
            self._keep((repo, "blob", git_blob_sha(text)), text)

    async def prefetch(self, installation_id: int, repo: str, files: Sequence[tuple[str, str, str | None]]) -> None:
        """Read the ``(path, commit, blob SHA or None)`` files not held yet, a hundred to a GraphQL request.

        A file GraphQL does not serve whole is left for ``read`` to fetch on its own; when GraphQL fails, every file
        is (a rate limit is raised: waiting beats reviewing less).
        """
        wanted = list(
            dict.fromkeys((ref, path) for path, ref, blob_sha in files if not self._held(repo, path, ref, blob_sha)[0])
        )
        if not wanted:
            return
        try:
            answers = await self.github.read_blobs(installation_id, repo, wanted)
        except RateLimited:
            raise
        except JobError as exc:
            log.info(
                "reading %d files of %s over GraphQL failed (%s); reading them one by one",
                len(wanted),
                repo,
                exc.reason,
            )
            return
        self.fetches += -(-len(wanted) // BLOBS_PER_QUERY)
        for (ref, path), answer in answers.items():
            text = NOT_TEXT if answer.binary else answer.text
            if text is None and not answer.missing:
                continue  # not served whole: read() asks the contents API
            self._keep_read(repo, path, ref, text)

    def _keep(self, key: Hashable, text: str | None) -> None:
        if text is None or len(text) < self._cache.maxsize // 4:
            self._cache[key] = text

    async def read(
        self, installation_id: int, repo: str, path: str, ref: str, *, blob_sha: str | None = None
    ) -> str | None:
        """The text of ``path`` at commit ``ref``; None when it is missing, a directory, or too big for the API.

        Raises NotText for binary content and ``JobError`` when GitHub fails.
        """
        held, text = self._held(repo, path, ref, blob_sha)
        if not held:
            self.fetches += 1
            text = await self.github.get_file_content(installation_id, repo, path, ref)
            if text is not None:
                self._keep_read(repo, path, ref, text)
        if text is not None and NOT_TEXT in text:  # not text (core/file_text.py), or GraphQL's binary mark
            raise NotText(path)
        return text

    async def try_read(
        self, installation_id: int, repo: str, path: str, ref: str, *, blob_sha: str | None = None
    ) -> tuple[str | None, str | None]:
        """``(text, None)``, or ``(None, why)`` when the file cannot be read as text."""
        try:
            text = await self.read(installation_id, repo, path, ref, blob_sha=blob_sha)
        except NotText:
            return None, "its contents are not text"
        except RateLimited:
            raise  # waiting beats reviewing less
        except JobError as exc:
            log.info("reading %s@%s of %s failed: %s", path, ref[:12], repo, exc.reason)
            return None, "GitHub did not serve its contents"
        if text is None:
            return None, "GitHub did not serve its contents (missing, or larger than the API's 1 MB)"
        return text, None


def diff_from_contents(
    path: str, old: str, new: str, *, status: str = "modified", previous_path: str | None = None
) -> FileDiff | None:
    """The diff GitHub would have sent, computed from both texts (lines split on "\\n" only); None if equal."""
    a, b = old.split("\n") if old else [], new.split("\n") if new else []
    lines = list(difflib.unified_diff(a, b, lineterm="", n=DIFF_CONTEXT_LINES))[2:]  # without the ---/+++ lines
    if not lines:
        return None
    try:
        return parse_patch(path, "\n".join(lines), status=status, previous_path=previous_path)
    except PatchParseError:
        return None
