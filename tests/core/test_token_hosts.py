"""Which token `reviewer-app review` may send where (core/token_hosts.py), one row per case: GITHUB_TOKEN only to
github.com's API or GITHUB_API_URL's host, the GitHub CLI's per-host token or --token-env anywhere else, no plain
http except to loopback."""

from __future__ import annotations

import pytest

from reviewer_app.core.token_hosts import (
    FromEnv,
    FromGitHubCLI,
    Refused,
    TokenSource,
    gh_hostname,
    is_loopback,
    token_source,
)

GHES = "https://ghe.example.com/api/v3"
CLEAR = Refused("refusing to send a token in clear to http://{}: use https (plain http is for loopback only)")


@pytest.mark.parametrize(
    ("api_url", "configured", "token_env", "has_github_token", "expected"),
    [
        # github.com: the environment's token, else gh's for github.com.
        ("https://api.github.com", None, None, True, FromEnv("GITHUB_TOKEN")),
        ("https://API.GitHub.com", None, None, True, FromEnv("GITHUB_TOKEN")),
        ("https://api.github.com", None, None, False, FromGitHubCLI("github.com")),
        # The operator's GITHUB_API_URL: its host is trusted with GITHUB_TOKEN.
        (GHES, GHES, None, True, FromEnv("GITHUB_TOKEN")),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080", None, True, FromEnv("GITHUB_TOKEN")),
        # Any other host: never GITHUB_TOKEN; gh's token for that host, or the variable named explicitly.
        (GHES, None, None, True, FromGitHubCLI("ghe.example.com")),
        (GHES, "https://api.github.com", None, True, FromGitHubCLI("ghe.example.com")),
        ("https://ghe.example.com:8443/api/v3", GHES, None, True, FromGitHubCLI("ghe.example.com:8443")),
        ("https://api.github.com.evil.example", None, None, True, FromGitHubCLI("api.github.com.evil.example")),
        ("https://evil.example/api.github.com", None, None, True, FromGitHubCLI("evil.example")),
        ("http://127.0.0.1:9999/api/v3", "http://127.0.0.1:8080", None, True, FromGitHubCLI("127.0.0.1:9999")),
        (GHES, None, "GHE_TOKEN", True, FromEnv("GHE_TOKEN")),
        # Plain http: refused before any token is chosen, unless the host is loopback.
        ("http://ghe.example.com/api/v3", None, None, True, Refused(CLEAR.reason.format("ghe.example.com"))),
        (
            "http://ghe.example.com/api/v3",
            "http://ghe.example.com/api/v3",
            None,
            True,
            Refused(CLEAR.reason.format("ghe.example.com")),
        ),
        ("http://ghe.example.com/api/v3", None, "GHE_TOKEN", True, Refused(CLEAR.reason.format("ghe.example.com"))),
        ("http://10.0.0.7:8080/api/v3", None, "T", True, Refused(CLEAR.reason.format("10.0.0.7:8080"))),
        ("http://localhost:8080/api/v3", None, "T", True, FromEnv("T")),
        ("http://[::1]:8080/api/v3", None, None, False, FromGitHubCLI("[::1]:8080")),
        ("http://127.5.6.7/api/v3", None, "T", True, FromEnv("T")),
        # Not an API at all.
        ("ftp://api.github.com", None, None, True, Refused("not an API URL: 'ftp://api.github.com'")),
    ],
)
def test_token_source(
    api_url: str, configured: str | None, token_env: str | None, has_github_token: bool, expected: TokenSource
) -> None:
    got = token_source(api_url, configured_api_url=configured, token_env=token_env, has_github_token=has_github_token)
    assert got == expected


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("LOCALHOST.", True),
        ("127.0.0.1", True),
        ("127.255.0.9", True),
        ("::1", True),
        ("[::1]", True),
        ("evil.localhost", False),
        ("localhost.evil.example", False),
        ("128.0.0.1", False),
        ("0.0.0.0", False),
        ("10.0.0.1", False),
        ("::ffff:8.8.8.8", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_gh_keeps_github_coms_token_under_github_com() -> None:
    assert gh_hostname("https://api.github.com") == "github.com"
    assert gh_hostname("https://ghe.example.com/api/v3") == "ghe.example.com"
