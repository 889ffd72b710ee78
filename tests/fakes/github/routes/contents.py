"""A repository's contents at a ref: files, symbolic links, submodules and directories."""

from __future__ import annotations

import base64

from aiohttp import web

from tests.fakes.github.api import REPO_PATH, ApiError
from tests.fakes.github.auth import repo_for
from tests.fakes.github.shapes import blob_sha
from tests.fakes.github.state import GitHubState


async def get_contents(gh: GitHubState, request: web.Request) -> web.Response:
    repo = repo_for(gh, request)
    path = request.match_info.get("path", "").strip("/")
    ref = request.query.get("ref") or repo.default_branch
    tree = repo.contents.get(ref) or repo.contents.get(repo.resolve(ref)) or {}
    links = repo.links.get(ref) or repo.links.get(repo.resolve(ref)) or {}
    if path in links:
        return web.json_response({**links[path], "name": path.rsplit("/", 1)[-1], "path": path, "size": 0})
    if path in tree:
        text = tree[path]
        encoded = base64.encodebytes(text.encode()).decode()  # GitHub wraps base64 lines, like this
        return web.json_response(
            {
                "type": "file",
                "encoding": "base64",
                "size": len(text.encode()),
                "name": path.rsplit("/", 1)[-1],
                "path": path,
                "content": encoded,
                "sha": blob_sha(text),
                "html_url": f"https://github.com/{repo.full_name}/blob/{ref}/{path}",
            }
        )
    prefix = f"{path}/" if path else ""
    entries: dict[str, str] = {}
    for p in [*tree, *links]:
        if p.startswith(prefix):
            name, _, rest = p[len(prefix) :].partition("/")
            entries[name] = "dir" if rest else links[p]["type"] if p in links else "file"
    if entries:
        return web.json_response(
            [{"type": kind, "name": name, "path": f"{prefix}{name}"} for name, kind in sorted(entries.items())]
        )
    raise ApiError(404, "Not Found")


ROUTES = [
    ("GET", REPO_PATH + "/contents/{path:.+}", get_contents),
    ("GET", REPO_PATH + "/contents", get_contents),  # the root directory
    ("GET", REPO_PATH + "/contents/", get_contents),
]
