"""The GitHub calls the app makes (REST, and GraphQL for review threads): installation auth, in-place retries of reads,
and error mapping."""

from __future__ import annotations

import asyncio
import base64
import binascii
import copy
import logging
import re
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import gidgethub
import gidgethub.aiohttp
import yarl

from reviewer_app.core.errors import InstallationUnavailable, JobError, PermanentError, RateLimited, TransientError
from reviewer_app.core.repo_paths import UnsafePath, url_path
from reviewer_app.github.auth import AppCredentials, InstallationTokens
from reviewer_app.github.graphql import (
    REPLY_IN_THREAD_MUTATION,
    RESOLVE_THREAD_MUTATION,
    REVIEW_THREADS_QUERY,
    graphql_endpoint,
    graphql_limit_retry_at,
    limit_wait,
)
from reviewer_app.github.pacing import WritePacer, WritePriority
from reviewer_app.redaction import redact_url

log = logging.getLogger(__name__)

MAX_PULL_FILES = 3000  # GitHub lists no more than this many files of a pull request
MAX_COMPARE_FILES = 300  # a comparison's `files` stop at this many, without saying how many there are
PER_PAGE = 100
API_VERSION = "2022-11-28"
ACCEPT = "application/vnd.github+json"  # GitHub's documented media type (gidgethub's default is the older v3 one)
Json = dict[str, Any]

_SECRET_RE = re.compile(
    r"gh[pousr]_[A-Za-z0-9_]+"  # GitHub tokens
    r"|eyJ[\w-]+\.[\w-]+\.[\w-]+"  # JWTs
    r"|-----BEGIN [A-Z ]+-----.*?-----END [A-Z ]+-----",  # PEM keys
    re.S,
)


def redact(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` without anything that looks like a token, a JWT or a key, nor any of ``secrets``, nor the
    credentials of a URL."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "<redacted>")
    return redact_url(_SECRET_RE.sub("<redacted>", text))


def rate_limit_retry_at(status: int, headers: Mapping[str, str], message: str, now: float) -> float | None:
    """When to try again if this REST response is a primary or secondary rate limit; None if it is not one (a plain
    403 is a permission problem). The wait follows GitHub's guidance (``limit_wait``)."""
    if status not in (403, 429):
        return None
    lowered = {key.lower(): value for key, value in headers.items()}
    if not (
        status == 429
        or "retry-after" in lowered
        or lowered.get("x-ratelimit-remaining") == "0"
        or "rate limit" in message.lower()
    ):
        return None
    return limit_wait(headers, now)


def map_github_error(exc: BaseException, *, what: str, now: float, secrets: Sequence[str] = ()) -> JobError:
    """The job error for a failed GitHub call on ``what`` (e.g. "pull request o/r#3"), free of secrets."""
    if isinstance(exc, gidgethub.HTTPException):
        status = int(exc.status_code)
        message = redact(str(exc), secrets)
        retry_at = rate_limit_retry_at(status, exc.headers, message, now)
        if retry_at is not None:
            return RateLimited(
                f"GitHub rate limit reached on {what} ({status}); retry after {retry_at:.0f}", retry_at=retry_at
            )
        if status >= 500:
            return TransientError(f"GitHub answered {status} on {what}; will retry")
        if status == 401:
            return PermanentError(f"GitHub rejected the app's credentials on {what}; check the app id and key")
        if status == 404:
            return PermanentError(f"{what} not found (deleted?)")
        if status == 403 and "suspended" in message.lower():
            return InstallationUnavailable(f"GitHub refused {what}: the installation is suspended")
        if status == 403:
            return PermanentError(f"GitHub refused {what}: {message} (installation suspended or permission missing?)")
        if status == 422:
            return PermanentError(f"GitHub rejected {what}: {message}")
        return PermanentError(f"GitHub answered {status} on {what}: {message}")
    if isinstance(exc, TimeoutError):
        return TransientError(f"GitHub did not answer {what} in time; will retry")
    if isinstance(exc, aiohttp.ClientError):
        return TransientError(f"connection to GitHub failed on {what} ({type(exc).__name__}); will retry")
    return TransientError(f"unexpected failure on {what} ({type(exc).__name__})")


def _is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, gidgethub.GitHubBroken | TimeoutError | aiohttp.ClientError)


def _split_repo(repo: str) -> dict[str, str]:
    owner, sep, name = repo.partition("/")
    if not (owner and sep and name) or "/" in name:
        raise ValueError(f"repository must be 'owner/name', got {repo!r}")
    return {"owner": owner, "name": name}


@dataclass(frozen=True)
class DeliveriesPage:
    """One page of the app's webhook deliveries, newest first; ``next_cursor`` None on the last page."""

    deliveries: list[Json]
    next_cursor: str | None


class _GitHubAPI(gidgethub.aiohttp.GitHubAPI):
    """gidgethub's aiohttp adapter with a per-request timeout and access to the next-page link."""

    on_response: Callable[[int | None], None] | None = None  # every HTTP status (token fetches too); None: no answer
    last_answer: tuple[int, Mapping[str, str]] = (0, {})  # status and headers of this instance's last response

    def __init__(
        self, session: aiohttp.ClientSession, requester: str, *, base_url: str, request_timeout: float
    ) -> None:
        super().__init__(session, requester, base_url=base_url)
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
        """One request; returns the decoded body and the ``rel="next"`` URL, if any."""
        body, next_url, _ = await self._make_request(
            method,
            url,
            url_vars,
            data,
            ACCEPT,
            jwt=jwt,
            oauth_token=oauth_token,
        )
        return body, next_url


class GitHubClient:
    """The app's GitHub API adapter: every call the app makes, each raising only ``JobError`` subclasses.

    Reads (GET) are retried in place on 5xx, timeouts and connection errors; writes are never retried in place
    (the caller reconciles instead), and an installation's writes go out one at a time. A 401 drops the
    installation's token and retries the call once with a fresh one.
    """

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        credentials: AppCredentials,
        *,
        user_agent: str = "reviewer-app",
        clock: Callable[[], float] = time.time,
        request_timeout: float = 30.0,
        read_retry_delays: Sequence[float] = (0.2, 0.5),
        token_safety_margin: float = 300.0,
        on_response: Callable[[int | None], None] | None = None,
        pacer: WritePacer | None = None,
    ) -> None:
        self._gh = _GitHubAPI(session, user_agent, base_url=base_url, request_timeout=request_timeout)
        self._gh.on_response = on_response
        self._credentials = credentials
        self._clock = clock
        self._read_retry_delays = tuple(read_retry_delays)
        self.tokens = InstallationTokens(self._gh, credentials, clock=clock, safety_margin=token_safety_margin)
        self.pacer = pacer or WritePacer()
        self._app_info: Json | None = None
        self._graphql_url = graphql_endpoint(base_url)

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
    ) -> tuple[Any, str | None]:
        """One API call with the app's auth: an installation token for the call's repository (the ``owner``/``name``
        of ``url_vars``, or ``repo`` for a next-page link) and the work being done, or the app JWT when
        ``installation_id`` is None."""
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
                    return await self._gh.page(method, url, url_vars, **auth)
                async with self.pacer.turn(installation_id, priority):  # one at a time, paced (pacing.py)
                    if before_send is not None:
                        await before_send()  # its exception (a lost lease) goes to the caller: nothing was sent
                    return await self._gh.page(method, url, url_vars, data=data, **auth)
            except (gidgethub.HTTPException, TimeoutError, aiohttp.ClientError) as exc:
                status = int(exc.status_code) if isinstance(exc, gidgethub.HTTPException) else None
                if missing_ok and phase == "send" and status == 404:
                    return None, None
                if status == 401 and phase == "send" and installation_id is not None and not token_renewed:
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
                error = map_github_error(exc, what=subject, now=self._clock(), secrets=self.tokens.live_tokens())
                if phase == "auth" and status == 422 and repo is not None:
                    # GitHub mints no token for a repository the installation cannot see (removed from it, gone).
                    error = InstallationUnavailable(f"{repo} not found in installation {installation_id} (removed?)")
                elif phase == "auth" and type(error) is PermanentError:
                    error = InstallationUnavailable(error.reason)
                log.warning("GitHub %s on %s gave up: %s", method, what, error.reason)
                raise error from None  # aiohttp errors can carry request headers, token included

    @staticmethod
    def _describe(exc: BaseException) -> str:
        if isinstance(exc, gidgethub.HTTPException):
            return f"HTTP {int(exc.status_code)}"
        return type(exc).__name__

    async def _get(
        self, url: str, url_vars: Mapping[str, Any] | None, *, installation_id: int | None, what: str
    ) -> Any:
        body, _ = await self._call("GET", url, url_vars, installation_id=installation_id, what=what)
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
    ) -> list[Any]:
        """Every item of a paginated list, following ``Link`` headers; each page is retried on its own."""
        items: list[Any] = []
        next_url: str | None = url
        page_vars: Mapping[str, Any] | None = url_vars
        repo = f"{url_vars['owner']}/{url_vars['name']}" if "owner" in url_vars and "name" in url_vars else None
        while next_url is not None:
            body, next_url = await self._call(
                "GET", next_url, page_vars, installation_id=installation_id, what=what, repo=repo
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

    # -------------------------------------------------------------------------------------- the app

    async def app_info(self) -> Json:
        """GET /app, fetched once."""
        if self._app_info is None:
            self._app_info = await self._get("/app", None, installation_id=None, what="the app")
        return self._app_info

    async def bot_login(self) -> str:
        """The login the app's reviews and comments carry, e.g. ``reviewer-app[bot]``."""
        return f"{(await self.app_info())['slug']}[bot]"

    async def list_app_deliveries(self, per_page: int = PER_PAGE, cursor: str | None = None) -> DeliveriesPage:
        body, next_url = await self._call(
            "GET",
            "/app/hook/deliveries{?per_page,cursor}",
            {"per_page": per_page, "cursor": cursor},
            installation_id=None,
            what="the app's webhook deliveries",
        )
        next_cursor = None
        if next_url is not None:
            next_cursor = urllib.parse.parse_qs(urllib.parse.urlsplit(next_url).query).get("cursor", [None])[0]
        return DeliveriesPage(deliveries=list(body), next_cursor=next_cursor)

    async def redeliver(self, delivery_id: int) -> None:
        await self._write(
            "POST",
            "/app/hook/deliveries/{delivery_id}/attempts",
            {"delivery_id": delivery_id},
            installation_id=None,
            what=f"webhook delivery {delivery_id}",
            data=b"",
        )

    async def list_installations(self) -> list[Json]:
        """Every installation of the app (app JWT), suspended ones included."""
        return await self._get_all(
            "/app/installations{?per_page}",
            {"per_page": PER_PAGE},
            installation_id=None,
            what="the app's installations",
        )

    async def get_app_installation(self, installation_id: int) -> Json | None:
        """The installation as GitHub knows it now (app JWT; ``suspended_at`` set when suspended), None when it is gone."""
        body, _ = await self._call(
            "GET",
            "/app/installations/{installation_id}",
            {"installation_id": installation_id},
            installation_id=None,
            what=f"installation {installation_id}",
            missing_ok=True,
        )
        return body if isinstance(body, dict) else None

    async def list_installation_repositories(self, installation_id: int) -> list[Json]:
        """The repositories the installation may access."""
        return await self._get_all(
            "/installation/repositories{?per_page}",
            {"per_page": PER_PAGE},
            installation_id=installation_id,
            what=f"repositories of installation {installation_id}",
            iterable_key="repositories",
        )

    # ------------------------------------------------------------------------------- pull requests

    async def get_pull(self, installation_id: int, repo: str, number: int) -> Json:
        return await self._get(
            "/repos/{owner}/{name}/pulls/{number}",
            {**_split_repo(repo), "number": number},
            installation_id=installation_id,
            what=f"pull request {repo}#{number}",
        )

    async def list_pull_files(self, installation_id: int, repo: str, number: int) -> list[Json]:
        """The PR's files (GitHub-shaped entries; ``patch`` may be absent), at most 3000 as GitHub caps it."""
        return await self._get_all(
            "/repos/{owner}/{name}/pulls/{number}/files{?per_page}",
            {**_split_repo(repo), "number": number, "per_page": PER_PAGE},
            installation_id=installation_id,
            what=f"files of pull request {repo}#{number}",
            limit=MAX_PULL_FILES,
        )

    async def list_reviews(self, installation_id: int, repo: str, number: int) -> list[Json]:
        return await self._get_all(
            "/repos/{owner}/{name}/pulls/{number}/reviews{?per_page}",
            {**_split_repo(repo), "number": number, "per_page": PER_PAGE},
            installation_id=installation_id,
            what=f"reviews of pull request {repo}#{number}",
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
            {**_split_repo(repo), "number": number},
            installation_id=installation_id,
            what=f"review on pull request {repo}#{number}",
            data={"commit_id": commit_id, "body": body, "event": event, "comments": [dict(c) for c in comments]},
            before_send=before_send,
            priority=WritePriority.PUBLISH,  # never behind an installation's bulk writes
        )

    async def list_open_pulls(self, installation_id: int, repo: str) -> list[Json]:
        return await self._get_all(
            "/repos/{owner}/{name}/pulls{?state,per_page}",
            {**_split_repo(repo), "state": "open", "per_page": PER_PAGE},
            installation_id=installation_id,
            what=f"open pull requests of {repo}",
        )

    async def compare(self, installation_id: int, repo: str, base: str, head: str) -> Json:
        return await self._get(
            "/repos/{owner}/{name}/compare/{base}...{head}",
            {**_split_repo(repo), "base": base, "head": head},
            installation_id=installation_id,
            what=f"comparison {base[:12]}...{head[:12]} in {repo}",
        )

    # ---------------------------------------------------------------------------------- check runs

    async def list_check_runs_for_ref(
        self,
        installation_id: int,
        repo: str,
        sha: str,
        check_name: str | None = None,
        *,
        latest_only: bool = False,
    ) -> list[Json]:
        """This app's check runs on ``sha``, newest first.

        All of them by default: GitHub's own default (``filter=latest``) hides older runs of the same name, and
        a caller reconciling by ``external_id`` must see every run to avoid creating a duplicate.
        """
        return await self._get_all(
            "/repos/{owner}/{name}/commits/{sha}/check-runs{?check_name,app_id,filter,per_page}",
            {
                **_split_repo(repo),
                "sha": sha,
                "check_name": check_name,
                "app_id": self._credentials.app_id,
                "filter": "latest" if latest_only else "all",
                "per_page": PER_PAGE,
            },
            installation_id=installation_id,
            what=f"check runs of {repo}@{sha[:12]}",
            iterable_key="check_runs",
        )

    async def create_check_run(
        self,
        installation_id: int,
        repo: str,
        *,
        name: str,
        head_sha: str,
        status: str = "in_progress",
        external_id: str | None = None,
        details_url: str | None = None,
        output: Mapping[str, Any] | None = None,
        conclusion: str | None = None,
    ) -> Json:
        data: Json = {"name": name, "head_sha": head_sha, "status": status}
        optional = {
            "external_id": external_id,
            "details_url": details_url,
            "conclusion": conclusion,
            "output": dict(output) if output is not None else None,
        }
        data.update({key: value for key, value in optional.items() if value is not None})
        return await self._write(
            "POST",
            "/repos/{owner}/{name}/check-runs",
            _split_repo(repo),
            installation_id=installation_id,
            what=f"check run {name!r} on {repo}@{head_sha[:12]}",
            data=data,
        )

    async def update_check_run(
        self,
        installation_id: int,
        repo: str,
        check_run_id: int,
        *,
        status: str | None = None,
        conclusion: str | None = None,
        output: Mapping[str, Any] | None = None,
        completed_at: str | None = None,
        external_id: str | None = None,
        details_url: str | None = None,
    ) -> Json:
        fields = {
            "status": status,
            "conclusion": conclusion,
            "completed_at": completed_at,
            "external_id": external_id,
            "details_url": details_url,
            "output": dict(output) if output is not None else None,
        }
        return await self._write(
            "PATCH",
            "/repos/{owner}/{name}/check-runs/{check_run_id}",
            {**_split_repo(repo), "check_run_id": check_run_id},
            installation_id=installation_id,
            what=f"check run {check_run_id} in {repo}",
            data={key: value for key, value in fields.items() if value is not None},
        )

    # ---------------------------------------------------------------------- comments and reactions

    async def list_issue_comments(self, installation_id: int, repo: str, number: int) -> list[Json]:
        return await self._get_all(
            "/repos/{owner}/{name}/issues/{number}/comments{?per_page}",
            {**_split_repo(repo), "number": number, "per_page": PER_PAGE},
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
            {**_split_repo(repo), "number": number},
            installation_id=installation_id,
            what=f"comment on {repo}#{number}",
            data={"body": body},
            before_send=before_send,
        )

    async def list_review_comments(self, installation_id: int, repo: str, number: int) -> list[Json]:
        """Every review comment of the pull request (the threads on its diff), oldest first."""
        return await self._get_all(
            "/repos/{owner}/{name}/pulls/{number}/comments{?per_page}",
            {**_split_repo(repo), "number": number, "per_page": PER_PAGE},
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
            {**_split_repo(repo), "number": number, "comment_id": comment_id},
            installation_id=installation_id,
            what=f"reply in thread {comment_id} of {repo}#{number}",
            data={"body": body},
            before_send=before_send,
        )

    async def create_reaction(
        self, installation_id: int, repo: str, comment_id: int, content: str, *, review_comment: bool = False
    ) -> Json:
        """A reaction on a conversation comment, or on a review comment (``review_comment``: GitHub's other route)."""
        url_vars = {**_split_repo(repo), "comment_id": comment_id}
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

    # ---------------------------------------------------------------------------- review threads (GraphQL)

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
                **_split_repo(repo),
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

    # ------------------------------------------------------------------------- contents, permission

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
            {**_split_repo(repo), "path": encoded, "ref": ref},
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
            {**_split_repo(repo), "path": encoded, "ref": ref},
            installation_id=installation_id,
            what=f"contents {path!r} of {repo}@{ref[:12]}",
            missing_ok=True,
        )
        return body

    async def collaborator_permission(self, installation_id: int, repo: str, user: str) -> str:
        """``admin``, ``write``, ``read`` or ``none``: what ``user`` may do in ``repo``."""
        body = await self._get(
            "/repos/{owner}/{name}/collaborators/{user}/permission",
            {**_split_repo(repo), "user": user},
            installation_id=installation_id,
            what=f"permission of {user} in {repo}",
        )
        return str(body.get("permission", "none"))
