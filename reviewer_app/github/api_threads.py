"""A pull request's review threads through GitHub's GraphQL API (documents: graphql.py): reading them, resolving
one, replying in one."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
import gidgethub

from reviewer_app.core.errors import InstallationUnavailable, PermanentError, RateLimited, TransientError
from reviewer_app.github.api_errors import map_github_error, redact
from reviewer_app.github.api_transport import GitHubTransport, Json, split_repo
from reviewer_app.github.graphql import (
    REPLY_IN_THREAD_MUTATION,
    RESOLVE_THREAD_MUTATION,
    REVIEW_THREADS_QUERY,
    graphql_limit_retry_at,
)
from reviewer_app.github.pacing import WritePriority

log = logging.getLogger(__name__)


class ReviewThreadCalls(GitHubTransport):
    """Review threads over GraphQL, with the same auth, retries, pacing and error mapping as the REST calls."""

    async def _graphql(
        self, query: str, *, installation_id: int, repo: str, what: str, write: bool, **variables: Any
    ) -> Json:
        """One GraphQL request with the installation's token. Queries are retried in place like REST reads;
        mutations take the installation's paced write turn (bulk work: they yield to a review) and are never
        repeated. GitHub's rate limits, in either of its shapes, are ``RateLimited`` with GitHub's wait."""
        failures, token_renewed = 0, False
        while True:
            try:
                api = self._gh.with_token(await self.tokens.get(installation_id, repo))
            except (gidgethub.HTTPException, TimeoutError, aiohttp.ClientError) as exc:
                subject = f"installation {installation_id} (token)"
                error = map_github_error(exc, what=subject, now=self._clock(), secrets=self.tokens.live_tokens())
                raise InstallationUnavailable(error.reason) if type(error) is PermanentError else error from None
            try:
                if not write:
                    return await api.graphql(query, endpoint=self._graphql_url, **variables)
                async with self.pacer.turn(installation_id, WritePriority.BULK):
                    return await api.graphql(query, endpoint=self._graphql_url, **variables)
            except gidgethub.GraphQLAuthorizationFailure:
                if token_renewed:
                    raise PermanentError(f"GitHub rejected the app's credentials on {what}") from None
                self.tokens.invalidate(installation_id)
                token_renewed = True
            except (gidgethub.QueryError, gidgethub.BadGraphQLRequest) as exc:
                status, headers = api.last_answer
                retry_at = graphql_limit_retry_at(status, headers, exc.response, self._clock())
                if retry_at is not None:
                    log.warning("GitHub rate-limited the GraphQL %s (%s); waiting until %.0f", what, status, retry_at)
                    raise RateLimited(
                        f"GitHub rate limit reached on {what} ({status}); retry after {retry_at:.0f}", retry_at=retry_at
                    ) from None
                errors = (exc.response.get("errors") if isinstance(exc.response, dict) else None) or [exc.response]
                first = errors[0] if isinstance(errors[0], dict) else {}
                message = redact(str(first.get("message") or "query error"), self.tokens.live_tokens())
                log.warning("GitHub refused the GraphQL %s (%s): %s", what, status, message)
                raise PermanentError(f"GitHub refused {what}: {message}") from None
            except (gidgethub.GitHubBroken, gidgethub.GraphQLException, TimeoutError, aiohttp.ClientError) as exc:
                if not write and failures < len(self._read_retry_delays):
                    delay = self._read_retry_delays[failures]
                    failures += 1
                    log.warning(
                        "GitHub GraphQL %s failed (%s); retry %d in %.1fs", what, type(exc).__name__, failures, delay
                    )
                    await asyncio.sleep(delay)
                    continue
                log.warning("GitHub GraphQL %s gave up (%s)", what, type(exc).__name__)
                raise TransientError(
                    f"GitHub's GraphQL API failed on {what} ({type(exc).__name__}); will retry"
                ) from None

    async def review_threads(self, installation_id: int, repo: str, number: int) -> list[Json]:
        """Every review thread of the pull request: id, isResolved, path and its first 50 comments (fullDatabaseId,
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
            body=body,
        )
