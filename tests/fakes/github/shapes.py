"""GitHub-shaped JSON every area shares: timestamps, shas, users, repositories and commits as GitHub's schemas have
them (tests/github/test_fake_schema.py holds the fake to those schemas)."""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime
from typing import Any

Json = dict[str, Any]


def iso(epoch: float) -> str:
    """GitHub's timestamp format: ISO 8601, whole seconds, UTC with a ``Z``."""
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def random_sha() -> str:
    return secrets.token_hex(20)


def blob_sha(text: str) -> str:
    data = text.encode("utf-8", "surrogateescape")  # a test's bytes that are not UTF-8 travel as escapes
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def user_json(login: str) -> Json:
    """A user as GitHub's `simple-user` schema has it (tests/github/test_fake_schema.py holds the fake to it)."""
    user_id = 2**32 + int(hashlib.sha1(login.encode()).hexdigest()[:8], 16)  # past 2**31, as every id here
    api = f"https://api.github.com/users/{login}"
    return {
        "login": login,
        "id": user_id,
        "node_id": f"U_{user_id}",
        "avatar_url": f"https://avatars.githubusercontent.com/u/{user_id}",
        "gravatar_id": "",
        "url": api,
        "html_url": f"https://github.com/{login}",
        "followers_url": f"{api}/followers",
        "following_url": f"{api}/following{{/other_user}}",
        "gists_url": f"{api}/gists{{/gist_id}}",
        "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{api}/subscriptions",
        "organizations_url": f"{api}/orgs",
        "repos_url": f"{api}/repos",
        "events_url": f"{api}/events{{/privacy}}",
        "received_events_url": f"{api}/received_events",
        "type": "Bot" if login.endswith("[bot]") else "User",
        "site_admin": False,
    }
