"""A repository's archive at a ref, as GitHub serves it: ``GET /repos/{owner}/{repo}/tarball/{ref}`` answers ``302``
with a short-lived download URL (codeload.github.com on GitHub; here a ``/_fake/codeload/`` route of the fake, whose
requests the rate limits do not count and which needs no token: the URL carries its own). The download is a real
gzipped tar of the repository's files at that commit under one top folder ``owner-repo-sha7/``, symlinks as symlinks,
with the commit in a pax global header, as ``git archive`` writes it. A test may serve a crafted archive instead."""

from __future__ import annotations

import io
import secrets
import tarfile

from aiohttp import web

from tests.fakes.github.api import REPO_PATH, ApiError
from tests.fakes.github.auth import repo_for
from tests.fakes.github.model import Repo
from tests.fakes.github.state import GitHubState

DOWNLOAD_LIFETIME = 300.0  # GitHub's archive links expire after five minutes


def build_tarball(repo: Repo, ref: str) -> bytes:
    """A gzipped tar of ``repo`` at ``ref`` shaped like GitHub's: ``owner-repo-sha7/`` then the tree."""
    sha = repo.resolve(ref)
    names = [ref, sha, *(branch for branch, head in repo.branches.items() if head == sha)]
    tree = next((repo.contents[n] for n in names if n in repo.contents), {})
    links = next((repo.links[n] for n in names if n in repo.links), {})
    top = f"{repo.full_name.replace('/', '-')}-{sha[:7]}"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT, pax_headers={"comment": sha}) as tar:
        folder = tarfile.TarInfo(top)
        folder.type, folder.mode = tarfile.DIRTYPE, 0o775
        tar.addfile(folder)
        for path in sorted({*tree, *links}):
            info = tarfile.TarInfo(f"{top}/{path}")
            info.mode = 0o664
            link = links.get(path)
            if link is not None and link["type"] == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, link["target"]
                tar.addfile(info)
            elif link is None:
                data = tree[path].encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


async def get_tarball(gh: GitHubState, request: web.Request) -> web.Response:
    repo = repo_for(gh, request)
    ref = request.match_info["ref"]
    sha = repo.resolve(ref)
    if sha not in repo.parents and ref not in repo.contents and sha not in repo.contents:
        raise ApiError(404, "Not Found")
    key = secrets.token_urlsafe(16)
    gh.archive_links[key] = (repo.full_name, ref, gh.clock() + DOWNLOAD_LIFETIME)
    origin = f"{request.url.scheme}://{request.host}"
    location = f"{origin}/_fake/codeload/{repo.full_name}/legacy.tar.gz/{sha}?token={key}"
    return web.Response(status=302, headers={"Location": location}, body=b"")


async def download(gh: GitHubState, request: web.Request) -> web.Response:
    """The download itself: only with the link's token, while it lasts, and never with an API token (GitHub's
    codeload does not want one; a client that forwards its installation token there leaks it)."""
    if request.headers.get("Authorization"):
        gh.counters["archive_download_with_token"] += 1
    link = gh.archive_links.get(request.query.get("token", ""))
    full_name = f"{request.match_info['owner']}/{request.match_info['repo']}"
    if link is None or link[0] != full_name or gh.clock() > link[2]:
        return web.Response(status=404, text="404: Not Found")
    gh.counters["archive_downloads"] += 1
    crafted = gh.crafted_archives.get(full_name)
    body = crafted if crafted is not None else build_tarball(gh.repos[full_name], link[1])
    return web.Response(body=body, content_type="application/x-gzip")


ROUTES = [("GET", REPO_PATH + "/tarball/{ref}", get_tarball)]
DOWNLOAD_ROUTE = "/_fake/codeload/{owner}/{repo}/legacy.tar.gz/{sha}"
