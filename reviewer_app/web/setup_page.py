"""The setup page `serve` shows until a GitHub App is configured: register one through GitHub's manifest flow."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from html import escape
from typing import Any
from urllib.parse import urlparse

import aiohttp
from aiohttp import web

from reviewer_app.github.client import ACCEPT, API_VERSION
from reviewer_app.redaction import redact_url
from reviewer_app.settings.config import Config, model_missing
from reviewer_app.settings.envfile import update_env_file, writable_problem
from reviewer_app.web.app_registration import (
    CALLBACK_PATH,
    WEBHOOK_PATH,
    AppRegistration,
    SetupError,
    SetupStates,
    build_manifest,
    checked_organization,
    configured_with,
    is_loopback_host,
    load_manifest,
    new_setup_token,
    normalise_public_url,
    parse_conversion,
    registration_url,
    token_matches,
    valid_code,
)
from reviewer_app.web.limits import start_site

log = logging.getLogger(__name__)

START_PATH = "/setup/start"
EXCHANGE_TIMEOUT_SECONDS = 30.0
_NOT_ACCEPTED = "GitHub did not accept the code: it is unknown, already used or more than an hour old. Start again."


async def exchange_code(session: aiohttp.ClientSession, api_url: str, code: str) -> AppRegistration:
    """``POST /app-manifests/{code}/conversions`` (no authentication): the new App's id, key and secrets."""
    url = f"{api_url.rstrip('/')}/app-manifests/{code}/conversions"
    headers = {"Accept": ACCEPT, "User-Agent": "reviewer-app", "X-GitHub-Api-Version": API_VERSION}
    try:
        async with session.post(
            url, headers=headers, timeout=aiohttp.ClientTimeout(total=EXCHANGE_TIMEOUT_SECONDS)
        ) as resp:
            status = resp.status
            data = await resp.json(content_type=None) if status in (200, 201) else None
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise SetupError(
            f"cannot reach GitHub at {redact_url(api_url)} ({type(exc).__name__}); check GITHUB_API_URL"
        ) from None
    except ValueError:
        raise SetupError("GitHub's answer to the code exchange is not JSON; start again") from None
    if status in (404, 422):
        raise SetupError(_NOT_ACCEPTED)
    if status not in (200, 201):
        raise SetupError(f"GitHub answered {status} to the code exchange; start again")
    return parse_conversion(data)


@dataclass
class SetupFlow:
    """One unconfigured server's setup: the token it printed, its pending states, and what to do once done."""

    cfg: Config
    token: str
    on_configured: Callable[[AppRegistration], None]
    manifest: dict[str, Any] = field(default_factory=load_manifest)
    states: SetupStates = field(default_factory=SetupStates)
    registration: AppRegistration | None = None
    session: aiohttp.ClientSession | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def index(self, request: web.Request) -> web.Response:
        if self.registration is not None:
            return _already_configured()
        return _page(
            "Register reviewer-app", _index_html(self, _suggested_public_url(request), claude_problem(self.cfg))
        )

    async def start(self, request: web.Request) -> web.Response:
        """Check the setup token, then hand the browser a form that posts the manifest to GitHub."""
        if self.registration is not None:
            return _already_configured()
        form = await request.post()
        if not token_matches(str(form.get("token", "")), self.token):
            log.warning("setup refused: wrong setup token (from %s)", request.remote)
            return _error(403, "Wrong setup token", "The setup token is printed in this server's log when it starts.")
        claude = claude_problem(self.cfg)
        if claude is not None:
            return _error(
                409,
                "Set the model key first",
                f"{claude}. Reviews cannot run without it: set it in this server's environment or in "
                f"{self.cfg.env_file}, restart the server, and start again with the new setup token.",
            )
        problem = writable_problem(self.cfg.env_file)
        if problem is not None:
            return _error(
                500,
                "Cannot save the App's credentials",
                f"{problem}. Set REVIEWER_ENV_FILE to a writable path and restart.",
            )
        try:
            public_url = normalise_public_url(str(form.get("public_url", "")))
            manifest = build_manifest(
                self.manifest,
                public_url=public_url,
                name=str(form.get("name", "")),
                webhook_url=str(form.get("webhook_url", "")),
            )
            organization = checked_organization(str(form.get("organization", "")))
        except SetupError as exc:
            return _error(400, "Cannot start the registration", str(exc))
        state = self.states.issue(public_url, manifest["hook_attributes"]["url"])
        target = registration_url(self.cfg.github_url, state=state, organization=organization)
        return _page("Create the App on GitHub", _handoff_html(target, manifest), form_to=_origin(target))

    async def callback(self, request: web.Request) -> web.StreamResponse:
        """GitHub sends the browser back here: check the state, exchange the code, save the credentials."""
        async with self._lock:  # two tabs finishing at once: the first one wins, the second is told so
            if self.registration is not None:
                return _already_configured()
            pending = self.states.consume(request.query.get("state", ""))
            if pending is None:
                log.warning("setup callback refused: unknown, used or expired state (from %s)", request.remote)
                return _error(403, "This link is not valid", "Unknown, already used or expired state. Start again.")
            code = request.query.get("code", "")
            if not valid_code(code):
                return _error(400, "No usable code", "GitHub's redirect carried no code. Start again.")
            assert self.session is not None
            try:
                registration = await exchange_code(self.session, self.cfg.github_api_url, code)
            except SetupError as exc:
                log.warning("setup: the code exchange failed: %s", exc)
                return _error(502, "GitHub did not hand over the App", str(exc))
            try:
                await asyncio.to_thread(update_env_file, self.cfg.env_file, registration.env_values())
            except OSError as exc:
                log.error(
                    "setup: App %s registered but %s cannot be written (%s)",
                    registration.app_id,
                    self.cfg.env_file,
                    exc.strerror,
                )
                return _error(
                    500,
                    "The App was registered, but its credentials could not be saved",
                    f"Writing {self.cfg.env_file} failed ({exc.strerror}). In the App's settings on GitHub, "
                    "generate a new private key and webhook secret, and configure them by hand.",
                )
            self.registration = registration
            log.info(
                "setup: GitHub App %r (id %s) registered; credentials saved to %s; GitHub sends webhooks to %s",
                registration.slug,
                registration.app_id,
                self.cfg.env_file,
                redact_url(pending.webhook_url or pending.public_url + WEBHOOK_PATH),
            )
        response = _page("reviewer-app is registered", _done_html(registration, self.cfg.env_file))
        await response.prepare(request)
        await response.write_eof()  # the page is on its way before the server switches to the configured app
        self.on_configured(registration)
        return response

    async def webhook(self, request: web.Request) -> web.Response:
        return web.json_response({"error": "app not configured yet"}, status=503)

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "setup": "waiting for a GitHub App"})

    async def readyz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "unavailable", "reason": "app not configured yet"}, status=503)

    async def client_session(self, app: web.Application) -> AsyncIterator[None]:
        self.session = aiohttp.ClientSession()
        try:
            yield
        finally:
            await self.session.close()


def make_setup_app(flow: SetupFlow) -> web.Application:
    app = web.Application(client_max_size=64 * 1024)
    app.cleanup_ctx.append(flow.client_session)
    app.router.add_get("/", flow.index)
    app.router.add_post(START_PATH, flow.start)
    app.router.add_get(CALLBACK_PATH, flow.callback)
    app.router.add_post(WEBHOOK_PATH, flow.webhook)
    app.router.add_get("/healthz", flow.healthz)
    app.router.add_get("/readyz", flow.readyz)
    return app


def claude_problem(cfg: Config) -> str | None:
    """Why reviews could not run once the App is registered (no model key, or no Vertex AI region), or None."""
    missing = model_missing(cfg) if cfg.runner == "review" else None
    if missing is None:
        return None
    if missing.env == "ANTHROPIC_API_KEY":
        return "ANTHROPIC_API_KEY (the Claude API key) is not set"
    return missing.what


def _what_to_set(claude: str) -> str:
    """The warning's first words: what to set, in bold, and what it is."""
    if claude.startswith("ANTHROPIC_API_KEY"):
        return "<b>First: set ANTHROPIC_API_KEY</b>, a Claude API key,"
    return f"<b>First: set what the model provider needs</b> ({escape(claude)}),"


async def run_setup(cfg: Config, stop: asyncio.Event, *, token: str | None = None) -> Config | None:
    """Serve the setup page until an App is registered (its configuration is returned) or ``stop`` is set (None)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[AppRegistration] = loop.create_future()

    def configured(registration: AppRegistration) -> None:
        if not done.done():
            done.set_result(registration)

    flow = SetupFlow(cfg, token or new_setup_token(), on_configured=configured)
    runner, _ = await start_site(make_setup_app(flow), cfg, cfg.host, cfg.port)
    host = "localhost" if cfg.host in ("0.0.0.0", "::", "") else cfg.host
    problem = writable_problem(cfg.env_file)
    if problem is not None:
        log.error("the setup page cannot save credentials: %s; set REVIEWER_ENV_FILE to a writable path", problem)
    # The token is printed on purpose, like a notebook server's: whoever completes setup decides whose App this
    # server runs, so only someone who can read this log may. It is worthless once the App is configured.
    log.warning(
        "no GitHub App is configured: open http://%s:%s/ to register one. Setup token: %s", host, cfg.port, flow.token
    )
    claude = claude_problem(cfg)
    if claude is not None:
        log.warning(
            "%s: set it and restart before registering the App; the setup page does not go on to GitHub without it, "
            "since no review can run",
            claude,
        )
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({done, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        await runner.cleanup()
    if not done.done():
        done.cancel()
        return None
    log.info("setup complete: switching to the configured app on the same port, no restart needed")
    return configured_with(cfg, done.result())


# ------------------------------------------------------------------------------------------------ pages

_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:44rem;margin:2rem auto;padding:0 1rem;line-height:1.5}"
    "label{display:block;margin-top:1rem;font-weight:600}input[type=text],input[type=password]"
    "{width:100%;padding:.4rem;font:inherit}button{margin-top:1.5rem;padding:.5rem 1rem;font:inherit}"
    "code{background:#f3f3f3;padding:0 .2rem}.hint{color:#555;font-weight:400}"
)


def _page(title: str, body: str, status: int = 200, *, form_to: str = "") -> web.Response:
    """A setup page: no scripts, no framing, no referrer (states travel in URLs), nothing cached, and forms
    that post to this server only, or to ``form_to`` (GitHub's origin) on the page that hands over the manifest."""
    html = (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{escape(title)}</title>"
        f"<meta name=viewport content='width=device-width'><style>{_STYLE}</style></head>"
        f"<body><h1>{escape(title)}</h1>{body}</body></html>"
    )
    headers = {
        "Content-Security-Policy": f"default-src 'none'; style-src 'unsafe-inline'; form-action 'self' {form_to}; "
        "frame-ancestors 'none'; base-uri 'none'",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "no-store",
    }
    return web.Response(text=html, status=status, content_type="text/html", headers=headers)


def _origin(url: str) -> str:
    parsed = urlparse(url)
    return f"{parsed.scheme}://{parsed.netloc}"


def _error(status: int, title: str, detail: str) -> web.Response:
    return _page(title, f"<p>{escape(detail)}</p><p><a href='/'>Start again</a></p>", status)


def _already_configured() -> web.Response:
    return web.Response(text="reviewer-app is already configured.\n", status=404)


def _suggested_public_url(request: web.Request) -> str:
    """What the browser used to reach us; a proxy's X-Forwarded-* headers win. The operator can edit it."""
    proto = request.headers.get("X-Forwarded-Proto", request.scheme).split(",")[0].strip()
    host = request.headers.get("X-Forwarded-Host", request.host).split(",")[0].strip()
    return f"{proto}://{host}"


def _private_channel(url: str) -> bool:
    """Whether the browser reached us over HTTPS, or over loopback (where nobody else can listen)."""
    try:
        parsed = urlparse(url)
        return parsed.scheme == "https" or is_loopback_host(parsed.hostname or "")
    except ValueError:
        return False


def _index_html(flow: SetupFlow, public_url: str, claude: str | None) -> str:
    perms = "".join(
        f"<li><code>{escape(str(k))}</code>: {escape(str(v))}</li>"
        for k, v in flow.manifest.get("default_permissions", {}).items()
    )
    events = ", ".join(f"<code>{escape(str(e))}</code>" for e in flow.manifest.get("default_events", []))
    github = escape(redact_url(flow.cfg.github_url))
    warning = (
        (
            f"<p>{_what_to_set(claude)} in this server's environment or in "
            f"<code>{escape(flow.cfg.env_file)}</code>, then restart this server and open this page again. "
            "No review can run without it, so this page does not go on to GitHub until it is set.</p>"
        )
        if claude
        else ""
    )
    if not _private_channel(public_url):
        warning += (
            "<p><b>This page was reached over plain HTTP:</b> the setup token you type below would cross "
            "the network in clear. Open this page over HTTPS, or through an SSH tunnel to localhost.</p>"
        )
    return f"""{warning}
<p>No GitHub App is configured yet. This page registers one on {github} from this server's manifest: GitHub
creates the App and hands its id, private key and webhook secret back to this server, which saves them in
<code>{escape(flow.cfg.env_file)}</code> (readable by this user only) and starts answering webhooks.</p>
<form method=post action="{START_PATH}">
<label>Setup token <span class=hint>(printed in this server's log when it started)</span>
<input type=password name=token required autocomplete=off></label>
<label>Public URL of this server <span class=hint>(GitHub sends webhooks to it; your browser returns to it; https://
only, http:// for localhost alone)</span>
<input type=text name=public_url required value="{escape(public_url)}"></label>
<p class=hint>GitHub can never reach <code>localhost</code>. A localhost URL is fine for trying the app on this
machine only when GitHub's webhooks reach it another way: a tunnel (enter the tunnel's https:// URL above instead),
or a relay whose URL you enter as the webhook URL below. With neither, GitHub registers the App but cannot deliver
a single webhook to it. See "Local webhooks" in docs/setup.md.</p>
<label>Webhook URL <span class=hint>(optional: a relay's https:// URL, such as a smee.io channel, when GitHub
cannot reach this server; empty: the public URL's /api/github/webhooks)</span>
<input type=text name=webhook_url></label>
<label>App name <span class=hint>(optional; default {escape(str(flow.manifest.get("name", "")))})</span>
<input type=text name=name maxlength=34></label>
<label>Organisation <span class=hint>(leave empty to register the App on your personal account)</span>
<input type=text name=organization></label>
<button type=submit{" disabled" if claude else ""}>Continue</button>
</form>
<p>The App asks for:</p><ul>{perms}</ul><p>and subscribes to {events}.</p>"""


def _handoff_html(target: str, manifest: dict[str, Any]) -> str:
    return f"""
<p>GitHub will show the App's settings; check its name and press <b>Create GitHub App</b>. GitHub then sends you
back to <code>{escape(manifest["redirect_url"])}</code> within the hour.</p>
<form method=post action="{escape(target)}">
<input type=hidden name=manifest value="{escape(json.dumps(manifest))}">
<button type=submit>Create the App on GitHub</button>
</form>"""


def _done_html(registration: AppRegistration, env_file: str) -> str:
    install = registration.install_url
    safe = urlparse(install).scheme in ("http", "https")
    link = f"<a href='{escape(install)}'>{escape(install)}</a>" if safe else escape(install)
    return f"""
<p>The GitHub App <b>{escape(registration.name or registration.slug)}</b> (id {registration.app_id}) is registered.
Its credentials are saved in <code>{escape(env_file)}</code>, and this server now answers its webhooks.</p>
<p>Last step: install the App on the repositories it should review: {link}</p>"""
