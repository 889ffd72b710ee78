"""The GitHub client's core, under every concern's calls (the other ``api_*.py``): the HTTP adapter, installation
auth, in-place retries of reads, paced writes, pagination and error mapping."""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import aiohttp
import gidgethub
import gidgethub.aiohttp
import gidgethub.sansio
import yarl

from reviewer_app.core.errors import InstallationUnavailable, PermanentError, RateLimited, TransientError
from reviewer_app.core.links import carries_text, confine_write
from reviewer_app.github.api_errors import map_github_error, redact
from reviewer_app.github.auth import (
    TOKEN_INSTALLATION,
    AppCredentials,
    InstallationTokens,
    PersonalToken,
    TokenSource,
)
from reviewer_app.github.etags import CACHE_BYTES, EtagCache
from reviewer_app.github.graphql import graphql_endpoint, graphql_limit_retry_at
from reviewer_app.github.pacing import WritePacer, WritePriority

log = logging.getLogger(__name__)

PER_PAGE = 100
API_VERSION = "2022-11-28"
ACCEPT = "application/vnd.github+json"  # GitHub's documented media type (gidgethub's default is the older v3 one)
Json = dict[str, Any]


def _is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, gidgethub.GitHubBroken | TimeoutError | aiohttp.ClientError)


def split_repo(repo: str) -> dict[str, str]:
    """The ``owner`` and ``name`` of ``repo`` ("owner/name"), as URI template variables."""
    owner, sep, name = repo.partition("/")
    if not (owner and sep and name) or "/" in name:
        raise ValueError(f"repository must be 'owner/name', got {repo!r}")
    return {"owner": owner, "name": name}


class _GitHubAPI(gidgethub.aiohttp.GitHubAPI):
    """gidgethub's aiohttp adapter with a per-request timeout and access to the next-page link."""

    on_response: Callable[[int | None], None] | None = None  # every HTTP status (token fetches too); None: no answer
    last_answer: tuple[int, Mapping[str, str]] = (0, {})  # status and headers of this instance's last response

    def __init__(
        self,
        session: aiohttp.ClientSession,
        requester: str,
        *,
        base_url: str,
        request_timeout: float,
        cache: EtagCache | None = None,
    ) -> None:
        super().__init__(session, requester, base_url=base_url, cache=cache)
        self._timeout = aiohttp.ClientTimeout(total=request_timeout)

    async def _request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes = b""
    ) -> tuple[int, Mapping[str, str], bytes]:
        # Every request, token fetches through gidgethub's helpers included, names the media type and the API
        # version it was written against.
        headers = {**headers, "accept": ACCEPT, "x-github-api-version": API_VERSION}
        # Sent as built: yarl would otherwise decode %2e to "." and resolve "..", undoing the encoding of a path.
        target = yarl.URL(url, encoded=True)
        try:
            async with self._session.request(method, target, headers=headers, data=body, timeout=self._timeout) as r:
                answer = r.status, r.headers, await r.read()
        except (TimeoutError, aiohttp.ClientError):
            if self.on_response is not None:
                self.on_response(None)
            raise
        if self.on_response is not None:
            self.on_response(answer[0])
        self.last_answer = answer[0], answer[1]  # gidgethub's GraphQL errors keep the body, not the headers
        return answer

    def with_token(self, oauth_token: str) -> _GitHubAPI:
        """This adapter acting with ``oauth_token`` (gidgethub's ``graphql`` takes the token from the instance)."""
        api = copy.copy(self)
        api.oauth_token = oauth_token
        return api

    async def page(
        self,
        method: str,
        url: str,
        url_vars: Mapping[str, Any] | None,
        *,
        data: Any = b"",
        jwt: str | None = None,
        oauth_token: str | None = None,
    ) -> tuple[Any, str | None]:
        """One request; returns the decoded body and the ``rel="next"`` URL, if any.

        GitHub's ETag covers a page's body, not its ``Link`` header: a full page answered 304 may have a next page
        its kept copy never named (the list grew past it). For such a page the next one is asked for all the same
        (an empty page ends the list); read conditionally too, it costs nothing once kept."""
        body, next_url, status = await self._make_request(
            method, url, url_vars, data, ACCEPT, jwt=jwt, oauth_token=oauth_token
        )
        if status == 304 and next_url is None:
            next_url = _page_after(body, gidgethub.sansio.format_url(url, url_vars, base_url=self.base_url))
        return body, next_url


def _page_after(body: Any, url: str) -> str | None:
    """The URL of the page after ``url`` when ``body`` is a list page as long as ``url`` asks for (GitHub's default
    is 30), else None. The lists read conditionally are numbered by ``page`` (GitHub's pagination by page number)."""
    at = yarl.URL(url, encoded=True)
    asked, page = at.query.get("per_page", "30"), at.query.get("page", "1")
    if not (isinstance(body, list) and asked.isdigit() and page.isdigit() and len(body) >= int(asked) > 0):
        return None
    return str(at.update_query(page=str(int(page) + 1)))


class GitHubTransport:
    """What every call goes through: one request with the app's auth (installation token or app JWT; in token mode a
    person's token, github/auth.py's PersonalToken), reads retried in place, an installation's writes one at a time and paced, a 401 answered by one fresh token, and failures
    mapped to ``JobError`` subclasses. ``GitHubClient`` (client.py) adds the calls, one concern per module."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        credentials: AppCredentials | PersonalToken,
        *,
        user_agent: str = "reviewer-app",
        clock: Callable[[], float] = time.time,
        request_timeout: float = 30.0,
        read_retry_delays: Sequence[float] = (0.2, 0.5),
        token_safety_margin: float = 300.0,
        on_response: Callable[[int | None], None] | None = None,
        pacer: WritePacer | None = None,
        etag_cache_bytes: int = CACHE_BYTES,
    ) -> None:
        self._gh = _GitHubAPI(session, user_agent, base_url=base_url, request_timeout=request_timeout)
        self._gh.on_response = on_response
        # Reads the app repeats (the pull request, its files, its reviews, the repository's config) are conditional:
        # GitHub answers an unchanged one 304, which costs no rate limit (etags.py).
        self.etags = EtagCache(etag_cache_bytes)
        self._conditional = _GitHubAPI(
            session, user_agent, base_url=base_url, request_timeout=request_timeout, cache=self.etags
        )
        self._conditional.on_response = on_response
        self._credentials = credentials
        self._clock = clock
        self._read_retry_delays = tuple(read_retry_delays)
        self.tokens: TokenSource = (
            credentials
            if isinstance(credentials, PersonalToken)
            else InstallationTokens(self._gh, credentials, clock=clock, safety_margin=token_safety_margin)
        )
        self.pacer = pacer or WritePacer()
        self._app_info: Json | None = None
        self._token_user: Json | None = None  # token mode: whom the token belongs to (api_app.py's bot_login)
        self._graphql_url = graphql_endpoint(base_url)

    # ----------------------------------------------------------------------------------- who and where we are

    async def app_info(self) -> Json:
        """GET /app, fetched once."""
        if self._app_info is None:
            self._app_info = await self._get("/app", None, installation_id=None, what="the app")
        return self._app_info

    async def token_user(self) -> Json:
        """Token mode: GET /user, the person the token belongs to, fetched once."""
        if self._token_user is None:
            self._token_user = await self._get(
                "/user", None, installation_id=TOKEN_INSTALLATION, what="the token's user"
            )
        return self._token_user

    async def web_host(self) -> str:
        """The host of this GitHub's web pages (github.com, or a GitHub Enterprise Server's), as GitHub itself names
        it: the ``html_url`` of the app, or in token mode of the token's user. Links to it are the only ones the app
        publishes (``_write``)."""
        me = await (self.token_user() if isinstance(self.tokens, PersonalToken) else self.app_info())
        return yarl.URL(str(me.get("html_url") or "https://github.com")).host or "github.com"

    # ----------------------------------------------------------------------------------- the core

    async def _call(
        self,
        method: str,
        url: str,
        url_vars: Mapping[str, Any] | None = None,
        *,
        installation_id: int | None,
        what: str,
        data: Any = b"",
        missing_ok: bool = False,
        before_send: Callable[[], Awaitable[Any]] | None = None,
        priority: WritePriority = WritePriority.NORMAL,
        repo: str | None = None,
        conditional: bool = False,
    ) -> tuple[Any, str | None]:
        """One API call with the app's auth: an installation token for the call's repository (the ``owner``/``name``
        of ``url_vars``, or ``repo`` for a next-page link) and the work being done, or the app JWT when
        ``installation_id`` is None. A ``conditional`` read sends the ETag of the copy it keeps, if any."""
        failures = 0
        token_renewed = False
        if repo is None and url_vars is not None and "owner" in url_vars and "name" in url_vars:
            repo = f"{url_vars['owner']}/{url_vars['name']}"
        while True:
            phase = "auth"
            try:
                if installation_id is None:
                    auth = {"jwt": self.tokens.app_jwt()}
                else:
                    auth = {"oauth_token": await self.tokens.get(installation_id, repo)}
                phase = "send"
                if method == "GET":
                    return await (self._conditional if conditional else self._gh).page(method, url, url_vars, **auth)
                async with self.pacer.turn(installation_id, priority):  # one at a time, paced (pacing.py)
                    if before_send is not None:
                        await before_send()  # its exception (a lost lease) goes to the caller: nothing was sent
                    return await self._gh.page(method, url, url_vars, data=data, **auth)
            except (gidgethub.HTTPException, TimeoutError, aiohttp.ClientError) as exc:
                status = int(exc.status_code) if isinstance(exc, gidgethub.HTTPException) else None
                if missing_ok and phase == "send" and status == 404:
                    return None, None
                renewable = installation_id is not None and self.tokens.renews
                if status == 401 and phase == "send" and renewable and not token_renewed:
                    log.info("GitHub answered 401 on %s; renewing the installation token once", what)
                    self.tokens.invalidate(installation_id)
                    token_renewed = True
                    continue
                # A failed token fetch sent nothing, so it is safe to repeat even for a write.
                may_repeat = method == "GET" or phase == "auth"
                if may_repeat and _is_retryable(exc) and failures < len(self._read_retry_delays):
                    delay = self._read_retry_delays[failures]
                    failures += 1
                    log.warning(
                        "GitHub %s on %s failed (%s); retry %d in %.1fs",
                        method,
                        what,
                        self._describe(exc),
                        failures,
                        delay,
                    )
                    await asyncio.sleep(delay)
                    continue
                subject = f"installation {installation_id} (token)" if phase == "auth" else what
                error = map_github_error(
                    exc,
                    what=subject,
                    now=self._clock(),
                    secrets=self.tokens.live_tokens(),
                    person=isinstance(self.tokens, PersonalToken),
                )
                if phase == "auth" and status == 422 and repo is not None:
                    # GitHub mints no token for a repository the installation cannot see (removed from it, gone).
                    error = InstallationUnavailable(f"{repo} not found in installation {installation_id} (removed?)")
                elif phase == "auth" and type(error) is PermanentError:
                    error = InstallationUnavailable(error.reason)
                log.warning("GitHub %s on %s gave up: %s", method, what, error.reason)
                raise error from None  # aiohttp errors can carry request headers, token included

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

    @staticmethod
    def _describe(exc: BaseException) -> str:
        if isinstance(exc, gidgethub.HTTPException):
            return f"HTTP {int(exc.status_code)}"
        return type(exc).__name__

    async def _get(
        self,
        url: str,
        url_vars: Mapping[str, Any] | None,
        *,
        installation_id: int | None,
        what: str,
        conditional: bool = False,
    ) -> Any:
        body, _ = await self._call(
            "GET", url, url_vars, installation_id=installation_id, what=what, conditional=conditional
        )
        return body

    async def _get_all(
        self,
        url: str,
        url_vars: Mapping[str, Any],
        *,
        installation_id: int | None,
        what: str,
        iterable_key: str | None = None,
        limit: int | None = None,
        conditional: bool = False,
    ) -> list[Any]:
        """Every item of a paginated list, following ``Link`` headers; each page is retried on its own."""
        items: list[Any] = []
        next_url: str | None = url
        page_vars: Mapping[str, Any] | None = url_vars
        repo = f"{url_vars['owner']}/{url_vars['name']}" if "owner" in url_vars and "name" in url_vars else None
        while next_url is not None:
            body, next_url = await self._call(
                "GET",
                next_url,
                page_vars,
                installation_id=installation_id,
                what=what,
                repo=repo,
                conditional=conditional,
            )
            page_vars = None  # the next-page links are complete URLs
            items.extend(body[iterable_key] if iterable_key else body)
            if limit is not None and len(items) >= limit:
                return items[:limit]
        return items

    async def _write(
        self,
        method: str,
        url: str,
        url_vars: Mapping[str, Any],
        *,
        installation_id: int | None,
        what: str,
        data: Any,
        before_send: Callable[[], Awaitable[Any]] | None = None,
        priority: WritePriority = WritePriority.NORMAL,
    ) -> Any:
        if carries_text(data):
            # Everything the app publishes passes here last: links and images off GitHub's own host become text,
            # whoever wrote them (the model, a learning, a thread it quotes) and whatever was added on the way.
            data = confine_write(data, await self.web_host())
        body, _ = await self._call(
            method,
            url,
            url_vars,
            installation_id=installation_id,
            what=what,
            data=data,
            before_send=before_send,
            priority=priority,
        )
        return body
