"""Reading files of a pull request's commits through GitHub's contents API, cached, and diffs computed from them."""

from __future__ import annotations

import difflib
import logging
from collections.abc import Hashable

import cachetools

from reviewer_app.core.diff import FileDiff, PatchParseError, parse_patch
from reviewer_app.core.errors import JobError, RateLimited
from reviewer_app.github.client import GitHubClient

log = logging.getLogger(__name__)

CACHE_BYTES = 32 * 1024 * 1024
DIFF_CONTEXT_LINES = 3  # what GitHub's patches carry


class NotText(ValueError):
    """The file is not text (a NUL byte, or bytes that are not UTF-8)."""


class ContentReader:
    """Files at a commit, read once: by blob SHA where GitHub named it, else by (repository, commit, path).

    Both keys name immutable content, so an entry never goes stale; the cache is bounded by total characters.
    """

    def __init__(self, github: GitHubClient, *, cache_bytes: int = CACHE_BYTES) -> None:
        self.github = github
        self._cache: cachetools.LRUCache[Hashable, str | None] = cachetools.LRUCache(
            maxsize=cache_bytes, getsizeof=lambda text: len(text or "") + 1
        )
        self.fetches = 0  # requests made, for tests and the benchmark

    async def read(
        self, installation_id: int, repo: str, path: str, ref: str, *, blob_sha: str | None = None
    ) -> str | None:
        """The text of ``path`` at commit ``ref``; None when it is missing, a directory, or too big for the API.

        Raises NotText for binary content and ``JobError`` when GitHub fails.
        """
        key: Hashable = (repo, "blob", blob_sha) if blob_sha else (repo, ref, path)
        if key in self._cache:
            text = self._cache[key]
        else:
            self.fetches += 1
            text = await self.github.get_file_content(installation_id, repo, path, ref)
            if text is not None and len(text) < self._cache.maxsize // 4:
                self._cache[key] = text
        if text is not None and ("\x00" in text or "\ufffd" in text):
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
