"""From zero to installed: the .env file, the App manifest, and the setup page's manifest flow end to end."""

from __future__ import annotations

import contextlib
import html
import json
import re
import stat
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer

from reviewer_app.github.auth import AppCredentials
from reviewer_app.service import build_service
from reviewer_app.settings.config import Config, ConfigError, load_config
from reviewer_app.settings.envfile import EnvFileError, apply_env_file, parse_env, read_env_file, update_env_file
from reviewer_app.web import app as web_app
from reviewer_app.web.app_registration import (
    MANIFEST_FILE,
    AppRegistration,
    SetupError,
    SetupStates,
    build_manifest,
    configured_with,
    load_manifest,
    parse_conversion,
    registration_url,
)
from reviewer_app.web.setup_page import SetupFlow, make_setup_app
from tests.fakes.github import API_HEADERS, FakeGitHub, FakeGitHubThread, running
from tests.fakes.keys import test_key_pair
from tests.github.test_fake_schema import disagreements
from tests.helpers import encode, pr_payload, webhook_headers
from tests.serve_process import ServeProcess

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "the-setup-token"
PUBLIC_URL = "https://reviewer.example.com"
EXPECTED_PERMISSIONS = {
    "pull_requests": "write",
    "checks": "write",
    "contents": "read",
    "issues": "write",
    "metadata": "read",
}
EXPECTED_EVENTS = ["pull_request", "issue_comment", "pull_request_review_comment", "check_run", "check_suite"]
GITHUB_CREDENTIALS = ("GITHUB_APP_ID", "GITHUB_PRIVATE_KEY", "GITHUB_PRIVATE_KEY_PATH", "GITHUB_WEBHOOK_SECRET")


# ------------------------------------------------------------------------------------------ the .env file


def test_env_file_syntax() -> None:
    text = "\n".join(
        [
            "# a comment",
            "",
            "PLAIN=value # trailing comment",
            "export EXPORTED=yes",
            "EMPTY=",
            "SINGLE='kept as is \\n # not a comment'",
            'DOUBLE="line one\\nline \\"two\\" \\\\ $"',
            "SPACED = padded  ",
        ]
    )
    assert parse_env(text) == {
        "PLAIN": "value",
        "EXPORTED": "yes",
        "EMPTY": "",
        "SINGLE": "kept as is \\n # not a comment",
        "DOUBLE": 'line one\nline "two" \\ $',
        "SPACED": "padded",
    }


@pytest.mark.parametrize(
    "line,fragment",
    [
        ("no equals sign", "line 2: expected NAME=value"),
        ("1BAD=x", "line 2: expected NAME=value"),
        ('OPEN="never closed', "line 2: unterminated double quote"),
        ("OPEN='never closed", "line 2: unterminated single quote"),
        ('TAIL="x" y', "line 2: text after the closing quote"),
    ],
)
def test_env_file_errors_name_the_line(line: str, fragment: str) -> None:
    with pytest.raises(EnvFileError, match=re.escape(fragment)):
        parse_env(f"OK=1\n{line}\n", source="x.env")


def test_update_env_file_is_0600_keeps_other_lines_and_round_trips_a_pem(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    path.write_text("# mine\nANTHROPIC_API_KEY=sk-ant-kept\nGITHUB_APP_ID=1\n")
    path.chmod(0o644)
    pem = test_key_pair().private_pem
    update_env_file(path, {"GITHUB_APP_ID": "42", "GITHUB_PRIVATE_KEY": pem, "GITHUB_WEBHOOK_SECRET": 'a"b$c\\d'})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_env_file(path) == {
        "ANTHROPIC_API_KEY": "sk-ant-kept",
        "GITHUB_APP_ID": "42",
        "GITHUB_PRIVATE_KEY": pem,
        "GITHUB_WEBHOOK_SECRET": 'a"b$c\\d',
    }
    text = path.read_text()
    assert text.startswith("# mine\n") and text.count("GITHUB_APP_ID") == 1
    assert len(text.splitlines()) == 5  # the PEM takes one line, its newlines escaped
    assert sorted(p.name for p in tmp_path.iterdir()) == [".env"]  # no temporary file left behind


def test_a_new_env_file_is_created_0600(tmp_path: Path) -> None:
    path = tmp_path / "new.env"
    update_env_file(path, {"A": "1"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and read_env_file(path) == {"A": "1"}


def test_the_real_environment_wins_over_the_env_file(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    path.write_text("FROM_FILE=file\nSET_IN_ENV=file\nEMPTY_IN_ENV=file\n")
    environ = {"SET_IN_ENV": "env", "EMPTY_IN_ENV": ""}
    assert apply_env_file(path, environ) == ["FROM_FILE", "EMPTY_IN_ENV"]
    assert environ == {"SET_IN_ENV": "env", "EMPTY_IN_ENV": "file", "FROM_FILE": "file"}
    assert apply_env_file(tmp_path / "missing.env", environ) == []


# ------------------------------------------------------------------------------------- configuration


def test_no_app_at_all_is_setup_mode_but_a_partial_app_still_fails(tmp_path: Path) -> None:
    db = {"DATABASE_URL": f"sqlite:///{tmp_path}/x.db"}
    cfg = load_config(db, allow_setup=True)
    assert cfg.needs_setup and cfg.github_url == "https://github.com" and cfg.env_file == ".env"
    with pytest.raises(ConfigError, match="GITHUB_WEBHOOK_SECRET is not set"):
        load_config(db)  # strict by default
    with pytest.raises(ConfigError, match="GITHUB_WEBHOOK_SECRET is not set"):
        load_config({**db, "GITHUB_APP_ID": "42"}, allow_setup=True)
    with pytest.raises(ConfigError, match="GITHUB_APP_ID is not"):
        load_config(
            {**db, "GITHUB_WEBHOOK_SECRET": "s", "GITHUB_PRIVATE_KEY": test_key_pair().private_pem}, allow_setup=True
        )
    assert not load_config({**db, "GITHUB_WEBHOOK_SECRET": "s"}, allow_setup=True).needs_setup
    assert not load_config({**db, "REVIEWER_INSECURE_NO_SIGNATURE": "1"}, allow_setup=True).needs_setup


def test_a_private_key_with_escaped_newlines_is_read(tmp_path: Path) -> None:
    pem = test_key_pair().private_pem
    cfg = load_config(
        {"GITHUB_WEBHOOK_SECRET": "s", "GITHUB_APP_ID": "42", "GITHUB_PRIVATE_KEY": pem.replace("\n", "\\n")}
    )
    assert cfg.private_key == pem


# ------------------------------------------------------------------------------------------- manifest


def test_the_manifest_asks_for_exactly_what_the_app_uses() -> None:
    root = yaml.safe_load((ROOT / "app-manifest.yml").read_text())
    assert load_manifest() == root  # the packaged copy is the repository's file
    assert MANIFEST_FILE.resolve() == (ROOT / "app-manifest.yml").resolve()
    assert root["default_permissions"] == EXPECTED_PERMISSIONS
    assert root["default_events"] == EXPECTED_EVENTS
    assert root["public"] is False and root["hook_attributes"]["url"].endswith("/api/github/webhooks")
    text = (ROOT / "app-manifest.yml").read_text()
    for line in text.splitlines():  # every permission and event says why, on its line
        if re.match(r"^\s+(\w+: (read|write)|- \w+)\s", line):
            assert "#" in line, line
    assert "installation" in text and "installation_repositories" in text  # implicit events are noted


def test_build_manifest_points_every_url_at_this_server() -> None:
    manifest = build_manifest(load_manifest(), public_url=PUBLIC_URL + "/", name="  My   Reviewer ")
    assert manifest["hook_attributes"] == {"url": f"{PUBLIC_URL}/api/github/webhooks", "active": True}
    assert manifest["redirect_url"] == f"{PUBLIC_URL}/setup/callback"
    assert manifest["url"] == PUBLIC_URL and manifest["name"] == "My Reviewer"
    assert "YOUR-HOST" not in json.dumps(manifest)
    assert web_app.WEBHOOK_PATH == "/api/github/webhooks"
    for bad in ("reviewer.example.com", "ftp://x", "https://x/?a=1", "https://user:pw@x"):
        with pytest.raises(SetupError):
            build_manifest(load_manifest(), public_url=bad)
    with pytest.raises(SetupError, match="longer than"):
        build_manifest(load_manifest(), public_url=PUBLIC_URL, name="x" * 35)
    relayed = build_manifest(load_manifest(), public_url="http://127.0.0.1:8080", webhook_url=" https://smee.io/ch ")
    assert relayed["hook_attributes"]["url"] == "https://smee.io/ch"
    assert relayed["redirect_url"] == "http://127.0.0.1:8080/setup/callback"
    with pytest.raises(SetupError, match="never localhost"):
        build_manifest(load_manifest(), public_url=PUBLIC_URL, webhook_url="https://127.0.0.1/api/github/webhooks")


@pytest.mark.parametrize(
    "url",
    [
        "http://reviewer.example.com",
        "http://10.0.0.5:8080",
        "http://192.168.1.20",
        "http://[::ffff:10.0.0.1]",
        "http://[fe80::1]",
        "http://localhost.evil.example",
        "http://127.0.0.1.nip.io",
        "http://0.0.0.0:8080",
    ],
)
def test_a_plain_http_public_url_is_refused_and_says_why(url: str) -> None:
    with pytest.raises(SetupError, match=r"must start with https://.*anyone on the way can read them"):
        build_manifest(load_manifest(), public_url=url)


@pytest.mark.parametrize(
    "url",
    [
        "https://reviewer.example.com",
        "https://10.0.0.5:8443",
        "http://localhost:8080",
        "http://LOCALHOST",
        "http://127.0.0.1",
        "http://127.45.6.7:9000",
        "http://[::1]:8080",
        "http://[::ffff:127.0.0.1]:8080",
    ],
)
def test_https_or_a_loopback_host_is_accepted(url: str) -> None:
    assert build_manifest(load_manifest(), public_url=url)["redirect_url"] == f"{url}/setup/callback"


def test_registration_urls() -> None:
    assert registration_url("https://github.com/", state="s1") == "https://github.com/settings/apps/new?state=s1"
    assert (
        registration_url("https://ghe.example.com", state="s", organization="acme-inc")
        == "https://ghe.example.com/organizations/acme-inc/settings/apps/new?state=s"
    )
    for bad in ("acme/../evil", "-acme", "a" * 40, "acme?x=1"):
        with pytest.raises(SetupError):
            registration_url("https://github.com", state="s", organization=bad)


def test_states_are_single_use_and_expire() -> None:
    now = [1000.0]
    states = SetupStates(clock=lambda: now[0])
    first, second = states.issue(PUBLIC_URL), states.issue(PUBLIC_URL)
    assert first != second and len(first) >= 32
    pending = states.consume(first)
    assert pending is not None and pending.public_url == PUBLIC_URL
    assert states.consume(first) is None  # used
    assert states.consume("forged") is None
    now[0] += 3600
    assert states.consume(second) is None  # expired


def test_parse_conversion_checks_the_answer_and_hides_secrets() -> None:
    pem = test_key_pair().private_pem
    good = {
        "id": 7,
        "slug": "rev",
        "name": "Rev",
        "html_url": "https://github.com/apps/rev",
        "pem": pem,
        "webhook_secret": "whsec",
        "client_id": "Iv1.x",
        "client_secret": "csec",
    }
    reg = parse_conversion(good)
    assert reg.install_url == "https://github.com/apps/rev/installations/new"
    assert "whsec" not in repr(reg) and "csec" not in repr(reg) and "PRIVATE" not in repr(reg)
    assert reg.env_values() == {
        "GITHUB_APP_ID": "7",
        "GITHUB_PRIVATE_KEY": pem,
        "GITHUB_WEBHOOK_SECRET": "whsec",
        "GITHUB_CLIENT_ID": "Iv1.x",
        "GITHUB_CLIENT_SECRET": "csec",
    }
    for broken in (
        {**good, "id": "7"},
        {**good, "pem": "not a key"},
        {**good, "webhook_secret": ""},
        {**good, "html_url": "javascript:alert(1)"},
        [],
    ):
        with pytest.raises(SetupError):
            parse_conversion(broken)


# ---------------------------------------------------------------------------- the setup page, in-process


@dataclass
class Setup:
    fake: FakeGitHub
    github_url: str
    cfg: Config
    flow: SetupFlow
    client: TestClient
    registered: list[AppRegistration] = field(default_factory=list)

    @property
    def env_file(self) -> Path:
        return Path(self.cfg.env_file)

    async def start(self, token: str = TOKEN, **form: str) -> aiohttp.ClientResponse:
        data = {"token": token, "public_url": PUBLIC_URL, **form}
        return await self.client.post("/setup/start", data=data)

    async def handoff(self, **form: str) -> tuple[str, dict[str, Any]]:
        """Start with the right token: (where the form posts, the manifest it carries)."""
        resp = await self.start(**form)
        assert resp.status == 200, await resp.text()
        page = await resp.text()
        action = html.unescape(re.search(r'<form method=post action="([^"]+)"', page)[1])
        manifest = json.loads(html.unescape(re.search(r'name=manifest value="([^"]*)"', page)[1]))
        return action, manifest

    async def code_and_state(self) -> tuple[str, str]:
        """As far as GitHub's redirect: the user created the App; (code, state) come back in the query."""
        action, manifest = await self.handoff()
        state = urllib.parse.parse_qs(urllib.parse.urlparse(action).query)["state"][0]
        return self.fake.register_manifest_code(manifest), state

    async def callback(self, code: str, state: str) -> aiohttp.ClientResponse:
        return await self.client.get("/setup/callback", params={"code": code, "state": state})


@contextlib.asynccontextmanager
async def setup_page(tmp_path: Path, fake: FakeGitHub | None = None, **env: str) -> AsyncIterator[Setup]:
    fake = fake or FakeGitHub()
    async with running(fake) as url:
        cfg = load_config(
            {
                "DATABASE_URL": f"sqlite:///{tmp_path}/reviewer.db",
                "GITHUB_URL": url,
                "GITHUB_API_URL": url,
                "REVIEWER_ENV_FILE": str(tmp_path / ".env"),
                "ANTHROPIC_API_KEY": "sk-ant-test-key",
                **env,
            },
            allow_setup=True,
        )
        registered: list[AppRegistration] = []
        flow = SetupFlow(cfg, TOKEN, on_configured=registered.append)
        client = TestClient(TestServer(make_setup_app(flow)))
        await client.start_server()
        try:
            yield Setup(fake, url, cfg, flow, client, registered)
        finally:
            await client.close()


async def test_unconfigured_server_serves_the_setup_page_and_refuses_webhooks(tmp_path: Path) -> None:
    async with setup_page(tmp_path) as s:
        resp = await s.client.get("/")
        page = await resp.text()
        assert resp.status == 200 and "Setup token" in page and 'action="/setup/start"' in page
        assert "default-src 'none'" in resp.headers["Content-Security-Policy"]
        assert resp.headers["Referrer-Policy"] == "no-referrer"
        body = encode(pr_payload())
        resp = await s.client.post("/api/github/webhooks", data=body, headers=webhook_headers(body))
        assert resp.status == 503 and (await resp.json())["error"] == "app not configured yet"
        assert (await s.client.get("/healthz")).status == 200
        assert (await s.client.get("/readyz")).status == 503
        assert "ANTHROPIC_API_KEY" not in page


async def test_the_setup_page_warns_when_claude_credentials_are_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    async with setup_page(tmp_path, ANTHROPIC_API_KEY="") as s:
        page = await (await s.client.get("/")).text()
        assert "set ANTHROPIC_API_KEY" in page and "then restart" in page
        assert "<button type=submit disabled>Continue</button>" in page
        # ...and the server does not go on to GitHub either, whatever the browser sends.
        resp = await s.start()
        text = html.unescape(await resp.text())
        assert resp.status == 409 and "ANTHROPIC_API_KEY (the Claude API key) is not set" in text
        assert "restart the server" in text
        assert len(s.flow.states) == 0 and not s.env_file.exists() and s.fake.requests == []


async def test_with_the_model_key_the_page_goes_on(tmp_path: Path) -> None:
    async with setup_page(tmp_path) as s:
        page = await (await s.client.get("/")).text()
        assert "<button type=submit>Continue</button>" in page
        assert (await s.start()).status == 200


async def test_the_page_says_when_a_localhost_url_is_fine(tmp_path: Path) -> None:
    async with setup_page(tmp_path) as s:
        page = html.unescape(await (await s.client.get("/")).text())
        assert "GitHub can never reach <code>localhost</code>" in page
        assert "a tunnel" in page and "a relay" in page and "Local webhooks" in page


async def test_a_relay_receives_the_webhooks_while_the_browser_comes_back_here(tmp_path: Path) -> None:
    async with setup_page(tmp_path) as s:
        relay = "https://smee.io/a1B2c3D4e5"
        _, manifest = await s.handoff(public_url="http://localhost:8080", webhook_url=relay)
        assert manifest["hook_attributes"]["url"] == relay
        assert manifest["redirect_url"] == "http://localhost:8080/setup/callback"
        for bad in ("http://smee.io/x", "https://localhost:9000/hooks", "https://user:pw@relay.example/x"):
            resp = await s.start(webhook_url=bad)
            assert resp.status == 400, bad


async def test_a_wrong_setup_token_is_refused(tmp_path: Path) -> None:
    async with setup_page(tmp_path) as s:
        for token in ("", "wrong", TOKEN + "x"):
            resp = await s.start(token=token)
            assert resp.status == 403 and "Wrong setup token" in await resp.text()
        assert len(s.flow.states) == 0 and not s.env_file.exists()


async def test_the_handoff_posts_the_manifest_to_github_with_a_state(tmp_path: Path) -> None:
    async with setup_page(tmp_path) as s:
        action, manifest = await s.handoff()
        assert re.fullmatch(re.escape(s.github_url) + r"/settings/apps/new\?state=[\w-]{32,}", action)
        assert manifest["hook_attributes"]["url"] == f"{PUBLIC_URL}/api/github/webhooks"
        assert manifest["default_permissions"] == EXPECTED_PERMISSIONS
        action, _ = await s.handoff(organization="acme")
        assert action.startswith(f"{s.github_url}/organizations/acme/settings/apps/new?state=")
        resp = await s.start(organization="not/an/org")
        assert resp.status == 400
        resp = await s.start(public_url="not a url")
        assert resp.status == 400


async def test_the_page_refuses_a_plain_http_public_url_and_says_why(tmp_path: Path) -> None:
    async with setup_page(tmp_path) as s:
        resp = await s.start(public_url="http://reviewer.example.com")
        page = html.unescape(await resp.text())
        assert resp.status == 400 and "must start with https://" in page and "read them" in page
        assert len(s.flow.states) == 0 and s.fake.requests == []


async def test_the_page_warns_when_it_is_reached_over_plain_http_from_another_host(tmp_path: Path) -> None:
    async with setup_page(tmp_path) as s:
        warning = "reached over plain HTTP"
        assert warning not in await (await s.client.get("/")).text()  # loopback: nobody else listens
        page = await (await s.client.get("/", headers={"Host": "reviewer.lan:8080"})).text()
        assert warning in page and "SSH tunnel" in page
        behind_tls = {"Host": "reviewer.lan", "X-Forwarded-Proto": "https"}  # a TLS-terminating proxy
        assert warning not in await (await s.client.get("/", headers=behind_tls)).text()


async def test_a_valid_callback_saves_the_app_and_the_app_then_answers_webhooks(tmp_path: Path) -> None:
    async with setup_page(tmp_path) as s:
        action, manifest = await s.handoff()
        # The browser posts the form to GitHub, which sends it back to the redirect URL with a code.
        async with aiohttp.ClientSession() as browser:
            async with browser.post(action, data={"manifest": json.dumps(manifest)}, allow_redirects=False) as resp:
                assert resp.status == 302
                back = urllib.parse.urlparse(resp.headers["Location"])
        assert f"https://{back.netloc}{back.path}" == f"{PUBLIC_URL}/setup/callback"
        query = urllib.parse.parse_qs(back.query)
        resp = await s.callback(query["code"][0], query["state"][0])
        page = await resp.text()
        assert resp.status == 200, page
        install = f"{s.github_url}/apps/{s.fake.app_slug}/installations/new"
        assert f"href='{install}'" in page
        assert s.fake.webhook_secret not in page and "PRIVATE KEY" not in page

        assert stat.S_IMODE(s.env_file.stat().st_mode) == 0o600
        saved = read_env_file(s.env_file)
        assert saved["GITHUB_APP_ID"] == str(s.fake.app_id) and saved["GITHUB_WEBHOOK_SECRET"] == s.fake.webhook_secret
        assert saved["GITHUB_PRIVATE_KEY"] == s.fake.private_key and saved["GITHUB_CLIENT_ID"].startswith("Iv1.")
        [registration] = s.registered
        assert registration.app_id == s.fake.app_id
        # The conversion's answer, as the fake gave it, is the shape GitHub's schema describes.
        problems, seen = disagreements(s.fake.requests)
        assert problems == [] and ("POST", "/app-manifests/{code}/conversions") in seen, problems

        # The setup page is closed now.
        assert (await s.client.get("/")).status == 404
        assert (await s.callback(query["code"][0], query["state"][0])).status == 404

        # The new key authenticates as the App...
        jwt = AppCredentials(saved["GITHUB_APP_ID"], saved["GITHUB_PRIVATE_KEY"]).app_jwt()
        async with aiohttp.ClientSession() as session:
            async with session.get(
                f"{s.github_url}/app", headers={**API_HEADERS, "Authorization": f"Bearer {jwt}"}
            ) as resp:
                assert resp.status == 200 and (await resp.json())["id"] == s.fake.app_id
        # ...and the configured service answers webhooks signed with the new secret, as `serve` switches to it.
        cfg = configured_with(s.cfg, registration)
        assert not cfg.needs_setup and cfg.app_id == str(s.fake.app_id)
        svc = await build_service(cfg, worker=False)
        client = TestClient(TestServer(svc.app))
        await client.start_server()
        try:
            body = encode(pr_payload())
            resp = await client.post(
                "/api/github/webhooks", data=body, headers=webhook_headers(body, secret=s.fake.webhook_secret)
            )
            assert resp.status == 202, await resp.text()
            resp = await client.post("/api/github/webhooks", data=body, headers=webhook_headers(body))
            assert resp.status == 401  # the old test secret means nothing to this App
            assert (await client.get("/")).status == 200  # "already configured"
        finally:
            await client.close()
            await svc.stop()


async def test_an_unknown_code_shows_an_error_and_writes_nothing(tmp_path: Path) -> None:
    async with setup_page(tmp_path) as s:
        _, state = await s.code_and_state()
        resp = await s.callback("abc123", state)
        assert resp.status == 502 and "not accept the code" in await resp.text()
        assert not s.env_file.exists() and s.registered == []


async def test_an_expired_code_shows_an_error_and_writes_nothing(tmp_path: Path) -> None:
    now = [1_800_000_000.0]
    async with setup_page(tmp_path, FakeGitHub(clock=lambda: now[0])) as s:
        code, state = await s.code_and_state()
        now[0] += 3600  # GitHub's code lives an hour
        resp = await s.callback(code, state)
        assert resp.status == 502 and "more than an hour old" in await resp.text()
        assert not s.env_file.exists() and s.registered == []


async def test_a_reused_code_shows_an_error_and_writes_nothing(tmp_path: Path) -> None:
    fake = FakeGitHub()
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir()
    second_dir.mkdir()
    async with setup_page(first_dir, fake) as first:
        code, state = await first.code_and_state()
        assert (await first.callback(code, state)).status == 200
    async with setup_page(second_dir, fake) as second:
        _, state = await second.code_and_state()
        resp = await second.callback(code, state)
        assert resp.status == 502 and "already used" in await resp.text()
        assert not second.env_file.exists() and second.registered == []


async def test_a_forged_used_or_expired_state_is_refused(tmp_path: Path) -> None:
    now = [1000.0]
    async with setup_page(tmp_path) as s:
        s.flow.states = SetupStates(clock=lambda: now[0])
        code, state = await s.code_and_state()
        for forged in ("", "forged-state", state + "x"):
            resp = await s.callback(code, forged)
            assert resp.status == 403 and "not valid" in await resp.text()
        assert code in s.fake.manifest_codes  # a refused callback never spends the code
        assert (await s.callback("wrong-code", state)).status == 502
        assert (await s.callback(code, state)).status == 403  # the state was spent by its first use
        _, late = await s.code_and_state()
        now[0] += 3601
        assert (await s.callback(code, late)).status == 403  # expired
        assert not s.env_file.exists() and s.registered == []


async def test_an_unwritable_env_file_stops_the_flow_before_github(tmp_path: Path) -> None:
    async with setup_page(tmp_path, REVIEWER_ENV_FILE=str(tmp_path / "missing-dir" / ".env")) as s:
        resp = await s.start()
        assert resp.status == 500 and "does not exist" in await resp.text()
        assert len(s.flow.states) == 0


# ------------------------------------------------------------------------ `reviewer-app serve`, for real


def wait_for(cond: Any, what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.05)


def http(
    method: str, url: str, data: dict[str, str] | bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, str]:
    body = urllib.parse.urlencode(data).encode() if isinstance(data, dict) else data
    req = urllib.request.Request(url, data=body, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, ""  # between the setup page and the configured app, or not up yet


def test_serve_without_an_app_registers_one_and_switches_in_place(tmp_path: Path) -> None:
    fake = FakeGitHub()
    env_file = tmp_path / ".env"
    with FakeGitHubThread(fake) as thread:
        github_url = thread.base_url
        env = {
            "DATABASE_URL": f"sqlite:///{tmp_path}/reviewer.db",
            "GITHUB_URL": github_url,
            "GITHUB_API_URL": github_url,
            "REVIEWER_ENV_FILE": str(env_file),
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "REVIEWER_DEBOUNCE_SECONDS": "60",
            **dict.fromkeys(GITHUB_CREDENTIALS, ""),
            "REVIEWER_INSECURE_NO_SIGNATURE": "",
        }
        proc = ServeProcess(env, tmp_path / "serve.log").start(timeout=60)
        try:
            token = wait_for(lambda: re.search(r"Setup token: (\S+)", proc.log_path.read_text()), "token in log")[1]
            status, page = http("GET", proc.url + "/")
            assert status == 200 and "Setup token" in page
            assert http("POST", proc.url + "/api/github/webhooks", b"{}")[0] == 503
            assert http("POST", proc.url + "/setup/start", {"token": "guess", "public_url": proc.url})[0] == 403

            status, page = http("POST", proc.url + "/setup/start", {"token": token, "public_url": proc.url})
            assert status == 200, page
            action = html.unescape(re.search(r'<form method=post action="([^"]+)"', page)[1])
            manifest = html.unescape(re.search(r'name=manifest value="([^"]*)"', page)[1])
            # GitHub's page redirects the browser to our callback (urllib follows it), which saves the App.
            status, page = http("POST", action, {"manifest": manifest})
            assert status == 200 and "is registered" in page, page
            assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
            secret, app_id = fake.webhook_secret, fake.app_id  # the fake's thread set them; reads are safe
            assert read_env_file(env_file)["GITHUB_APP_ID"] == str(app_id)

            # The same process now answers webhooks signed with the new secret, without a restart.
            body = encode(pr_payload())
            wait_for(
                lambda: (
                    http("POST", proc.url + "/api/github/webhooks", body, webhook_headers(body, secret=secret))[0]
                    == 202
                ),
                "webhook accepted",
            )
            assert http("GET", proc.url + "/")[0] == 200 and http("GET", proc.url + "/setup/callback")[0] == 404
            # ...and authenticates as the new App with the new key (it learns its own slug at start).
            wait_for(
                lambda: any(r.auth == "jwt" and r.status == 200 for r in fake.requests_matching("GET", "^/app$")),
                "GET /app with the new key",
            )
            assert proc.terminate() == 0
        finally:
            proc.kill()
        log = proc.log_path.read_text()
        assert secret not in log and "PRIVATE KEY" not in log and "GITHUB_CLIENT_SECRET" not in log
        client_secret = read_env_file(env_file)["GITHUB_CLIENT_SECRET"]
        assert client_secret not in log

        # A restart reads the .env file: configured from the start, no setup token.
        again = ServeProcess(env, tmp_path / "serve2.log").start(timeout=60)
        try:
            body = encode(pr_payload(number=2))
            assert again.post("/api/github/webhooks", body, webhook_headers(body, secret=secret))[0] == 202
            assert again.terminate() == 0
        finally:
            again.kill()
        assert "Setup token" not in again.log_path.read_text()
