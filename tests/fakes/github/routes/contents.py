"""A repository's contents at a ref: files, symbolic links, submodules and directories, as GitHub serves them.

GitHub's documentation of "Get repository content": a symlink whose target is a normal file in the repository is
answered with the content of that file (the target's object: its own name and path); any other symlink with an
object describing the link. A submodule is answered with an object describing it, but a directory listing gives a
submodule the type ``file`` ("this behavior exists for backwards compatibility purposes"), with no download URL. A
file over 1 MB comes without its content (``"encoding": "none"``).
"""

from __future__ import annotations

import base64
import posixpath

from aiohttp import web

from tests.fakes.github.api import REPO_PATH, ApiError
from tests.fakes.github.auth import repo_for
from tests.fakes.github.model import Repo
from tests.fakes.github.shapes import Json, blob_sha
from tests.fakes.github.state import GitHubState

API = "https://api.github.com"
CONTENT_LIMIT = 1024 * 1024  # "Between 1-100 MB: ... the content field will be an empty string and the encoding field
# will be none"


def _file(repo: Repo, ref: str, path: str, text: str) -> Json:
    data = text.encode("utf-8", "surrogateescape")  # set_file(..., b.decode("utf-8", "surrogateescape")): any bytes
    # GitHub wraps base64 lines, like this; past 1 MB it sends no content at all ("encoding": "none").
    large = len(data) > CONTENT_LIMIT
    encoded = "" if large else base64.encodebytes(data).decode()
    return {
        "type": "file",
        "encoding": "none" if large else "base64",
        "size": len(data),
        "name": path.rsplit("/", 1)[-1],
        "path": path,
        "content": encoded,
        "sha": blob_sha(text),
        "url": f"{API}/repos/{repo.full_name}/contents/{path}?ref={ref}",
        "git_url": f"{API}/repos/{repo.full_name}/git/blobs/{blob_sha(text)}",
        "html_url": f"https://github.com/{repo.full_name}/blob/{ref}/{path}",
        "download_url": f"https://raw.githubusercontent.com/{repo.full_name}/{ref}/{path}",
        "_links": _links(repo, ref, path, f"git/blobs/{blob_sha(text)}", f"blob/{ref}/{path}"),
    }


def _links(repo: Repo, ref: str, path: str, git: str | None, html: str | None) -> Json:
    return {
        "self": f"{API}/repos/{repo.full_name}/contents/{path}?ref={ref}",
        "git": f"{API}/repos/{repo.full_name}/{git}" if git else None,
        "html": f"https://github.com/{repo.full_name}/{html}" if html else None,
    }


def _link_target(path: str, target: str) -> str | None:
    """The repository path a symlink at ``path`` points to; None when it leaves the tree."""
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    return None if target.startswith("/") or joined == ".." or joined.startswith("../") else joined


def _entry(repo: Repo, ref: str, path: str, link: Json) -> Json:
    """The object GitHub describes a symlink or submodule with, when it does not serve a file in its place."""
    name = path.rsplit("/", 1)[-1]
    if link["type"] == "submodule":
        return {
            "type": "submodule",
            "submodule_git_url": link["submodule_git_url"],
            "name": name,
            "path": path,
            "size": 0,
            "sha": blob_sha(link["submodule_git_url"]),
            "url": f"{API}/repos/{repo.full_name}/contents/{path}?ref={ref}",
            "git_url": None,
            "html_url": None,
            "download_url": None,
            "_links": _links(repo, ref, path, None, None),
        }
    return {
        "type": "symlink",
        "target": link["target"],
        "name": name,
        "path": path,
        "size": len(link["target"].encode()),
        "sha": blob_sha(link["target"]),
        "url": f"{API}/repos/{repo.full_name}/contents/{path}?ref={ref}",
        "git_url": f"{API}/repos/{repo.full_name}/git/blobs/{blob_sha(link['target'])}",
        "html_url": f"https://github.com/{repo.full_name}/blob/{ref}/{path}",
        "download_url": f"https://raw.githubusercontent.com/{repo.full_name}/{ref}/{path}",
        "_links": _links(repo, ref, path, f"git/blobs/{blob_sha(link['target'])}", f"blob/{ref}/{path}"),
    }


def _listed(repo: Repo, ref: str, prefix: str, name: str, kind: str) -> Json:
    """One entry of a directory listing: a submodule's type is ``file`` there, with nothing to download."""
    path = f"{prefix}{name}"
    sha = blob_sha(f"{ref}:{path}")
    git = f"git/trees/{sha}" if kind in ("dir", "submodule") else f"git/blobs/{sha}"
    html = None if kind == "submodule" else f"{'tree' if kind == 'dir' else 'blob'}/{ref}/{path}"
    entry: Json = {
        "type": "file" if kind == "submodule" else kind,  # "for backwards compatibility"
        "name": name,
        "path": path,
        "size": 0,
        "sha": sha,
        "url": f"{API}/repos/{repo.full_name}/contents/{path}?ref={ref}",
        "git_url": f"{API}/repos/{repo.full_name}/{git}",
        "html_url": f"https://github.com/{repo.full_name}/{html}" if html else None,
        "download_url": (
            f"https://raw.githubusercontent.com/{repo.full_name}/{ref}/{path}" if kind in ("file", "symlink") else None
        ),
        "_links": _links(repo, ref, path, git, html),
    }
    return entry


async def get_contents(gh: GitHubState, request: web.Request) -> web.Response:
    repo = repo_for(gh, request)
    path = request.match_info.get("path", "").strip("/")
    ref = request.query.get("ref") or repo.default_branch
    tree = repo.contents.get(ref) or repo.contents.get(repo.resolve(ref)) or {}
    links = repo.links.get(ref) or repo.links.get(repo.resolve(ref)) or {}
    if path in links:
        link = links[path]
        target = _link_target(path, link["target"]) if link["type"] == "symlink" else None
        if target is not None and target in tree:
            return web.json_response(_file(repo, ref, target, tree[target]))
        return web.json_response(_entry(repo, ref, path, link))
    if path in tree:
        return web.json_response(_file(repo, ref, path, tree[path]))
    prefix = f"{path}/" if path else ""
    entries: dict[str, str] = {}
    for p in [*tree, *links]:
        if p.startswith(prefix):
            name, _, rest = p[len(prefix) :].partition("/")
            entries[name] = "dir" if rest else links[p]["type"] if p in links else "file"
    if entries:
        return web.json_response([_listed(repo, ref, prefix, name, kind) for name, kind in sorted(entries.items())])
    raise ApiError(404, "Not Found")


ROUTES = [
    ("GET", REPO_PATH + "/contents/{path:[\\s\\S]+}", get_contents),  # a name may hold a newline
    ("GET", REPO_PATH + "/contents", get_contents),  # the root directory
    ("GET", REPO_PATH + "/contents/", get_contents),
]
