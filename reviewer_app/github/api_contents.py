"""What the app reads of a repository besides its pull requests: files and directories at a commit, and what a
user may do in it."""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Sequence
from typing import Any

from reviewer_app.core.errors import PermanentError
from reviewer_app.core.file_text import as_read
from reviewer_app.core.repo_paths import UnsafePath, url_path
from reviewer_app.github.api_transport import GitHubTransport, split_repo
from reviewer_app.github.graphql import BLOBS_PER_QUERY, BlobAnswer, blob_answers, blobs_query, blobs_variables

log = logging.getLogger(__name__)

COMMIT_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class ContentCalls(GitHubTransport):
    """A file's text, many files' texts at once (GraphQL), a path's contents entry, a collaborator's permission."""

    async def get_file_content(self, installation_id: int, repo: str, path: str, ref: str) -> str | None:
        """The text of ``path`` at ``ref``; None if there is no such file (or it is a directory or too big); a text
        holding a NUL byte (core/file_text.py's NOT_TEXT) when the file is not text.

        Read at a branch (the repository's config on the base branch), the read is conditional: the same file is read
        by every review of the repository, and an unchanged one costs no rate limit. A commit's files never change
        (review/reading.py keeps them)."""
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
            conditional=COMMIT_SHA.fullmatch(ref) is None,
        )
        if not isinstance(body, dict) or body.get("type") != "file" or body.get("encoding") != "base64":
            return None
        try:
            return as_read(base64.b64decode(body.get("content", "")))  # a file that is not UTF-8: NOT_TEXT
        except (binascii.Error, ValueError) as exc:
            raise PermanentError(f"GitHub sent {what} in a form we cannot decode") from exc

    async def read_blobs(
        self, installation_id: int, repo: str, files: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], BlobAnswer]:
        """What GitHub's GraphQL API says of each ``(commit, path)`` of ``files``, a hundred files to a query (one
        point of the GraphQL limit each); each path travels as a variable, never in the document (graphql.py)."""
        answers: dict[tuple[str, str], BlobAnswer] = {}
        wanted = list(dict.fromkeys(files))
        for start in range(0, len(wanted), BLOBS_PER_QUERY):
            chunk = wanted[start : start + BLOBS_PER_QUERY]
            data = await self._graphql(
                blobs_query(len(chunk)),
                installation_id=installation_id,
                repo=repo,
                what=f"{len(chunk)} files of {repo}",
                write=False,
                **split_repo(repo),
                **blobs_variables([f"{ref}:{path}" for ref, path in chunk]),
            )
            limit = data.get("rateLimit") if isinstance(data, dict) else None
            if isinstance(limit, dict):
                log.debug("%d files of %s read for %s GraphQL points", len(chunk), repo, limit.get("cost"))
            answers.update(zip(chunk, blob_answers(data, len(chunk)), strict=True))
        return answers

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
