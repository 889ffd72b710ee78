"""A repository's archive at a ref: one REST request, which GitHub answers with a redirect to a short-lived download
link (codeload), then the download itself, streamed to disk under a size limit. The download is not an API request:
GitHub does not count it, and the installation's token is never sent there."""

from __future__ import annotations

import logging
from pathlib import Path

import aiohttp
import gidgethub
import gidgethub.sansio
import yarl

from reviewer_app.core.errors import ArchiveTooLarge, PermanentError, TransientError
from reviewer_app.github.api_errors import map_github_error
from reviewer_app.github.api_transport import ACCEPT, API_VERSION, GitHubTransport, split_repo

log = logging.getLogger(__name__)

DOWNLOAD_TIMEOUT = 300.0
CHUNK = 256 * 1024


def _discard(path: Path) -> None:
    path.unlink(missing_ok=True)


class ArchiveCalls(GitHubTransport):
    """The gzipped tarball of a repository at a ref (codebase/snapshot.py caches it)."""

    async def download_archive(self, installation_id: int, repo: str, ref: str, dest: Path, *, max_bytes: int) -> None:
        """Write ``repo``'s tarball at ``ref`` to ``dest``; a ``JobError`` when GitHub will not give it,
        ``ArchiveTooLarge`` past ``max_bytes`` (the partial file is removed)."""
        names = split_repo(repo)
        what = f"the archive of {repo}@{ref[:12]}"
        location = await self._archive_link(installation_id, repo, names, ref, what)
        session: aiohttp.ClientSession = self._gh._session
        timeout = aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT)
        size = 0
        try:
            # No Authorization header: the link carries its own short-lived token.
            async with session.get(yarl.URL(location, encoded=True), timeout=timeout) as r:
                if r.status != 200:
                    raise TransientError(f"GitHub's download of {what} answered {r.status}; will retry")
                with dest.open("wb") as f:
                    async for chunk in r.content.iter_chunked(CHUNK):
                        size += len(chunk)
                        if size > max_bytes:
                            raise ArchiveTooLarge(f"{what} is larger than {max_bytes:,} bytes")
                        f.write(chunk)
        except (TimeoutError, aiohttp.ClientError) as exc:
            _discard(dest)
            raise TransientError(f"downloading {what} failed ({type(exc).__name__}); will retry") from None
        except BaseException:
            _discard(dest)
            raise
        log.info("downloaded %s: %d bytes", what, size)

    async def _archive_link(self, installation_id: int, repo: str, names: dict[str, str], ref: str, what: str) -> str:
        """The download link GitHub redirects to (one request on the installation's limit; a 401 renews the token
        once)."""
        url = f"{self._gh.base_url}/repos/{names['owner']}/{names['name']}/tarball/{yarl.URL.build(path=ref).raw_path}"
        session: aiohttp.ClientSession = self._gh._session
        renewed = False
        while True:
            token = await self.tokens.get(installation_id, repo)
            headers = {
                "authorization": f"token {token}",
                "accept": ACCEPT,
                "x-github-api-version": API_VERSION,
                "user-agent": self._gh.requester,
            }
            try:
                async with session.get(
                    yarl.URL(url, encoded=True),
                    headers=headers,
                    allow_redirects=False,
                    timeout=aiohttp.ClientTimeout(total=30.0),
                ) as r:
                    status, head, body = r.status, r.headers, await r.read()
            except (TimeoutError, aiohttp.ClientError) as exc:
                raise TransientError(f"GitHub did not answer for {what} ({type(exc).__name__}); will retry") from None
            if self._gh.on_response is not None:
                self._gh.on_response(status)
            if status in (301, 302, 307) and head.get("Location"):
                return str(head["Location"])
            if status == 401 and not renewed and self.tokens.renews:
                self.tokens.invalidate(installation_id)
                renewed = True
                continue
            try:
                gidgethub.sansio.decipher_response(status, dict(head), body)
            except gidgethub.HTTPException as exc:
                raise map_github_error(exc, what=what, now=self._clock(), secrets=self.tokens.live_tokens()) from None
            raise PermanentError(f"GitHub answered {status} without a download link for {what}")


__all__ = ["ArchiveCalls"]
