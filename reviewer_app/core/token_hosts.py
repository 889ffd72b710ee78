"""Which token `reviewer-app review` may send to the API it is about to call, decided before any byte is sent (pure).

A pull request's URL is typed or pasted by a person, and may come from anyone (a link in a chat): its host is not a
reason to hand it a credential. So a token goes only where it was meant to go:

- ``GITHUB_TOKEN`` (the environment's, often GitHub Actions') only to github.com's API (https://api.github.com), or to
  the host ``GITHUB_API_URL`` names, the API the operator pointed the tool at;
- any other host gets a token only from the GitHub CLI's own per-host store (``gh auth token --hostname HOST``, a
  token its person logged in with on that host), or from the variable ``--token-env NAME`` names, which says
  explicitly "this one, here";
- nothing is sent in clear: an ``http://`` API is refused unless its host is loopback (127.0.0.0/8, ::1, localhost).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

GITHUB_API_HOST = "api.github.com"
GITHUB_WEB_HOST = "github.com"


@dataclass(frozen=True)
class FromEnv:
    """Send the token the environment variable ``name`` holds."""

    name: str


@dataclass(frozen=True)
class FromGitHubCLI:
    """Send what ``gh auth token --hostname HOST`` prints for ``hostname`` (gh's token for that host, or none)."""

    hostname: str


@dataclass(frozen=True)
class Refused:
    """No token may go to this API; ``reason`` is one line for the person, saying what to do."""

    reason: str


TokenSource = FromEnv | FromGitHubCLI | Refused


def is_loopback(host: str) -> bool:
    """``localhost``, 127.0.0.0/8 or ::1 (``host`` without its port; an IPv6 address with or without brackets)."""
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_of(url: str) -> str:
    """The host of ``url`` with its port when it names one, lower case (``""`` when there is none)."""
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        return ""
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{port}" if port is not None else host


def gh_hostname(api_url: str) -> str:
    """The name the GitHub CLI keeps the API's token under: github.com for https://api.github.com, else its host."""
    host = host_of(api_url)
    return GITHUB_WEB_HOST if host == GITHUB_API_HOST else host


def token_source(
    api_url: str, *, configured_api_url: str | None, token_env: str | None, has_github_token: bool
) -> TokenSource:
    """Where the token for requests to ``api_url`` may come from.

    ``configured_api_url`` is ``GITHUB_API_URL`` when set; ``token_env`` the ``--token-env`` name when given;
    ``has_github_token`` whether ``GITHUB_TOKEN`` is set (and not blank)."""
    try:
        parts = urlsplit(api_url)
        hostname = parts.hostname or ""
    except ValueError:
        return Refused(f"not an API URL: {api_url[:200]!r}")
    if parts.scheme not in ("https", "http") or not hostname:
        return Refused(f"not an API URL: {api_url[:200]!r}")
    if parts.scheme == "http" and not is_loopback(hostname):
        return Refused(
            f"refusing to send a token in clear to http://{host_of(api_url)}: use https (plain http is for loopback only)"
        )
    if token_env:
        return FromEnv(token_env)
    if has_github_token and github_token_allowed(api_url, configured_api_url):
        return FromEnv("GITHUB_TOKEN")
    return FromGitHubCLI(gh_hostname(api_url))


def github_token_allowed(api_url: str, configured_api_url: str | None) -> bool:
    """Whether ``GITHUB_TOKEN`` may go to ``api_url``: github.com's API, or the host ``GITHUB_API_URL`` names."""
    trusted = {GITHUB_API_HOST} | ({host_of(configured_api_url)} if configured_api_url else set())
    return host_of(api_url) in trusted


def not_for_this_host(api_url: str) -> str:
    """Why ``GITHUB_TOKEN`` was not sent, when gh had no token for the API's host either (one line, with the ways out)."""
    host = gh_hostname(api_url)
    return (
        f"no token for {host}: GITHUB_TOKEN is sent only to github.com or to the host GITHUB_API_URL names; log in "
        f"there with `gh auth login --hostname {host}`, set GITHUB_API_URL to its API, or name a variable that "
        "holds its token with --token-env NAME"
    )
