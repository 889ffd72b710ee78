"""The read-only dashboard at /dashboard: a login with REVIEWER_DASHBOARD_TOKEN, then pages that only read.

The session is a signed cookie (HMAC-SHA256 under a key derived from the token, so every host of one deployment
accepts it and a new token ends every session): HttpOnly, SameSite=Strict, Secure over https, path /dashboard.
The token travels only in the login POST's body; nothing here logs it or puts it in a URL. Every route but login
and logout is a GET that reads; the two POSTs refuse another origin."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import cachetools
from aiohttp import web

from reviewer_app.admin import Admin
from reviewer_app.core.pricing import Price, estimate
from reviewer_app.core.queues import queue_rows
from reviewer_app.core.states import JobState
from reviewer_app.outcomes_report import read_outcomes
from reviewer_app.store.base import Store
from reviewer_app.web import dashboard_pages as pages
from reviewer_app.web.dashboard_learnings import learnings_page, named_findings
from reviewer_app.web.dashboard_outcomes import outcome_days, outcomes_page
from reviewer_app.web.dashboard_spend import DAY_SECONDS, DAYS, Spend, chart_svg, summarise

log = logging.getLogger(__name__)

COOKIE = "reviewer_dashboard"
SESSION_SECONDS = 12 * 3600
SESSION_GENERATION = "dashboard_session_generation"  # settings key: sessions signed for an older one are over
PAGE_SIZE = 50
RUNNING_SHOWN = 200
FAILED_SHOWN = 50
NAMED_FINDINGS = 2000  # a repository's newest findings read to name the ones its feedback is on
# The days before today change little (a late attempt's tokens, pruning): their spend is read again at most this
# often by each process, in the background (a request is answered from the last read meanwhile); today's is read at
# every request. The first read and the chart's first drawing happen when the process starts.
PAST_DAYS_SECONDS = 600.0
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _headers(nonce: str = "") -> dict[str, str]:
    style = f"'nonce-{nonce}'" if nonce else "'none'"
    return {
        "Content-Security-Policy": f"default-src 'none'; style-src {style}; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'",
        # same-origin, not no-referrer: with no-referrer a browser sends "Origin: null" on the login POST, and the
        # origin check needs the real one; links out to GitHub still carry no referrer.
        "Referrer-Policy": "same-origin",
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "no-store",
    }


MAX_ID = 2**63 - 1  # both stores keep ids as signed 64-bit integers


def strict_id(text: str) -> int | None:
    """A positive id written in ASCII digits that fits 64 bits, or None. ``str.isdigit`` alone accepts "²" and "٣",
    which ``int`` refuses or reads, and a 25-digit number overflows the database's integer."""
    if not text or not text.isascii() or not text.isdigit() or len(text) > 19:
        return None
    value = int(text)
    return value if 0 < value <= MAX_ID else None


class LoginThrottle:
    """Failed logins, counted per client address and overall over a sliding window: past either limit, logins wait
    (429 with Retry-After) until the oldest failure leaves the window. Guessing a long random token stays hopeless,
    and a flood of guesses costs the server nothing more than a counter."""

    def __init__(
        self,
        *,
        per_address: int = 5,
        overall: int = 50,
        window: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.per_address, self.overall, self.window, self.clock = per_address, overall, window, clock
        self._by_address: cachetools.TTLCache[str, list[float]] = cachetools.TTLCache(10_000, ttl=window, timer=clock)
        self._all: list[float] = []

    def _recent(self, times: list[float]) -> list[float]:
        since = self.clock() - self.window
        times[:] = [t for t in times if t > since]
        return times

    def wait(self, address: str) -> float:
        """Seconds before ``address`` may try again (0: now)."""
        waits = [0.0]
        for times, limit in (
            (self._recent(self._by_address.get(address, [])), self.per_address),
            (self._recent(self._all), self.overall),
        ):
            if len(times) >= limit:
                waits.append(times[-limit] + self.window - self.clock())
        return max(waits)

    def failed(self, address: str) -> None:
        now = self.clock()
        self._by_address[address] = [*self._recent(self._by_address.get(address, [])), now]
        self._all.append(now)


class Dashboard:
    def __init__(
        self,
        store: Store,
        *,
        token: str,
        prices: Mapping[str, Price],
        github_web_url: str = "https://github.com",
        clock: Callable[[], float] = time.time,
        secure_cookies: bool = False,
    ) -> None:
        self.store = store
        self.secure_cookies = secure_cookies  # Secure whatever the request says (the app is not on loopback)
        self.logins = LoginThrottle(clock=clock)
        self.prices = prices
        self.clock = clock
        self.admin = Admin(store, clock=clock, web_url=github_web_url)
        self.web_url = github_web_url
        self._token = token.encode()
        self._key = hmac.new(self._token, b"reviewer-app dashboard session v1", hashlib.sha256).digest()
        self._past: tuple[int, float, list[dict[str, Any]]] | None = None  # (today, read at, rows before today)
        # The last spend summed, keyed by what it was summed from, with its chart once drawn.
        self._summary: tuple[tuple[Any, ...], Spend, bytes | None] | None = None
        self._refresh: asyncio.Task[None] | None = None  # the background read of the days before today

    def register(self, app: web.Application) -> None:
        r = app.router
        r.add_get("/dashboard/login", self.login_page)
        r.add_post("/dashboard/login", self.login)
        r.add_post("/dashboard/logout", self.logout)
        r.add_get("/dashboard", self._signed_in(self.queue))
        r.add_get("/dashboard/workers", self._signed_in(self.workers))
        r.add_get("/dashboard/jobs", self._signed_in(self.jobs))
        r.add_get("/dashboard/jobs/{job_id:[0-9]+}", self._signed_in(self.job))
        r.add_get("/dashboard/spend", self._signed_in(self.spend))
        r.add_get("/dashboard/learnings", self._signed_in(self.learnings))
        r.add_get("/dashboard/outcomes", self._signed_in(self.outcomes))
        r.add_get("/dashboard/spend.svg", self._signed_in(self.spend_svg))
        app.on_startup.append(self._start_warming)
        app.on_cleanup.append(self._stop_refreshing)

    async def _start_warming(self, app: web.Application) -> None:
        self._refresh = asyncio.create_task(self._warm(), name="dashboard-spend-warm-up")

    async def _warm(self) -> None:
        """The 30 days' spend read and its chart drawn once at start, so no visitor pays for the first read."""
        try:
            await self._chart()
        except Exception as exc:  # the page reads again on its first request
            log.warning("dashboard: the spend could not be read ahead: %s", exc)

    async def _stop_refreshing(self, app: web.Application) -> None:
        if self._refresh is not None and not self._refresh.done():
            self._refresh.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresh

    # -- the session --------------------------------------------------------------------------------------

    def _sign(self, payload: str) -> str:
        return hmac.new(self._key, payload.encode(), hashlib.sha256).hexdigest()

    async def _generation(self) -> int:
        """The sessions' generation, kept in the store: a logout moves it on, and every session signed for an
        earlier one is over, on every host (a copied cookie included)."""
        return strict_id(await self.store.get_setting(SESSION_GENERATION) or "") or 1

    def new_session(self, generation: int = 1) -> str:
        payload = f"v2.{int(self.clock()) + SESSION_SECONDS}.{generation}.{secrets.token_hex(16)}"
        return f"{payload}.{self._sign(payload)}"

    def session_valid(self, value: str | None, generation: int = 1) -> bool:
        if not value or value.count(".") != 4:
            return False
        payload, _, mac = value.rpartition(".")
        if not hmac.compare_digest(mac.encode(), self._sign(payload).encode()):
            return False
        _, expires, signed_for, _ = payload.split(".")
        expiry = strict_id(expires)
        return expiry is not None and expiry > self.clock() and strict_id(signed_for) == generation

    async def _session_ok(self, request: web.Request) -> bool:
        value = request.cookies.get(COOKIE)
        return value is not None and self.session_valid(value, await self._generation())

    def _signed_in(self, handler: Handler) -> Handler:
        async def guarded(request: web.Request) -> web.StreamResponse:
            if not await self._session_ok(request):
                raise web.HTTPSeeOther("/dashboard/login", headers=_headers())
            return await handler(request)

        return guarded

    @staticmethod
    def _same_origin(request: web.Request) -> bool:
        """A form POST from this server's own pages; a browser always sends Origin with a POST."""
        origin = request.headers.get("Origin")
        if origin is None:
            return True  # not a browser (curl): no cookie of a victim rides along
        return urlsplit(origin).netloc == request.host

    @staticmethod
    def _https(request: web.Request) -> bool:
        return request.secure or request.headers.get("X-Forwarded-Proto", "").lower() == "https"

    # -- login and logout ---------------------------------------------------------------------------------

    def _html(
        self, title: str, body: str, *, status: int = 200, here: str = "", signed_in: bool = True
    ) -> web.Response:
        nonce = secrets.token_urlsafe(16)
        text = pages.page(title, body, nonce=nonce, here=here, signed_in=signed_in)
        return web.Response(text=text, status=status, content_type="text/html", headers=_headers(nonce))

    async def login_page(self, request: web.Request) -> web.Response:
        return self._html("Log in", pages.login_form(), signed_in=False)

    async def login(self, request: web.Request) -> web.Response:
        if not self._same_origin(request):
            return self._html(
                "Log in", pages.login_form(error="Cross-site login refused."), status=403, signed_in=False
            )
        address = request.remote or "unknown"
        wait = self.logins.wait(address)
        if wait:
            log.warning("dashboard: login from %s throttled for %.0f s after failed attempts", address, wait)
            response = self._html(
                "Log in",
                pages.login_form(error="Too many failed logins: try again later."),
                status=429,
                signed_in=False,
            )
            response.headers["Retry-After"] = str(int(wait) + 1)
            return response
        form = await request.post()
        given = form.get("token")
        if not isinstance(given, str) or not hmac.compare_digest(given.encode(), self._token):
            self.logins.failed(address)
            log.warning("dashboard: login refused (wrong token) from %s", address)
            return self._html("Log in", pages.login_form(error="Wrong token."), status=401, signed_in=False)
        response = web.HTTPSeeOther("/dashboard", headers=_headers())
        response.set_cookie(
            COOKIE,
            self.new_session(await self._generation()),
            max_age=SESSION_SECONDS,
            path="/dashboard",
            httponly=True,
            samesite="Strict",
            secure=self.secure_cookies or self._https(request),
        )
        log.info("dashboard: signed in from %s", request.remote)
        raise response

    async def logout(self, request: web.Request) -> web.Response:
        if not self._same_origin(request):
            return self._html(
                "Log in", pages.login_form(error="Cross-site logout refused."), status=403, signed_in=False
            )
        if await self._session_ok(request):  # a signed-in logout ends every session, not only this browser's
            await self.store.set_setting(SESSION_GENERATION, str(await self._generation() + 1))
            log.info("dashboard: signed out from %s; every session ended", request.remote)
        response = web.HTTPSeeOther("/dashboard/login", headers=_headers())
        response.del_cookie(COOKIE, path="/dashboard")
        raise response

    # -- pages --------------------------------------------------------------------------------------------

    async def queue(self, request: web.Request) -> web.Response:
        now = self.clock()
        stats = await self.store.queue_now(now=now, finished_since=now - DAY_SECONDS)
        body = pages.queue_page(
            now=now,
            by_state=stats.by_state,
            oldest_pending=stats.oldest_pending_created_at,
            expired_leases=stats.expired_leases,
            awaiting_reconciliation=stats.awaiting_reconciliation,
            paused=await self.store.get_setting("queue_paused") == "1",
            running=await self.store.list_jobs(states=(JobState.RUNNING.value,), limit=RUNNING_SHOWN),
            failed=await self.store.failed_since(now - DAY_SECONDS, limit=FAILED_SHOWN),
            queues=queue_rows(
                stats.pending_by_queue, [w.info.queues for w in await self.store.workers(now=now) if not w.gone]
            ),
        )
        return self._html("Queue", body, here="/dashboard")

    async def workers(self, request: web.Request) -> web.Response:
        now = self.clock()
        body = pages.workers_page(now=now, workers=await self.store.workers(now=now))
        return self._html("Workers", body, here="/dashboard/workers")

    async def learnings(self, request: web.Request) -> web.Response:
        repos = await self.store.learning_repos()
        taught = {repo: await self.store.list_learnings(repo) for repo, _ in repos}
        votes = {repo: await self.store.finding_feedback_counts(repo) for repo, _ in repos}
        names = {
            repo: named_findings(await self.store.recent_findings(int(repo), limit=NAMED_FINDINGS))
            for repo, _ in repos
            if votes[repo] and repo.isdigit()
        }
        body = learnings_page(repos, taught, votes, names)
        return self._html("Learnings", body, here="/dashboard/learnings")

    async def outcomes(self, request: web.Request) -> web.Response:
        repo = request.query.get("repo", "").strip()
        days, error = outcome_days(request.query.get("days", ""))
        report = await read_outcomes(
            self.store,
            since=self.clock() - days * DAY_SECONDS,
            repo=repo or None,
            prices=self.prices,
            web_url=self.web_url,
        )
        body = (f"<p class=paused>{pages.e(error)}</p>" if error else "") + outcomes_page(report, days=days, repo=repo)
        return self._html("Outcomes", body, here="/dashboard/outcomes")

    async def jobs(self, request: web.Request) -> web.Response:
        q = request.query
        repo, pr, state, before = (q.get(k, "").strip() for k in ("repo", "pr", "state", "before"))
        error = ""
        if pr and strict_id(pr) is None:
            error, pr = f"pull request {pr!r} is not a number", ""
        if state and state not in {s.value for s in JobState}:
            error, state = f"{state!r} is not a job state", ""
        jobs = await self.store.list_jobs(
            states=(state,) if state else (),
            repo=repo or None,
            pr_number=int(pr) if pr else None,
            limit=PAGE_SIZE + 1,
            before_id=strict_id(before),
        )
        next_before = jobs[PAGE_SIZE - 1].id if len(jobs) > PAGE_SIZE else None
        body = pages.jobs_page(
            now=self.clock(),
            jobs=jobs[:PAGE_SIZE],
            repo=repo,
            pr=pr,
            state=state,
            next_before=next_before,
            error=error,
        )
        return self._html("Jobs", body, here="/dashboard/jobs")

    async def job(self, request: web.Request) -> web.Response:
        job_id = strict_id(request.match_info["job_id"])
        job = None if job_id is None else await self.store.get_job(job_id)
        if job is None:
            return self._html(f"Job {job_id}", "<p>No such job (it may have been pruned).</p>", status=404)
        attempts = await self.store.attempts_of(job_id)
        costs = [
            estimate(
                {
                    "model": a.model,
                    "input_tokens": a.input_tokens,
                    "output_tokens": a.output_tokens,
                    "cache_creation_tokens": a.cache_creation_tokens,
                    "cache_read_tokens": a.cache_read_tokens,
                },
                self.prices,
            )
            for a in attempts
        ]
        body = pages.job_page(now=self.clock(), job=job, attempts=attempts, links=self.admin.links(job), costs=costs)
        return self._html(f"Job {job_id}", body, here="/dashboard/jobs")

    async def _spend(self) -> Spend:
        """The last 30 days' spend: the days before today from a read at most PAST_DAYS_SECONDS old, today's read
        now; summed again (and the chart drawn again) only when a number changed."""
        now = self.clock()
        today = int(now // DAY_SECONDS)
        midnight = today * DAY_SECONDS
        past = self._past
        if past is None or past[0] != today:  # the first read, or a new day: its rows are needed now
            past = self._past = await self._read_past(today, now)
        elif now - past[1] > PAST_DAYS_SECONDS and (self._refresh is None or self._refresh.done()):
            self._refresh = asyncio.create_task(self._refresh_past(today, now), name="dashboard-spend-refresh")
        todays = await self.store.spend_by_day(since=midnight, until=now + DAY_SECONDS)
        key = (today, past[1], tuple(tuple(sorted(r.items())) for r in todays))
        if self._summary is None or self._summary[0] != key:
            self._summary = (key, summarise(past[2] + todays, self.prices, now=now), None)
        return self._summary[1]

    async def _read_past(self, today: int, now: float) -> tuple[int, float, list[dict[str, Any]]]:
        since = (today - DAYS + 1) * DAY_SECONDS
        return (today, now, await self.store.spend_by_day(since=since, until=today * DAY_SECONDS))

    async def _refresh_past(self, today: int, now: float) -> None:
        try:
            self._past = await self._read_past(today, now)
        except Exception as exc:  # the last read stays; the next request tries again
            log.warning("dashboard: the spend could not be read again: %s", exc)

    async def _chart(self) -> bytes:
        spend = await self._spend()
        assert self._summary is not None
        key, _, svg = self._summary
        if svg is None:  # drawing takes longer than reading: once per change of the numbers
            svg = chart_svg(spend)
            self._summary = (key, spend, svg)
        return svg

    async def spend(self, request: web.Request) -> web.Response:
        spend = await self._spend()
        body = pages.spend_page(days=DAYS, spend=spend)
        return self._html("Spend", body, here="/dashboard/spend")

    async def spend_svg(self, request: web.Request) -> web.Response:
        headers = _headers()
        # The image's own styles are inline; as an <img> it runs no script, and opened alone none is allowed either.
        headers["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"
        return web.Response(body=await self._chart(), content_type="image/svg+xml", headers=headers)
