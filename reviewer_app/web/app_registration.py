"""The GitHub App manifest flow's pure parts: the manifest, the setup token, states, and the new App's credentials."""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlparse

import yaml

from reviewer_app.settings.config import Config

# The packaged copy of the repository's app-manifest.yml (a symlink in the source tree, a file in a wheel).
MANIFEST_FILE = Path(__file__).resolve().parent.parent / "app-manifest.yml"
PLACEHOLDER = "https://YOUR-HOST"
WEBHOOK_PATH = "/api/github/webhooks"
CALLBACK_PATH = "/setup/callback"
STATE_TTL_SECONDS = 3600.0  # GitHub's code lives an hour too; a state older than that is useless
MAX_PENDING_STATES = 100
_ORG = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?")
_CODE = re.compile(r"[A-Za-z0-9_-]{1,200}")
_APP_NAME_MAX = 34  # GitHub's limit on App names


class SetupError(ValueError):
    """The setup cannot go on; the message is one line for the person at the setup page (never a secret)."""


def new_setup_token() -> str:
    return secrets.token_urlsafe(24)


def token_matches(given: str, expected: str) -> bool:
    """Constant-time comparison, so response timing says nothing about the token."""
    return bool(expected) and hmac.compare_digest(given.strip().encode(), expected.encode())


# ----------------------------------------------------------------------------------------------- manifest


def load_manifest(path: Path = MANIFEST_FILE) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SetupError(f"cannot read the App manifest {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise SetupError(f"the App manifest {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not data.get("default_permissions") or not data.get("default_events"):
        raise SetupError(f"the App manifest {path} lacks default_permissions or default_events")
    return data


def normalise_public_url(raw: str) -> str:
    """The server's public base URL as GitHub and the browser reach it: https (http on loopback only), a host,
    no query."""
    url = raw.strip().rstrip("/")
    try:
        parsed = urlparse(url)
        host = parsed.hostname
    except ValueError:  # an unbalanced "[" or a port that is not a number
        host = None
    if host is None or parsed.scheme not in ("http", "https"):
        raise SetupError("the public URL must look like https://reviewer.example.com")
    if parsed.query or parsed.fragment or parsed.params or parsed.username or parsed.password:
        raise SetupError("the public URL must have no query, fragment or credentials")
    if parsed.scheme != "https" and not is_loopback_host(host):
        # GitHub's temporary code (worth the App's private key to whoever exchanges it first), the state and every
        # webhook travel to this URL.
        raise SetupError(
            "the public URL must start with https://: GitHub sends the new App's code and every "
            "webhook there, and over plain http anyone on the way can read them "
            "(http:// is accepted only for localhost, 127.0.0.0/8 and ::1)"
        )
    return url


def normalise_webhook_url(raw: str) -> str:
    """A relay's URL that GitHub delivers the App's webhooks to instead of this server's (empty: none): https, a
    host GitHub can reach (not loopback), no credentials or fragment."""
    url = raw.strip()
    if not url:
        return ""
    try:
        parsed = urlparse(url)
        host = parsed.hostname
    except ValueError:
        host = None
    if host is None or parsed.scheme != "https" or parsed.username or parsed.password or parsed.fragment:
        raise SetupError("the webhook URL must look like https://relay.example.com/channel (no credentials)")
    if is_loopback_host(host):
        raise SetupError(
            "the webhook URL must be one GitHub can reach: a relay's or a tunnel's, never localhost; "
            "leave it empty to use the public URL"
        )
    return url


def is_loopback_host(host: str) -> bool:
    """``localhost``, 127.0.0.0/8 or ::1: traffic to it never leaves the machine."""
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def build_manifest(
    template: Mapping[str, Any], *, public_url: str, name: str = "", webhook_url: str = ""
) -> dict[str, Any]:
    """The manifest to post: the template with every placeholder URL pointing at ``public_url``.

    The webhook and redirect URLs are set whatever the template says: they must reach this very server, the
    webhooks through ``webhook_url`` (a relay that forwards them here) when one is given.
    """
    base = normalise_public_url(public_url)
    hook = normalise_webhook_url(webhook_url) or base + WEBHOOK_PATH

    def fill(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(PLACEHOLDER, base)
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value

    manifest = fill(dict(template))
    manifest["hook_attributes"] = {**(manifest.get("hook_attributes") or {}), "url": hook}
    manifest["redirect_url"] = base + CALLBACK_PATH
    manifest.setdefault("url", base)
    name = " ".join(name.split())
    if name:
        if len(name) > _APP_NAME_MAX:
            raise SetupError(f"the App name is longer than {_APP_NAME_MAX} characters")
        manifest["name"] = name
    return manifest


def checked_organization(name: str) -> str:
    """An organisation's login as typed (empty: the personal account), refused unless it is a GitHub login."""
    name = name.strip()
    if name and not _ORG.fullmatch(name):
        raise SetupError(f"{name!r} is not a GitHub organisation name")
    return name


def registration_url(github_url: str, *, state: str, organization: str = "") -> str:
    """Where the manifest form posts: the personal account's, or an organisation's, new-App page."""
    organization = checked_organization(organization)
    path = f"/organizations/{quote(organization)}/settings/apps/new" if organization else "/settings/apps/new"
    return f"{github_url.rstrip('/')}{path}?{urlencode({'state': state})}"


def valid_code(code: str) -> bool:
    """GitHub's temporary codes are short opaque words; anything else never reaches a URL path."""
    return bool(_CODE.fullmatch(code))


# ------------------------------------------------------------------------------------------------- states


@dataclass(frozen=True)
class PendingSetup:
    """What a state was issued for: the flow it belongs to, bound when the setup token was shown."""

    public_url: str
    expires_at: float
    webhook_url: str = ""  # where GitHub delivers the App's webhooks: this server's, or a relay's


@dataclass
class SetupStates:
    """Random, single-use states with an expiry, kept in memory: a restart forgets them (start again)."""

    ttl: float = STATE_TTL_SECONDS
    clock: Callable[[], float] = time.time
    _pending: dict[str, PendingSetup] = field(default_factory=dict)

    def issue(self, public_url: str, webhook_url: str = "") -> str:
        self._prune()
        if len(self._pending) >= MAX_PENDING_STATES:
            oldest = min(self._pending, key=lambda s: self._pending[s].expires_at)
            del self._pending[oldest]
        state = secrets.token_urlsafe(24)
        self._pending[state] = PendingSetup(
            public_url=public_url, expires_at=self.clock() + self.ttl, webhook_url=webhook_url
        )
        return state

    def consume(self, state: str) -> PendingSetup | None:
        """The state's flow, once: a second use, an unknown or an expired state gives None."""
        self._prune()
        for known in list(self._pending):
            if hmac.compare_digest(known.encode(), state.encode()):
                return self._pending.pop(known)
        return None

    def __len__(self) -> int:
        self._prune()
        return len(self._pending)

    def _prune(self) -> None:
        now = self.clock()
        for state in [s for s, p in self._pending.items() if p.expires_at <= now]:
            del self._pending[state]


# ----------------------------------------------------------------------------------------- the new App


@dataclass(frozen=True)
class AppRegistration:
    """The App GitHub created from the manifest; secrets never appear in ``repr``."""

    app_id: int
    slug: str
    name: str
    html_url: str
    private_key: str = field(repr=False)
    webhook_secret: str = field(repr=False)
    client_id: str = ""
    client_secret: str = field(default="", repr=False)

    @property
    def install_url(self) -> str:
        return f"{self.html_url.rstrip('/')}/installations/new"

    def env_values(self) -> dict[str, str]:
        """What goes into the .env file."""
        values = {
            "GITHUB_APP_ID": str(self.app_id),
            "GITHUB_PRIVATE_KEY": self.private_key,
            "GITHUB_WEBHOOK_SECRET": self.webhook_secret,
            "GITHUB_CLIENT_ID": self.client_id,
            "GITHUB_CLIENT_SECRET": self.client_secret,
        }
        return {k: v for k, v in values.items() if v}


def parse_conversion(data: object) -> AppRegistration:
    """The answer of ``POST /app-manifests/{code}/conversions``, checked before anything is written."""
    if not isinstance(data, dict):
        raise SetupError("GitHub's answer is not a JSON object")
    app_id = data.get("id")
    if not isinstance(app_id, int) or isinstance(app_id, bool) or app_id <= 0:
        raise SetupError("GitHub's answer has no App id")
    for key in ("pem", "webhook_secret", "html_url"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise SetupError(f"GitHub's answer has no {key}")
    if urlparse(data["html_url"]).scheme not in ("http", "https"):
        raise SetupError("GitHub's answer has an unusable html_url")
    _check_private_key(data["pem"])
    return AppRegistration(
        app_id=app_id,
        slug=str(data.get("slug") or ""),
        name=str(data.get("name") or ""),
        html_url=data["html_url"],
        private_key=data["pem"],
        webhook_secret=data["webhook_secret"],
        client_id=str(data.get("client_id") or ""),
        client_secret=str(data.get("client_secret") or ""),
    )


def _check_private_key(pem: str) -> None:
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):
        raise SetupError("GitHub's answer holds no usable private key") from None


def configured_with(cfg: Config, registration: AppRegistration) -> Config:
    """The running configuration, now with the new App's id, key and webhook secret."""
    return replace(
        cfg,
        app_id=str(registration.app_id),
        private_key=registration.private_key,
        private_key_path="",
        webhook_secret=registration.webhook_secret,
    )
