"""The token `reviewer-app review` sends, taken only from where core/token_hosts.py allows for the API it calls:
``GITHUB_TOKEN``, the variable ``--token-env`` names, or the GitHub CLI's own token for that host."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping

from reviewer_app.core.token_hosts import (
    FromEnv,
    FromGitHubCLI,
    Refused,
    github_token_allowed,
    not_for_this_host,
    token_source,
)

GH_TIMEOUT_SECONDS = 15.0
NO_TOKEN = (
    "no GitHub token: set GITHUB_TOKEN (a token that may read the pull request, and write it for --post), "
    "or log in with the GitHub CLI (`gh auth login`)"
)


class NoToken(Exception):
    """No token may be sent to the API; the message is one line for the person."""


def find_token(env: Mapping[str, str], api_url: str, *, token_env: str | None = None) -> str:
    """The token to send to ``api_url``; raises NoToken (before anything is sent) when none may go there."""
    configured = env.get("GITHUB_API_URL") or None
    source = token_source(
        api_url,
        configured_api_url=configured,
        token_env=token_env,
        has_github_token=bool(env.get("GITHUB_TOKEN", "").strip()),
    )
    if isinstance(source, Refused):
        raise NoToken(source.reason)
    if isinstance(source, FromEnv):
        token = env.get(source.name, "").strip()
        if not token:
            raise NoToken(f"--token-env {source.name}: the variable {source.name} is not set")
        return token
    assert isinstance(source, FromGitHubCLI)
    token = gh_token(env, source.hostname)
    if token is not None:
        return token
    raise NoToken(NO_TOKEN if github_token_allowed(api_url, configured) else not_for_this_host(api_url))


def gh_token(env: Mapping[str, str], hostname: str) -> str | None:
    """What ``gh auth token --hostname HOSTNAME`` prints, when gh is installed and logged in there."""
    gh = shutil.which("gh", path=env.get("PATH"))
    if gh is None:
        return None
    try:
        done = subprocess.run(
            [gh, "auth", "token", "--hostname", hostname],
            capture_output=True,
            text=True,
            timeout=GH_TIMEOUT_SECONDS,
            env=dict(env),
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    token = done.stdout.strip()
    return token if done.returncode == 0 and token and len(token.split()) == 1 else None
