"""A pull request's review threads through GitHub's GraphQL API (documents: graphql.py): reading them, resolving
one, replying in one."""

from __future__ import annotations

from reviewer_app.core.links import confine_links
from reviewer_app.github.api_transport import GitHubTransport, Json, split_repo
from reviewer_app.github.graphql import REPLY_IN_THREAD_MUTATION, RESOLVE_THREAD_MUTATION, REVIEW_THREADS_QUERY


class ReviewThreadCalls(GitHubTransport):
    """Review threads over GraphQL (``_graphql``: the same auth, retries, pacing and error mapping as the REST calls)."""

    async def review_threads(self, installation_id: int, repo: str, number: int) -> list[Json]:
        """Every review thread of the pull request: id, isResolved, resolvedBy (a person's login; null when an App
        resolved it), path and its first 50 comments (fullDatabaseId,
        author's __typename and login, the review's fullDatabaseId, originalLine; totalCount counts them all). The
        ids come as GitHub sends BigInts, strings: read them with ``full_database_id``."""
        threads: list[Json] = []
        cursor: str | None = None
        while True:
            data = await self._graphql(
                REVIEW_THREADS_QUERY,
                installation_id=installation_id,
                repo=repo,
                what=f"review threads of {repo}#{number}",
                write=False,
                **split_repo(repo),
                number=number,
                cursor=cursor,
            )
            pull = ((data.get("repository") or {}).get("pullRequest")) or {}
            page = pull.get("reviewThreads") or {}
            threads.extend(page.get("nodes") or [])
            info = page.get("pageInfo") or {}
            if not info.get("hasNextPage") or not info.get("endCursor"):
                return threads
            cursor = str(info["endCursor"])

    async def resolve_review_thread(self, installation_id: int, repo: str, thread_id: str) -> None:
        """Resolve a review thread of ``repo`` (resolving a resolved one changes nothing)."""
        await self._graphql(
            RESOLVE_THREAD_MUTATION,
            installation_id=installation_id,
            repo=repo,
            what=f"resolving review thread {thread_id}",
            write=True,
            thread=thread_id,
        )

    async def reply_in_thread(self, installation_id: int, repo: str, thread_id: str, body: str) -> None:
        """Post ``body`` as a reply in a review thread of ``repo``."""
        await self._graphql(
            REPLY_IN_THREAD_MUTATION,
            installation_id=installation_id,
            repo=repo,
            what=f"a reply in review thread {thread_id}",
            write=True,
            thread=thread_id,
            body=confine_links(body, await self.web_host()),  # as every write's text (api_transport.py's _write)
        )
