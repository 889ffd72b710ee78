"""GitHub's formats for the names and ids a webhook hands us that end up in API URLs (pure): logins, commit SHAs,
repository full names, numbers. A payload signed with the webhook secret is still only as right as its sender: a
field GitHub itself would never send is refused at the edge rather than sent on to GitHub inside a URL."""

from __future__ import annotations

import re
from typing import Any

# A user's or organization's login: letters, digits and hyphens, not starting with a hyphen (at most 39 characters on
# github.com; Enterprise Managed Users add "_shortcode", hence the underscore and the room); an App's bot ends "[bot]".
_LOGIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}(?:\[bot\])?")
_OWNER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")
_REPO_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")
_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # SHA-1, or SHA-256 for repositories that use it


def is_login(value: Any) -> bool:
    return isinstance(value, str) and _LOGIN.fullmatch(value) is not None


def is_sha(value: Any) -> bool:
    """40 lower-case hex digits (SHA-1), or 64 (a SHA-256 repository)."""
    return isinstance(value, str) and _SHA.fullmatch(value) is not None


def is_repo_full_name(value: Any) -> bool:
    """``OWNER/NAME``: one slash, an owner's login, a name of letters, digits, ``.``, ``_``, ``-`` (never ``.``/``..``)."""
    if not isinstance(value, str) or value.count("/") != 1:
        return False
    owner, name = value.split("/")
    return _OWNER.fullmatch(owner) is not None and _REPO_NAME.fullmatch(name) is not None and name not in (".", "..")


def is_number(value: Any) -> bool:
    """A pull request's or issue's number, or an id: a positive integer (one past 64 bits is the store's to refuse,
    web/webhooks.py ``unstorable``)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
