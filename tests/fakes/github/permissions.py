"""Which of a GitHub App's permissions each endpoint the fake serves needs, from GitHub's REST reference ("Fine-grained
access tokens ... require the following permissions"); an endpoint that takes either of two lists both. A token
lacking all of them gets 403 "Resource not accessible by integration" (by "personal access token" for a person's),
as on GitHub. Who sees which repository, and whose name goes on what a token writes."""

from __future__ import annotations

from tests.fakes.github.api import AuthInfo
from tests.fakes.github.model import Repo

REPO = "/repos/{owner}/{repo}"
Needed = tuple[tuple[str, str], ...]

_PR_READ: Needed = (("pull_requests", "read"),)
_PR_WRITE: Needed = (("pull_requests", "write"),)

ENDPOINT_PERMISSIONS: dict[tuple[str, str], Needed] = {
    ("GET", REPO): (("metadata", "read"),),
    ("GET", REPO + "/pulls"): _PR_READ,
    ("GET", REPO + "/pulls/{number}"): _PR_READ,
    ("GET", REPO + "/pulls/{number}/files"): _PR_READ,
    ("GET", REPO + "/pulls/{number}/reviews"): _PR_READ,
    ("POST", REPO + "/pulls/{number}/reviews"): _PR_WRITE,
    ("GET", REPO + "/pulls/{number}/comments"): _PR_READ,
    ("POST", REPO + "/pulls/{number}/comments/{comment_id}/replies"): _PR_WRITE,
    ("GET", REPO + "/commits/{ref}/check-runs"): (("checks", "read"),),
    ("POST", REPO + "/check-runs"): (("checks", "write"),),
    ("GET", REPO + "/check-runs/{run_id}"): (("checks", "read"),),
    ("PATCH", REPO + "/check-runs/{run_id}"): (("checks", "write"),),
    # A pull request's conversation is an issue's: either permission serves it.
    ("GET", REPO + "/issues/{number}/comments"): (("issues", "read"), ("pull_requests", "read")),
    ("POST", REPO + "/issues/{number}/comments"): (("issues", "write"), ("pull_requests", "write")),
    ("POST", REPO + "/issues/comments/{comment_id}/reactions"): (("issues", "write"), ("pull_requests", "write")),
    ("POST", REPO + "/pulls/comments/{comment_id}/reactions"): _PR_WRITE,
    ("GET", REPO + "/pulls/comments/{comment_id}/reactions"): _PR_READ,
    ("GET", REPO + "/compare/{basehead}"): (("contents", "read"),),
    ("GET", REPO + "/contents/{path}"): (("contents", "read"),),
    ("GET", REPO + "/contents"): (("contents", "read"),),
    ("GET", REPO + "/tarball/{ref}"): (("contents", "read"),),
    ("GET", REPO + "/collaborators/{user}/permission"): (("metadata", "read"),),
}


def sees(auth: AuthInfo, repo: Repo) -> bool:
    """An installation token sees its installation's repositories it was minted for; a person's token the ones its
    person may read (any public one, a private one they have a role in) that it was made for."""
    if not token_covers(auth, repo):
        return False
    if auth.kind == "user":
        return not repo.private or repo.permissions.get(auth.user or "", "none") != "none"
    return repo.installation_id == auth.installation_id


def actor(app_slug: str, auth: AuthInfo) -> str:
    """The login GitHub shows as the author of what ``auth`` writes: the App's bot, or the token's person."""
    return auth.user if auth.kind == "user" and auth.user else f"{app_slug}[bot]"


def token_covers(auth: AuthInfo, repo: Repo) -> bool:
    """A token minted for some repositories sees only those (GitHub answers 404 for the others)."""
    return auth.repositories is None or repo.full_name.split("/", 1)[1] in auth.repositories


def has_permission(auth: AuthInfo, needed: tuple[tuple[str, str], ...]) -> bool:
    """Any one of ``needed`` is granted (``write`` covers ``read``)."""
    granted = dict(auth.permissions)
    return any(granted.get(name) in (("read", "write") if level == "read" else ("write",)) for name, level in needed)
