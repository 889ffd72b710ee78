"""What the app reads of a repository besides its pull requests: files and directories at a commit, and what a
user may do in it."""

from __future__ import annotations

import base64
import binascii
import logging
from typing import Any

from reviewer_app.core.errors import PermanentError
from reviewer_app.core.repo_paths import UnsafePath, url_path
from reviewer_app.github.api_transport import GitHubTransport, split_repo

log = logging.getLogger(__name__)


class ContentCalls(GitHubTransport):
    """A file's text, a path's contents entry, a collaborator's permission."""

    async def get_file_content(self, installation_id: int, repo: str, path: str, ref: str) -> str | None:
        """The text of ``path`` at ``ref``; None if there is no such file (or it is a directory or too big)."""
        what = f"file {path!r} of {repo}@{ref[:12]}"
        try:
            encoded = url_path(path)
        except UnsafePath:
            log.info("%s: not a path a URL can name; reported unreadable", what)
            return None
        body, _ = await self._call(
            "GET",
            "/repos/{owner}/{name}/contents/{+path}{?ref}",
            {**split_repo(repo), "path": encoded, "ref": ref},
            installation_id=installation_id,
            what=what,
            missing_ok=True,
        )
        if not isinstance(body, dict) or body.get("type") != "file" or body.get("encoding") != "base64":
            return None
        try:
            return base64.b64decode(body.get("content", "")).decode("utf-8", errors="replace")
        except (binascii.Error, ValueError) as exc:
            raise PermanentError(f"GitHub sent {what} in a form we cannot decode") from exc

    async def get_contents(self, installation_id: int, repo: str, path: str, ref: str) -> Any:
        """GitHub's contents entry for ``path`` at ``ref`` as sent: a file, symlink or submodule object, or a
        directory's list of entries (``path`` "" is the root); None when there is no such path."""
        try:
            encoded = url_path(path) if path else ""
        except UnsafePath:
            return None
        body, _ = await self._call(
            "GET",
            "/repos/{owner}/{name}/contents/{+path}{?ref}",
            {**split_repo(repo), "path": encoded, "ref": ref},
            installation_id=installation_id,
            what=f"contents {path!r} of {repo}@{ref[:12]}",
            missing_ok=True,
        )
        return body

    async def collaborator_permission(self, installation_id: int, repo: str, user: str) -> str:
        """``admin``, ``write``, ``read`` or ``none``: what ``user`` may do in ``repo``."""
        body = await self._get(
            "/repos/{owner}/{name}/collaborators/{user}/permission",
            {**split_repo(repo), "user": user},
            installation_id=installation_id,
            what=f"permission of {user} in {repo}",
        )
        return str(body.get("permission", "none"))
