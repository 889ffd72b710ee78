"""What the app reads and posts on a pull request's conversation and diff: reviews, comments, replies in review
threads (REST) and reactions."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from reviewer_app.github.api_transport import PER_PAGE, GitHubTransport, Json, split_repo
from reviewer_app.github.pacing import WritePriority


class ReviewCalls(GitHubTransport):
    """Reviews, conversation and review comments, replies and reactions."""

    async def list_reviews(self, installation_id: int, repo: str, number: int, *, fresh: bool = False) -> list[Json]:
        """Every review of the pull request, oldest first. ``fresh``: no conditional request (no kept copy stands in
        for a page), for the marker lookup after a review POST whose answer was lost."""
        return await self._get_all(
            "/repos/{owner}/{name}/pulls/{number}/reviews{?per_page}",
            {**split_repo(repo), "number": number, "per_page": PER_PAGE},
            installation_id=installation_id,
            what=f"reviews of pull request {repo}#{number}",
            conditional=not fresh,  # read by the gate and again before posting
        )

    async def create_review(
        self,
        installation_id: int,
        repo: str,
        number: int,
        *,
        commit_id: str,
        body: str,
        event: str = "COMMENT",
        comments: Sequence[Mapping[str, Any]] = (),
        before_send: Callable[[], Awaitable[Any]] | None = None,
    ) -> Json:
        """Post a review pinned to ``commit_id``; comments are ``{path, line, side, body}`` (plus start_line).
        ``before_send`` runs once the installation's write lock is held, right before the request (and again
        before a repeat after a token renewal): the caller's last chance to refuse."""
        return await self._write(
            "POST",
            "/repos/{owner}/{name}/pulls/{number}/reviews",
            {**split_repo(repo), "number": number},
            installation_id=installation_id,
            what=f"review on pull request {repo}#{number}",
            data={"commit_id": commit_id, "body": body, "event": event, "comments": [dict(c) for c in comments]},
            before_send=before_send,
            priority=WritePriority.PUBLISH,  # never behind an installation's bulk writes
        )

    async def list_issue_comments(self, installation_id: int, repo: str, number: int) -> list[Json]:
        return await self._get_all(
            "/repos/{owner}/{name}/issues/{number}/comments{?per_page}",
            {**split_repo(repo), "number": number, "per_page": PER_PAGE},
            installation_id=installation_id,
            what=f"comments of {repo}#{number}",
        )

    async def create_issue_comment(
        self,
        installation_id: int,
        repo: str,
        number: int,
        body: str,
        *,
        before_send: Callable[[], Awaitable[Any]] | None = None,
    ) -> Json:
        """A comment on the pull request's conversation; ``before_send`` runs with the write turn held, right before
        the request (a fenced check that the job is still this attempt's)."""
        return await self._write(
            "POST",
            "/repos/{owner}/{name}/issues/{number}/comments",
            {**split_repo(repo), "number": number},
            installation_id=installation_id,
            what=f"comment on {repo}#{number}",
            data={"body": body},
            before_send=before_send,
        )

    async def list_review_comments(self, installation_id: int, repo: str, number: int) -> list[Json]:
        """Every review comment of the pull request (the threads on its diff), oldest first."""
        return await self._get_all(
            "/repos/{owner}/{name}/pulls/{number}/comments{?per_page}",
            {**split_repo(repo), "number": number, "per_page": PER_PAGE},
            installation_id=installation_id,
            what=f"review comments of {repo}#{number}",
        )

    async def create_review_comment_reply(
        self,
        installation_id: int,
        repo: str,
        number: int,
        comment_id: int,
        body: str,
        *,
        before_send: Callable[[], Awaitable[Any]] | None = None,
    ) -> Json:
        """A reply in the review thread that ``comment_id`` (its first comment) starts (``before_send``: as for
        create_issue_comment)."""
        return await self._write(
            "POST",
            "/repos/{owner}/{name}/pulls/{number}/comments/{comment_id}/replies",
            {**split_repo(repo), "number": number, "comment_id": comment_id},
            installation_id=installation_id,
            what=f"reply in thread {comment_id} of {repo}#{number}",
            data={"body": body},
            before_send=before_send,
        )

    async def create_reaction(
        self, installation_id: int, repo: str, comment_id: int, content: str, *, review_comment: bool = False
    ) -> Json:
        """A reaction on a conversation comment, or on a review comment (``review_comment``: GitHub's other route)."""
        url_vars = {**split_repo(repo), "comment_id": comment_id}
        what = f"reaction on {'review ' if review_comment else ''}comment {comment_id} in {repo}"
        data = {"content": content}
        if review_comment:
            return await self._write(
                "POST",
                "/repos/{owner}/{name}/pulls/comments/{comment_id}/reactions",
                url_vars,
                installation_id=installation_id,
                what=what,
                data=data,
                priority=WritePriority.BULK,
            )
        return await self._write(
            "POST",
            "/repos/{owner}/{name}/issues/comments/{comment_id}/reactions",
            url_vars,
            installation_id=installation_id,
            what=what,
            data=data,
            priority=WritePriority.BULK,
        )

    async def list_review_comment_reactions(self, installation_id: int, repo: str, comment_id: int) -> list[Json]:
        """Every reaction on a review comment, oldest first: each its ``content`` ("+1", "-1", ...) and ``user``.
        GitHub sends no webhook for a reaction; this is how the app learns of one."""
        return await self._get_all(
            "/repos/{owner}/{name}/pulls/comments/{comment_id}/reactions{?per_page}",
            {**split_repo(repo), "comment_id": comment_id, "per_page": PER_PAGE},
            installation_id=installation_id,
            what=f"reactions on review comment {comment_id} in {repo}",
        )
