"""A pull request named by its URL, as `reviewer-app review` takes it (pure): the repository, the number, and the REST
API that serves them (github.com's, or a GitHub Enterprise Server's at https://HOST/api/v3)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

_NAME = re.compile(r"[A-Za-z0-9_.-]+")  # GitHub's owner and repository names (no slashes, no spaces)
EXPECTED = "https://HOST/OWNER/REPO/pull/NUMBER"


class NotAPullRequestURL(ValueError):
    """The text names no pull request; the message is one line that says what was expected."""


@dataclass(frozen=True)
class PullRef:
    """One pull request: where it is on the web, and which repository and number the API knows it by."""

    scheme: str
    host: str  # with its port, if the URL named one
    owner: str
    name: str
    number: int

    @property
    def repo(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def web_url(self) -> str:
        return f"{self.scheme}://{self.host}/{self.repo}/pull/{self.number}"

    @property
    def on_github_com(self) -> bool:
        return self.host.lower() in ("github.com", "www.github.com")

    @property
    def api_url(self) -> str:
        """The REST API of the pull request's host: https://api.github.com, or a GitHub Enterprise Server's
        https://HOST/api/v3."""
        return "https://api.github.com" if self.on_github_com else f"{self.scheme}://{self.host}/api/v3"


def parse_pull_url(text: str) -> PullRef:
    """``https://HOST/OWNER/REPO/pull/NUMBER`` (a trailing ``/files``, ``/commits``, query or fragment is fine);
    raises NotAPullRequestURL otherwise."""
    shown = text.strip()
    try:
        parts = urlsplit(shown)
        host = parts.netloc.rpartition("@")[2]  # never keep credentials someone pasted into the URL
    except ValueError:
        parts, host = None, ""
    segments = [s for s in parts.path.split("/") if s] if parts is not None else []
    if (
        parts is None
        or parts.scheme not in ("https", "http")
        or not host
        or len(segments) < 4
        or segments[2] != "pull"
        or not all(_NAME.fullmatch(s) for s in segments[:2])
        or not re.fullmatch(r"[0-9]{1,9}", segments[3])
        or int(segments[3]) < 1
    ):
        raise NotAPullRequestURL(f"not a pull request URL: {shown[:200]!r} (expected {EXPECTED})")
    return PullRef(parts.scheme, host, segments[0], segments[1], int(segments[3]))
