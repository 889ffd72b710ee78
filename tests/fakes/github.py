"""A fake GitHub REST API (an aiohttp app) with GitHub-shaped JSON, real auth checks and fault injection."""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import hmac
import itertools
import json
import math
import re
import secrets
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import aiohttp
import jwt
import yarl
from aiohttp import web

from tests.fakes.keys import generate_key_pair, test_key_pair

T = TypeVar("T")
Json = dict[str, Any]

PER_PAGE_DEFAULT = 30
PER_PAGE_MAX = 100
PULL_FILES_CAP = 3000  # GitHub lists at most 3000 files of a pull request
COMPARE_FILES_CAP = 300  # and at most 300 files of a comparison, silently
RATE_LIMIT = 5000
JWT_MAX_LIFETIME = 600 + 60  # GitHub caps app JWTs at 10 minutes; a little slack for clock drift
MANIFEST_CODE_LIFETIME = 3600.0  # a manifest flow's temporary code works once, within an hour
DOCS_URL = "https://docs.github.com/rest"
# GitHub documents one media type for its REST API and versions it by header; the fake insists on both, so a client
# that forgets them (gidgethub's helpers send an older Accept and no version) fails here rather than on github.com.
API_MEDIA_TYPE = "application/vnd.github+json"
API_VERSIONS = {"2022-11-28"}
API_HEADERS = {"Accept": API_MEDIA_TYPE, "X-GitHub-Api-Version": "2022-11-28"}  # for tests that call the fake
REACTIONS = {"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}
CHECK_STATUSES = {"queued", "in_progress", "completed", "waiting", "requested", "pending"}
REVIEW_EVENTS = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED"}
FAULT_KINDS = {
    "error",  # respond `status` (default 500) without touching state
    "hang",  # wait `delay` seconds (default: until the client gives up or the fake stops), then serve
    "secondary_rate_limit",  # 403 (or `status`) "You have exceeded a secondary rate limit", retry-after
    "primary_rate_limit",  # 403 (or `status`) with x-ratelimit-remaining 0 and x-ratelimit-reset `reset`
    "too_many_requests",  # 429 with retry-after
    "unauthorized",  # 401 Bad credentials, as if the token had been revoked
    "lost_response",  # apply the request, then drop the connection (`mode="drop"`), answer 502, or answer late ("slow")
    "advance_head",  # serve the request, then move the PR's head to `new_sha` (or a random sha)
}
_PRE_FAULTS = {"error", "secondary_rate_limit", "primary_rate_limit", "too_many_requests", "unauthorized"}
_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


# ---------------------------------------------------------------------------------------------- helpers


def iso(epoch: float) -> str:
    """GitHub's timestamp format: ISO 8601, whole seconds, UTC with a ``Z``."""
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def random_sha() -> str:
    return secrets.token_hex(20)


def blob_sha(text: str) -> str:
    data = text.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def commentable_lines(patch: str) -> tuple[set[int], set[int]]:
    """The (LEFT, RIGHT) line numbers of a patch a review comment may sit on: its hunks' lines."""
    left: set[int] = set()
    right: set[int] = set()
    for hunk_left, hunk_right in hunk_lines(patch):
        left |= hunk_left
        right |= hunk_right
    return left, right


def hunk_lines(patch: str) -> list[tuple[set[int], set[int]]]:
    """The (LEFT, RIGHT) line numbers of each hunk of a patch: removed and context lines by their old number, added
    and context lines by their new one."""
    hunks: list[tuple[set[int], set[int]]] = []
    old = new = 0
    for line in patch.removesuffix("\n").split("\n"):  # GitHub splits on "\n" only, never on \f, \v or U+2028
        match = _HUNK_RE.match(line)
        if match:
            old, new = int(match[1]), int(match[2])
            hunks.append((set(), set()))
        elif not hunks or line.startswith("\\"):  # "\ No newline at end of file"
            continue
        elif line.startswith("+"):
            hunks[-1][1].add(new)
            new += 1
        elif line.startswith("-"):
            hunks[-1][0].add(old)
            old += 1
        else:
            hunks[-1][0].add(old)
            hunks[-1][1].add(new)
            old += 1
            new += 1
    return hunks


def pull_file(
    filename: str,
    patch: str | None = None,
    *,
    status: str = "modified",
    additions: int | None = None,
    deletions: int | None = None,
    previous_filename: str | None = None,
) -> Json:
    """A GitHub-shaped entry of a PR's file list; counts come from ``patch`` unless given."""
    lines = patch.removesuffix("\n").split("\n") if patch else []
    adds = sum(1 for ln in lines if ln.startswith("+")) if additions is None else additions
    dels = sum(1 for ln in lines if ln.startswith("-")) if deletions is None else deletions
    entry: Json = {
        "sha": blob_sha(f"{filename}\n{patch}"),
        "filename": filename,
        "status": status,
        "additions": adds,
        "deletions": dels,
        "changes": adds + dels,
    }
    if patch is not None:  # GitHub leaves ``patch`` out for binary and very large diffs
        entry["patch"] = patch
    if previous_filename is not None:
        entry["previous_filename"] = previous_filename
    return entry


def added_file(filename: str, lines: Iterable[str]) -> Json:
    """A file the PR adds, with ``lines`` as its content (all commentable on the RIGHT side)."""
    body = list(lines)
    patch = f"@@ -0,0 +1,{len(body)} @@\n" + "\n".join("+" + ln for ln in body)
    return pull_file(filename, patch, status="added")


def _normalize_file(entry: Json) -> Json:
    known = {k: entry[k] for k in ("status", "additions", "deletions", "previous_filename") if k in entry}
    full = pull_file(entry["filename"], entry.get("patch"), **known)
    full.update(entry)
    return full


def _user(login: str) -> Json:
    """A user as GitHub's `simple-user` schema has it (tests/test_fake_schema.py holds the fake to it)."""
    user_id = int(hashlib.sha1(login.encode()).hexdigest()[:8], 16)
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


_REPO_URLS = (
    "archive",
    "assignees",
    "blobs",
    "branches",
    "collaborators",
    "comments",
    "commits",
    "compare",
    "contents",
    "contributors",
    "deployments",
    "downloads",
    "events",
    "forks",
    "git_commits",
    "git_refs",
    "git_tags",
    "issue_comment",
    "issue_events",
    "issues",
    "keys",
    "labels",
    "languages",
    "merges",
    "milestones",
    "notifications",
    "pulls",
    "releases",
    "stargazers",
    "statuses",
    "subscribers",
    "subscription",
    "tags",
    "teams",
    "trees",
    "hooks",
)


def _repo_json(repo: Repo) -> Json:
    """A repository as GitHub's `repository` schema has it (what a pull request's head and base carry)."""
    api = f"https://api.github.com/repos/{repo.full_name}"
    owner, name = repo.full_name.split("/")
    return {
        "id": repo.id,
        "node_id": f"R_{repo.id}",
        "name": name,
        "full_name": repo.full_name,
        "owner": _user(owner),
        "private": repo.private,
        "default_branch": repo.default_branch,
        "archived": repo.archived,
        "license": None,
        "forks": 0,
        "description": None,
        "fork": False,
        "url": api,
        "homepage": None,
        "language": None,
        "forks_count": 0,
        "stargazers_count": 0,
        "watchers_count": 0,
        "size": 0,
        "open_issues_count": 0,
        "has_pages": False,
        "disabled": False,
        "pushed_at": iso(0),
        "created_at": iso(0),
        "updated_at": iso(0),
        "open_issues": 0,
        "watchers": 0,
        "html_url": f"https://github.com/{repo.full_name}",
        "git_url": f"git://github.com/{repo.full_name}.git",
        "ssh_url": f"git@github.com:{repo.full_name}.git",
        "clone_url": f"https://github.com/{repo.full_name}.git",
        "svn_url": f"https://github.com/{repo.full_name}",
        "mirror_url": None,
        **{f"{u}_url": f"{api}/{u}" for u in _REPO_URLS},
    }


def _commit_json(repo: str, sha: str, parent: str | None) -> Json:
    """A commit as GitHub's `commit` schema has it (what compare lists)."""
    api = f"https://api.github.com/repos/{repo}"
    person = {"name": "Octo Cat", "email": "octocat@example.invalid", "date": iso(0)}
    return {
        "url": f"{api}/commits/{sha}",
        "sha": sha,
        "node_id": f"C_{sha}",
        "html_url": f"https://github.com/{repo}/commit/{sha}",
        "comments_url": f"{api}/commits/{sha}/comments",
        "commit": {
            "url": f"{api}/git/commits/{sha}",
            "author": person,
            "committer": person,
            "message": "commit",
            "comment_count": 0,
            "tree": {"sha": sha, "url": f"{api}/git/trees/{sha}"},
        },
        "author": None,
        "committer": None,
        "parents": [{"sha": parent, "url": f"{api}/commits/{parent}"}] if parent else [],
    }


def _file_urls(repo: str, ref: str, entry: Json) -> Json:
    """A pull request's or comparison's file with the URLs GitHub's `diff-entry` carries."""
    path = entry["filename"]
    return {
        **entry,
        "blob_url": f"https://github.com/{repo}/blob/{ref}/{path}",
        "raw_url": f"https://github.com/{repo}/raw/{ref}/{path}",
        "contents_url": f"https://api.github.com/repos/{repo}/contents/{path}?ref={ref}",
    }


class ApiError(Exception):
    """Raised inside a handler; becomes a GitHub-shaped JSON error response."""

    def __init__(
        self, status: int, message: str, *, errors: list[Any] | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors
        self.headers = headers or {}

    def response(self) -> web.Response:
        body: Json = {"message": self.message, "documentation_url": DOCS_URL, "status": str(self.status)}
        if self.errors is not None:
            body["errors"] = self.errors
        return web.json_response(body, status=self.status, headers=self.headers)


# ------------------------------------------------------------------------------------------------ state


@dataclass
class Installation:
    id: int
    account: str
    suspended: bool = False
    created_at: float = 0.0  # GitHub's installation created_at, epoch seconds


@dataclass
class Repo:
    id: int
    full_name: str
    installation_id: int
    default_branch: str = "main"
    private: bool = True
    contents: dict[str, dict[str, str]] = field(default_factory=dict)  # ref (branch or sha) -> path -> text
    links: dict[str, dict[str, Json]] = field(default_factory=dict)  # ref -> path -> symlink or submodule entry
    parents: dict[str, str | None] = field(default_factory=dict)  # commit graph: sha -> parent sha
    branches: dict[str, str] = field(default_factory=dict)  # branch -> sha
    permissions: dict[str, str] = field(default_factory=dict)  # user login -> admin/write/read/none
    compare_files: dict[tuple[str, str], list[Json]] = field(default_factory=dict)
    archived: bool = False  # GitHub refuses every write to an archived repository (403)

    def resolve(self, ref: str) -> str:
        return self.branches.get(ref, ref)

    def ancestors(self, sha: str) -> list[str]:
        chain: list[str] = []
        current: str | None = sha
        while current is not None and current not in chain:
            chain.append(current)
            current = self.parents.get(current)
        return chain


@dataclass
class Pull:
    repo: str
    number: int
    id: int
    head_sha: str
    base_sha: str
    title: str = "A change"
    body: str | None = ""
    user: str = "octocat"
    state: str = "open"
    draft: bool = False
    merged: bool = False
    head_ref: str = "feature"
    base_ref: str = "main"
    created_at: float = 0.0
    updated_at: float = 0.0
    files_by_sha: dict[str, list[Json]] = field(default_factory=dict)

    @property
    def files(self) -> list[Json]:
        return self.files_by_sha.get(self.head_sha, [])


@dataclass
class IssuedToken:
    installation_id: int
    expires_at: int


@dataclass
class Fault:
    """One injected fault; ``remaining`` None means every matching request, ``hits`` counts matches."""

    method: str
    path: re.Pattern[str]
    kind: str
    remaining: int | None
    params: dict[str, Any]
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.remaining is not None and self.remaining <= 0:
            return False
        return self.method in ("*", method.upper()) and self.path.search(path) is not None


@dataclass(frozen=True)
class ManifestCode:
    """A manifest the user submitted on GitHub's new-App page, waiting for its one conversion."""

    manifest: Json
    created_at: float
    owner: str


@dataclass(frozen=True)
class AuthInfo:
    kind: str  # "none", "jwt", "bad_jwt", "token", "bad_token"
    installation_id: int | None = None
    expired: bool = False


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    auth: str
    installation_id: int | None
    token_expired: bool
    status: int
    fault: str | None
    route: str = ""  # the route's pattern, e.g. /repos/{owner}/{name}/check-runs (tests/test_fake_schema.py)
    request_json: Any = None  # a write's JSON body as the app sent it
    response_json: Any = None  # the JSON the fake answered


class FakeGitHub:
    """GitHub's state for one app, plus helpers for tests to arrange it and look at what the app did.

    ``clock`` (epoch seconds) drives token expiry, timestamps and rate-limit windows; JWTs are checked
    against real time because gidgethub signs them with ``time.time()``.
    """

    def __init__(
        self,
        *,
        app_id: int = 4242,
        app_slug: str = "reviewer-app",
        app_name: str = "Reviewer App",
        app_owner: str = "acme",
        public_key: str | None = None,
        clock: Callable[[], float] = time.time,
        token_lifetime: float = 3600.0,
        webhook_url: str | None = None,
        webhook_secret: str | None = None,
    ) -> None:
        if public_key is None:
            pair = test_key_pair()
            public_key, self.private_key = pair.public_pem, pair.private_pem
        else:
            self.private_key = ""  # the test holds the private key
        self.app_id = app_id
        self.app_slug = app_slug
        self.app_name = app_name
        self.app_owner = app_owner
        self.public_key = public_key
        self.clock = clock
        self.token_lifetime = token_lifetime
        self.webhook_url = webhook_url
        self.webhook_secret = webhook_secret
        self.base_url: str | None = None  # set while served by running()

        self.installations: dict[int, Installation] = {}
        self.repos: dict[str, Repo] = {}
        self.pulls: dict[tuple[str, int], Pull] = {}
        self.tokens: dict[str, IssuedToken] = {}
        self.issued_tokens: list[str] = []  # every token ever handed out, for leak checks
        self.reviews: dict[tuple[str, int], list[Json]] = {}
        self.review_comments: dict[tuple[str, int], list[Json]] = {}
        self.issue_comments: dict[tuple[str, int], list[Json]] = {}
        self.check_runs: dict[int, Json] = {}
        self.check_run_regressions: list[tuple[int, str, str]] = []  # (run, status shown, status asked for)
        self._check_run_repo: dict[int, str] = {}
        self.reactions: dict[int, list[Json]] = {}
        self.deliveries: list[Json] = []
        self._delivery_payloads: dict[str, tuple[str, Json]] = {}  # guid -> (event, payload)
        self.redelivery_requests: list[int] = []
        self.manifest_codes: dict[str, ManifestCode] = {}  # code -> manifest, until converted or expired

        self.faults: list[Fault] = []
        self.requests: list[RecordedRequest] = []
        self.counters: Counter[str] = Counter()
        self._rate_used: Counter[tuple[str, int]] = Counter()
        self._writes_in_flight: Counter[int | None] = Counter()
        self.max_concurrent_writes: Counter[int | None] = Counter()  # per installation (None: app JWT)
        self._ids = itertools.count(1000)
        self._hang_release: asyncio.Event | None = None
        self._background: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------------------------- arranging state

    def next_id(self) -> int:
        return next(self._ids)

    def add_installation(self, installation_id: int | None = None, account: str = "octo-org") -> Installation:
        inst = Installation(id=installation_id or self.next_id(), account=account)
        self.installations[inst.id] = inst
        return inst

    def register_manifest_code(self, manifest: Json, *, owner: str | None = None, code: str | None = None) -> str:
        """As if someone pressed "Create GitHub App" on GitHub's page for ``manifest``: the code for its conversion."""
        code = code or secrets.token_hex(10)
        self.manifest_codes[code] = ManifestCode(
            manifest=manifest, created_at=self.clock(), owner=owner or self.app_owner
        )
        return code

    def suspend_installation(self, installation_id: int, suspended: bool = True) -> None:
        self.installations[installation_id].suspended = suspended

    def archive_repo(self, repo: str, archived: bool = True) -> None:
        self.repos[repo].archived = archived

    def remove_installation(self, installation_id: int) -> None:
        """Uninstall: the installation's tokens stop working and its repos become invisible."""
        del self.installations[installation_id]
        self.revoke_tokens(installation_id)

    def add_repo(
        self, full_name: str, installation_id: int, *, default_branch: str = "main", repo_id: int | None = None
    ) -> Repo:
        repo = Repo(id=repo_id or self.next_id(), full_name=full_name, installation_id=installation_id)
        repo.default_branch = default_branch
        base = random_sha()
        repo.parents[base] = None
        repo.branches[default_branch] = base
        self.repos[full_name] = repo
        return repo

    def add_commit(self, repo: str, sha: str | None = None, *, parent: str | None = None) -> str:
        sha = sha or random_sha()
        self.repos[repo].parents[sha] = parent
        return sha

    def set_file(self, repo: str, path: str, content: str, *, ref: str | None = None) -> None:
        r = self.repos[repo]
        r.contents.setdefault(ref or r.default_branch, {})[path] = content

    def set_symlink(self, repo: str, path: str, target: str, *, ref: str | None = None) -> None:
        """A symbolic link whose target is outside the repository's files: GitHub answers its type, not content."""
        r = self.repos[repo]
        r.links.setdefault(ref or r.default_branch, {})[path] = {"type": "symlink", "target": target}

    def set_submodule(self, repo: str, path: str, url: str, *, ref: str | None = None) -> None:
        r = self.repos[repo]
        r.links.setdefault(ref or r.default_branch, {})[path] = {"type": "submodule", "submodule_git_url": url}

    def set_permission(self, repo: str, user: str, permission: str) -> None:
        self.repos[repo].permissions[user] = permission

    def set_compare_files(self, repo: str, base: str, head: str, files: list[Json]) -> None:
        self.repos[repo].compare_files[(base, head)] = [_normalize_file(f) for f in files]

    def add_pull(
        self,
        repo: str,
        number: int,
        head_sha: str | None = None,
        *,
        files: Iterable[Json] = (),
        draft: bool = False,
        title: str = "A change",
        body: str | None = "",
        user: str = "octocat",
        state: str = "open",
        head_ref: str | None = None,
        base_ref: str | None = None,
    ) -> Pull:
        r = self.repos[repo]
        base_ref = base_ref or r.default_branch
        base_sha = r.branches.setdefault(base_ref, self.add_commit(repo))
        head_sha = head_sha or random_sha()
        r.parents[head_sha] = base_sha
        head_ref = head_ref or f"feature-{number}"
        r.branches[head_ref] = head_sha
        now = self.clock()
        pull = Pull(
            repo=repo,
            number=number,
            id=self.next_id(),
            head_sha=head_sha,
            base_sha=base_sha,
            title=title,
            body=body,
            user=user,
            state=state,
            draft=draft,
            head_ref=head_ref,
            base_ref=base_ref,
            created_at=now,
            updated_at=now,
        )
        pull.files_by_sha[head_sha] = [_normalize_file(f) for f in files]
        self.pulls[(repo, number)] = pull
        return pull

    def advance_head(
        self,
        repo: str,
        number: int,
        new_sha: str | None = None,
        *,
        files: Iterable[Json] | None = None,
        force: bool = False,
    ) -> str:
        """Push to the PR: a new head on top of the old one (``force``: on top of the base instead)."""
        pull = self.pulls[(repo, number)]
        r = self.repos[repo]
        new_sha = new_sha or random_sha()
        r.parents[new_sha] = pull.base_sha if force else pull.head_sha
        new_files = [_normalize_file(f) for f in files] if files is not None else list(pull.files)
        pull.files_by_sha[new_sha] = new_files
        pull.head_sha = new_sha
        pull.updated_at = self.clock()
        r.branches[pull.head_ref] = new_sha
        return new_sha

    def close_pull(self, repo: str, number: int, *, merged: bool = False) -> None:
        pull = self.pulls[(repo, number)]
        pull.state, pull.merged, pull.updated_at = "closed", merged, self.clock()

    def add_review_by(
        self,
        repo: str,
        number: int,
        user_login: str,
        body: str,
        *,
        state: str = "COMMENTED",
        commit_id: str | None = None,
    ) -> Json:
        pull = self.pulls[(repo, number)]
        review = self._review_json(repo, number, user_login, body, state, commit_id or pull.head_sha)
        self.reviews.setdefault((repo, number), []).append(review)
        return review

    def add_issue_comment(self, repo: str, number: int, user_login: str, body: str) -> Json:
        comment = self._comment_json(repo, number, user_login, body)
        self.issue_comments.setdefault((repo, number), []).append(comment)
        return comment

    def add_delivery(
        self,
        event: str,
        action: str | None = None,
        *,
        status_code: int = 200,
        guid: str | None = None,
        delivered_at: float | None = None,
        redelivery: bool = False,
        installation_id: int | None = None,
        repository_id: int | None = None,
        payload: Json | None = None,
    ) -> Json:
        delivery: Json = {
            "id": self.next_id(),
            "guid": guid or str(uuid.uuid4()),
            "delivered_at": iso(self.clock() if delivered_at is None else delivered_at),
            "redelivery": redelivery,
            "duration": 0.05,
            "status": "OK" if 200 <= status_code < 300 else ("Timed out" if status_code == 0 else "Failed"),
            "status_code": status_code,
            "event": event,
            "action": action,
            "installation_id": installation_id,
            "repository_id": repository_id,
            "throttled_at": None,
        }
        self.deliveries.append(delivery)
        if payload is not None:
            self._delivery_payloads[delivery["guid"]] = (event, payload)
        return delivery

    # ------------------------------------------------------------------------------ tokens and faults

    def expire_tokens(self, installation_id: int | None = None) -> None:
        """Make issued tokens expire now (they stay known, so their use counts as an expired-token request)."""
        for tok in self.tokens.values():
            if installation_id in (None, tok.installation_id):
                tok.expires_at = min(tok.expires_at, int(self.clock()))

    def revoke_tokens(self, installation_id: int | None = None) -> None:
        for value, tok in list(self.tokens.items()):
            if installation_id in (None, tok.installation_id):
                del self.tokens[value]

    def inject(self, method: str, path_regex: str, fault: str, times: int | None = 1, **params: Any) -> Fault:
        """Fail the next ``times`` requests (None: all) whose method and path (``re.search``) match.

        Faults and their params: error(status=500), hang(delay=None), secondary_rate_limit(retry_after=60,
        status=403), primary_rate_limit(reset=now+60, status=403), too_many_requests(retry_after=60),
        unauthorized(), lost_response(mode="drop"|"502"|"slow", delay=None), advance_head(new_sha=None, repo=None, number=None).
        """
        if fault not in FAULT_KINDS:
            raise ValueError(f"unknown fault {fault!r}; one of {sorted(FAULT_KINDS)}")
        injected = Fault(method.upper(), re.compile(path_regex), fault, times, params)
        self.faults.append(injected)
        return injected

    def clear_faults(self) -> None:
        self.faults.clear()

    # ------------------------------------------------------------------------------------ inspecting

    def reviews_for(self, repo: str, number: int) -> list[Json]:
        return list(self.reviews.get((repo, number), []))

    def review_comments_for(self, repo: str, number: int) -> list[Json]:
        return list(self.review_comments.get((repo, number), []))

    def issue_comments_for(self, repo: str, number: int) -> list[Json]:
        return list(self.issue_comments.get((repo, number), []))

    def check_runs_for(self, repo: str, sha: str) -> list[Json]:
        return [
            run
            for run_id, run in self.check_runs.items()
            if self._check_run_repo[run_id] == repo and run["head_sha"] == sha
        ]

    def requests_matching(self, method: str = "*", path_regex: str = "") -> list[RecordedRequest]:
        pattern = re.compile(path_regex)
        return [r for r in self.requests if method in ("*", r.method) and pattern.search(r.path) is not None]

    def snapshot(self) -> Json:
        """Everything a test may want to assert on, as plain JSON (used by the standalone server)."""
        return {
            "pulls": [
                {"repo": p.repo, "number": p.number, "head_sha": p.head_sha, "state": p.state, "draft": p.draft}
                for p in self.pulls.values()
            ],
            "reviews": {f"{r}#{n}": v for (r, n), v in self.reviews.items()},
            "review_comments": {f"{r}#{n}": v for (r, n), v in self.review_comments.items()},
            "issue_comments": {f"{r}#{n}": v for (r, n), v in self.issue_comments.items()},
            "check_runs": list(self.check_runs.values()),
            "reactions": {str(k): v for k, v in self.reactions.items()},
            "deliveries": self.deliveries,
            "redelivery_requests": self.redelivery_requests,
            "counters": dict(self.counters),
            "requests": len(self.requests),
        }

    def load_state(self, state: Json) -> None:
        """Arrange state from JSON: {"app": {...}, "installations": [...], "repos": [...], "pulls": [...]}."""
        app = state.get("app", {})
        self.app_id = int(app.get("id", self.app_id))
        self.app_slug = app.get("slug", self.app_slug)
        self.app_name = app.get("name", self.app_name)
        self.public_key = app.get("public_key", self.public_key)
        self.token_lifetime = float(app.get("token_lifetime", self.token_lifetime))
        self.webhook_url = app.get("webhook_url", self.webhook_url)
        self.webhook_secret = app.get("webhook_secret", self.webhook_secret)
        for inst in state.get("installations", []):
            self.add_installation(inst["id"], inst.get("account", "octo-org"))
            self.installations[inst["id"]].suspended = bool(inst.get("suspended", False))
        for repo in state.get("repos", []):
            self.add_repo(repo["full_name"], repo["installation_id"], default_branch=repo.get("default_branch", "main"))
            for path, text in repo.get("files", {}).items():
                self.set_file(repo["full_name"], path, text)
            for user, perm in repo.get("permissions", {}).items():
                self.set_permission(repo["full_name"], user, perm)
        for pull in state.get("pulls", []):
            pull = dict(pull)
            self.add_pull(pull.pop("repo"), pull.pop("number"), pull.pop("head_sha", None), **pull)

    # ------------------------------------------------------------------------------------ webhooks

    def sign(self, body: bytes) -> str:
        assert self.webhook_secret is not None
        return "sha256=" + hmac.new(self.webhook_secret.encode(), body, hashlib.sha256).hexdigest()

    async def send_webhook(
        self, event: str, payload: Json, *, guid: str | None = None, redelivery: bool = False
    ) -> int:
        """POST a signed webhook to ``webhook_url`` and record the delivery; returns the status (0: failed)."""
        if self.webhook_url is None or self.webhook_secret is None:
            raise RuntimeError("set webhook_url and webhook_secret to send webhooks")
        guid = guid or str(uuid.uuid4())
        body = json.dumps(payload).encode()
        headers = {
            "content-type": "application/json",
            "user-agent": "GitHub-Hookshot/fake",
            "x-github-event": event,
            "x-github-delivery": guid,
            "x-hub-signature-256": self.sign(body),
            "x-github-hook-installation-target-type": "integration",
            "x-github-hook-installation-target-id": str(self.app_id),
        }
        try:
            async with aiohttp.ClientSession() as session:
                async with session.post(self.webhook_url, data=body, headers=headers) as resp:
                    status = resp.status
        except (aiohttp.ClientError, TimeoutError):
            status = 0
        installation = payload.get("installation") or {}
        repository = payload.get("repository") or {}
        self.add_delivery(
            event,
            payload.get("action"),
            status_code=status,
            guid=guid,
            redelivery=redelivery,
            installation_id=installation.get("id"),
            repository_id=repository.get("id"),
            payload=payload,
        )
        return status

    # ------------------------------------------------------------------------------------ the app

    def make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware])
        r = app.router
        repo = "/repos/{owner}/{repo}"
        r.add_get("/app", self._get_app)
        r.add_post("/app-manifests/{code}/conversions", self._convert_manifest)
        r.add_post("/settings/apps/new", self._new_app_page)  # github.com's pages, the part the flow needs
        r.add_post("/organizations/{org}/settings/apps/new", self._new_app_page)
        r.add_post("/app/installations/{installation_id}/access_tokens", self._create_token)
        r.add_get("/app/installations", self._list_installations)
        r.add_get("/app/installations/{installation_id}", self._get_installation)
        r.add_get("/installation/repositories", self._list_installation_repos)
        r.add_get("/app/hook/deliveries", self._list_deliveries)
        r.add_post("/app/hook/deliveries/{delivery_id}/attempts", self._redeliver)
        r.add_get(repo + "/pulls", self._list_pulls)
        r.add_get(repo + r"/pulls/{number:\d+}", self._get_pull)
        r.add_get(repo + r"/pulls/{number:\d+}/files", self._list_files)
        r.add_get(repo + r"/pulls/{number:\d+}/reviews", self._list_reviews)
        r.add_post(repo + r"/pulls/{number:\d+}/reviews", self._create_review)
        r.add_get(repo + "/commits/{ref}/check-runs", self._list_check_runs)
        r.add_post(repo + "/check-runs", self._create_check_run)
        r.add_get(repo + r"/check-runs/{run_id:\d+}", self._get_check_run)
        r.add_patch(repo + r"/check-runs/{run_id:\d+}", self._update_check_run)
        r.add_get(repo + r"/issues/{number:\d+}/comments", self._list_issue_comments)
        r.add_post(repo + r"/issues/{number:\d+}/comments", self._create_issue_comment)
        r.add_post(repo + r"/issues/comments/{comment_id:\d+}/reactions", self._create_reaction)
        r.add_get(repo + "/contents/{path:.+}", self._get_contents)
        r.add_get(repo + "/contents", self._get_contents)  # the root directory
        r.add_get(repo + "/contents/", self._get_contents)
        r.add_get(repo + "/compare/{basehead:.+}", self._compare)
        r.add_get(repo + "/collaborators/{user}/permission", self._permission)
        r.add_get("/_fake/state", self._admin_state)
        r.add_post("/_fake/inject", self._admin_inject)
        r.add_post("/_fake/load", self._admin_load)
        from tests.fakes import github_replies  # replies: review threads (tests/fakes/github_replies.py)

        github_replies.register(self, app)  # replies: its routes
        return app

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
        if request.path.startswith("/_fake/"):
            return await handler(request)
        auth = self._identify(request)
        request["auth"] = auth
        refusal = self._check_api_headers(request)
        fault = None if refusal is not None else self._take_fault(request)
        self.counters["requests"] += 1
        is_write = request.method in ("POST", "PATCH", "PUT", "DELETE")
        if is_write:
            self._writes_in_flight[auth.installation_id] += 1
            in_flight = self._writes_in_flight[auth.installation_id]
            self.max_concurrent_writes[auth.installation_id] = max(
                in_flight, self.max_concurrent_writes[auth.installation_id]
            )
        try:
            if fault is not None and fault.kind == "hang":
                await self._hang(fault.params.get("delay"))
            response: web.StreamResponse
            if refusal is not None:
                response = refusal.response()
            elif fault is not None and fault.kind in _PRE_FAULTS:
                response = self._fault_response(fault, auth)
            else:
                try:
                    response = await handler(request)
                except ApiError as exc:
                    response = exc.response()
                except web.HTTPException as exc:  # no such route / method
                    response = ApiError(exc.status, exc.reason).response()
        finally:
            if is_write:
                self._writes_in_flight[auth.installation_id] -= 1
        self._add_rate_headers(response, auth)
        self.requests.append(
            RecordedRequest(
                method=request.method,
                path=request.path,
                query=dict(request.query),
                auth=auth.kind,
                installation_id=auth.installation_id,
                token_expired=auth.expired,
                status=response.status,
                fault=fault.kind if fault else None,
                route=request.match_info.route.resource.canonical if request.match_info.route.resource else "",
                request_json=_json_or_none(await request.read()) if is_write else None,
                response_json=_json_or_none(response.body) if isinstance(response, web.Response) else None,
            )
        )
        if fault is not None and fault.kind == "advance_head":
            self._fault_advance_head(request, fault)
        if fault is not None and fault.kind == "lost_response":
            if fault.params.get("mode", "drop") == "502":
                return ApiError(502, "Bad Gateway").response()
            if fault.params.get("mode") == "slow":
                # The write is applied; the answer comes only after `delay` seconds (or when released).
                await self._hang(fault.params.get("delay"))
                return response
            assert request.transport is not None
            request.transport.close()  # the write happened; the client sees a dropped connection
            raise web.HTTPInternalServerError()  # never delivered: the transport is gone
        return response

    def _check_api_headers(self, request: web.Request) -> ApiError | None:
        """The API's media type and version headers are present (github.com's web pages need neither)."""
        if request.path.endswith("/settings/apps/new"):
            return None
        if request.headers.get("Accept", "").split(";")[0].strip().lower() != API_MEDIA_TYPE:
            self.counters["bad_api_headers"] += 1
            return ApiError(415, f"Unsupported 'Accept' header: use {API_MEDIA_TYPE}")
        version = request.headers.get("X-GitHub-Api-Version")
        if version not in API_VERSIONS:
            self.counters["bad_api_headers"] += 1
            return ApiError(400, f"X-GitHub-Api-Version {version!r} is not supported")
        return None

    def _identify(self, request: web.Request) -> AuthInfo:
        scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
        if not credential:
            return AuthInfo("none")
        if scheme.lower() == "bearer" and credential.count(".") == 2:
            return AuthInfo("jwt" if self._verify_jwt(credential) else "bad_jwt")
        token = self.tokens.get(credential)
        if token is None:
            self.counters["bad_credentials"] += 1
            return AuthInfo("bad_token")
        expired = self.clock() >= token.expires_at
        if expired:
            self.counters["expired_token_requests"] += 1
        return AuthInfo("token", installation_id=token.installation_id, expired=expired)

    def _verify_jwt(self, token: str) -> bool:
        try:
            claims = jwt.decode(
                token, self.public_key, algorithms=["RS256"], options={"require": ["exp", "iat", "iss"]}
            )
        except jwt.PyJWTError:
            return False
        return str(claims["iss"]) == str(self.app_id) and claims["exp"] - claims["iat"] <= JWT_MAX_LIFETIME

    def _take_fault(self, request: web.Request) -> Fault | None:
        for fault in self.faults:
            if fault.matches(request.method, request.path):
                fault.hits += 1
                if fault.remaining is not None:
                    fault.remaining -= 1
                self.counters["faults"] += 1
                return fault
        return None

    async def _hang(self, delay: float | None) -> None:
        if self._hang_release is None:
            self._hang_release = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._hang_release.wait(), delay)

    def release_hangs(self) -> None:
        if self._hang_release is not None:
            self._hang_release.set()

    def _fault_response(self, fault: Fault, auth: AuthInfo) -> web.Response:
        p = fault.params
        now = self.clock()
        if fault.kind == "error":
            status = int(p.get("status", 500))
            return ApiError(status, p.get("message", "Server Error")).response()
        if fault.kind == "unauthorized":
            return ApiError(401, "Bad credentials").response()
        if fault.kind == "primary_rate_limit":
            headers = self._rate_headers(auth, remaining=0, reset=int(p.get("reset", now + 60)))
            who = f"installation ID {auth.installation_id}" if auth.installation_id else "this app"
            return ApiError(
                int(p.get("status", 403)), f"API rate limit exceeded for {who}.", headers=headers
            ).response()
        headers = {}
        if p.get("retry_after", 60) is not None:
            headers["retry-after"] = str(p.get("retry_after", 60))
        if fault.kind == "too_many_requests":
            return ApiError(429, "Too Many Requests", headers=headers).response()
        message = (
            "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
            "If you reach out to GitHub Support for help, please include the request ID."
        )
        return ApiError(int(p.get("status", 403)), message, headers=headers).response()

    def _fault_advance_head(self, request: web.Request, fault: Fault) -> None:
        repo = fault.params.get("repo") or f"{request.match_info.get('owner')}/{request.match_info.get('repo')}"
        number = fault.params.get("number") or int(request.match_info.get("number", "0"))
        if (repo, number) in self.pulls:
            self.advance_head(repo, number, fault.params.get("new_sha"))

    def _rate_headers(
        self, auth: AuthInfo, *, remaining: int | None = None, reset: int | None = None
    ) -> dict[str, str]:
        window = int(self.clock()) // 3600
        who = str(auth.installation_id) if auth.installation_id is not None else auth.kind
        used = self._rate_used[(who, window)]
        return {
            "x-ratelimit-limit": str(RATE_LIMIT),
            "x-ratelimit-remaining": str(max(RATE_LIMIT - used, 0) if remaining is None else remaining),
            "x-ratelimit-reset": str((window + 1) * 3600 if reset is None else reset),
            "x-ratelimit-used": str(used),
            "x-ratelimit-resource": "core",
        }

    def _add_rate_headers(self, response: web.StreamResponse, auth: AuthInfo) -> None:
        window = int(self.clock()) // 3600
        who = str(auth.installation_id) if auth.installation_id is not None else auth.kind
        self._rate_used[(who, window)] += 1
        for key, value in self._rate_headers(auth).items():
            response.headers.setdefault(key, value)

    # ------------------------------------------------------------------------------ auth guards

    def _require_jwt(self, request: web.Request) -> None:
        if request["auth"].kind != "jwt":
            raise ApiError(401, "A JSON web token could not be decoded")

    def _repo_for(self, request: web.Request) -> Repo:
        auth: AuthInfo = request["auth"]
        if auth.kind == "jwt":
            raise ApiError(403, "Resource not accessible by integration")
        if auth.kind != "token" or auth.expired or auth.installation_id not in self.installations:
            raise ApiError(401, "Bad credentials")
        if self.installations[auth.installation_id].suspended:
            raise ApiError(403, "This installation has been suspended")
        full_name = f"{request.match_info['owner']}/{request.match_info['repo']}"
        repo = self.repos.get(full_name)
        if repo is None or repo.installation_id != auth.installation_id:
            raise ApiError(404, "Not Found")
        if repo.archived and request.method in ("POST", "PATCH", "PUT", "DELETE"):
            raise ApiError(403, "Repository was archived so is read-only.")
        return repo

    def _pull_for(self, request: web.Request) -> Pull:
        repo = self._repo_for(request)
        pull = self.pulls.get((repo.full_name, int(request.match_info["number"])))
        if pull is None:
            raise ApiError(404, "Not Found")
        return pull

    @staticmethod
    async def _body(request: web.Request) -> Json:
        try:
            data = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ApiError(400, "Problems parsing JSON") from exc
        if not isinstance(data, dict):
            raise ApiError(400, "Problems parsing JSON")
        return data

    @staticmethod
    def _page(request: web.Request, items: list[Any], wrap: Callable[[list[Any]], Any] | None = None) -> web.Response:
        try:
            per_page = min(max(int(request.query.get("per_page", PER_PAGE_DEFAULT)), 1), PER_PAGE_MAX)
            page = max(int(request.query.get("page", 1)), 1)
        except ValueError:
            per_page, page = PER_PAGE_DEFAULT, 1
        chunk = items[(page - 1) * per_page : page * per_page]
        last = max(1, math.ceil(len(items) / per_page))
        links = []
        if page < last:
            links += [(page + 1, "next"), (last, "last")]
        if page > 1:
            links += [(page - 1, "prev"), (1, "first")]
        headers = {}
        if links:
            headers["Link"] = ", ".join(f'<{request.url.update_query(page=str(n))}>; rel="{rel}"' for n, rel in links)
        return web.json_response(wrap(chunk) if wrap else chunk, headers=headers)

    # --------------------------------------------------------------------------------- app endpoints

    async def _get_app(self, request: web.Request) -> web.Response:
        self._require_jwt(request)
        return web.json_response(self._app_json())

    def _app_json(self) -> Json:
        return dict(
            {
                "id": self.app_id,
                "slug": self.app_slug,
                "node_id": f"A_{self.app_id}",
                "name": self.app_name,
                "owner": {**_user(self.app_owner), "type": "Organization"},
                "description": "",
                "external_url": "https://example.invalid",
                "html_url": f"https://github.com/apps/{self.app_slug}",
                "permissions": {"pull_requests": "write", "checks": "write", "contents": "read", "issues": "write"},
                "events": ["pull_request", "issue_comment", "check_run"],
                "installations_count": len(self.installations),
                "created_at": iso(0),
                "updated_at": iso(0),
            }
        )

    async def _new_app_page(self, request: web.Request) -> web.Response:
        """The user submits the manifest form and presses "Create GitHub App": back to redirect_url with a code."""
        try:
            manifest = json.loads(str((await request.post()).get("manifest", "")))
        except json.JSONDecodeError as exc:
            raise ApiError(422, "Invalid manifest") from exc
        if not isinstance(manifest, dict) or not manifest.get("url") or not manifest.get("redirect_url"):
            raise ApiError(422, "Invalid manifest: url and redirect_url are required")
        code = self.register_manifest_code(manifest, owner=request.match_info.get("org"))
        query = {"code": code, **({"state": request.query["state"]} if "state" in request.query else {})}
        location = str(yarl.URL(manifest["redirect_url"]).update_query(query))
        return web.Response(status=302, headers={"Location": location})

    async def _convert_manifest(self, request: web.Request) -> web.Response:
        """Unknown, used and expired codes are all 404, as on GitHub; a good one makes this fake the new App."""
        pending = self.manifest_codes.pop(request.match_info["code"], None)
        if pending is None or self.clock() - pending.created_at >= MANIFEST_CODE_LIFETIME:
            raise ApiError(404, "Not Found")
        manifest, pair = pending.manifest, generate_key_pair()
        self.app_id, self.public_key, self.private_key = self.next_id(), pair.public_pem, pair.private_pem
        self.app_name = str(manifest.get("name") or "app")
        self.app_slug = re.sub(r"[^a-z0-9]+", "-", self.app_name.lower()).strip("-")
        self.app_owner = pending.owner
        self.webhook_secret = secrets.token_hex(20)
        self.webhook_url = (manifest.get("hook_attributes") or {}).get("url")
        now = iso(self.clock())
        return web.json_response(
            {
                "id": self.app_id,
                "slug": self.app_slug,
                "node_id": f"A_{self.app_id}",
                "name": self.app_name,
                "owner": _user(self.app_owner),
                "description": manifest.get("description", ""),
                "external_url": manifest["url"],
                "html_url": f"{self.base_url or 'https://github.com'}/apps/{self.app_slug}",
                "created_at": now,
                "updated_at": now,
                "permissions": manifest.get("default_permissions", {}),
                "events": manifest.get("default_events", []),
                "installations_count": 0,
                "client_id": "Iv1." + secrets.token_hex(8),
                "client_secret": secrets.token_hex(20),
                "webhook_secret": self.webhook_secret,
                "pem": self.private_key,
            },
            status=201,
        )

    async def _create_token(self, request: web.Request) -> web.Response:
        self._require_jwt(request)
        inst = self.installations.get(int(request.match_info["installation_id"]))
        if inst is None:
            raise ApiError(404, "Not Found")
        if inst.suspended:
            raise ApiError(403, "This installation has been suspended")
        value = "ghs_" + secrets.token_hex(18)
        expires_at = int(self.clock() + self.token_lifetime)
        self.tokens[value] = IssuedToken(installation_id=inst.id, expires_at=expires_at)
        self.issued_tokens.append(value)
        self.counters["access_tokens"] += 1
        self.counters[f"access_tokens:{inst.id}"] += 1
        return web.json_response(
            {
                "token": value,
                "expires_at": iso(expires_at),
                "permissions": {"pull_requests": "write", "checks": "write", "contents": "read"},
                "repository_selection": "selected",
            },
            status=201,
        )

    def _installation_json(self, inst: Installation) -> Json:
        api = "https://api.github.com"
        return {
            "id": inst.id,
            "account": {**_user(inst.account), "type": "Organization"},
            "app_id": self.app_id,
            "app_slug": self.app_slug,
            "target_type": "Organization",
            "repository_selection": "selected",
            "access_tokens_url": f"{api}/app/installations/{inst.id}/access_tokens",
            "repositories_url": f"{api}/installation/repositories",
            "html_url": f"https://github.com/organizations/{inst.account}/settings/installations/{inst.id}",
            "target_id": _user(inst.account)["id"],
            "permissions": {"pull_requests": "write", "checks": "write", "contents": "read", "issues": "write"},
            "events": ["pull_request", "issue_comment", "check_run"],
            "single_file_name": None,
            "created_at": iso(inst.created_at),
            "updated_at": iso(inst.created_at),
            "suspended_by": _user("site-admin") if inst.suspended else None,
            "suspended_at": iso(self.clock()) if inst.suspended else None,
        }

    async def _list_installations(self, request: web.Request) -> web.Response:
        self._require_jwt(request)
        return self._page(
            request, [self._installation_json(inst) for inst in sorted(self.installations.values(), key=lambda i: i.id)]
        )

    async def _get_installation(self, request: web.Request) -> web.Response:
        self._require_jwt(request)
        inst = self.installations.get(int(request.match_info["installation_id"]))
        if inst is None:
            raise ApiError(404, "Not Found")
        return web.json_response(self._installation_json(inst))

    async def _list_installation_repos(self, request: web.Request) -> web.Response:
        auth: AuthInfo = request["auth"]
        if auth.kind != "token" or auth.expired or auth.installation_id not in self.installations:
            raise ApiError(401, "Bad credentials")
        if self.installations[auth.installation_id].suspended:
            raise ApiError(403, "This installation has been suspended")
        repos = [
            {
                "id": r.id,
                "full_name": r.full_name,
                "name": r.full_name.split("/")[1],
                "private": r.private,
                "default_branch": r.default_branch,
                "owner": _user(r.full_name.split("/")[0]),
            }
            for r in sorted(self.repos.values(), key=lambda r: r.id)
            if r.installation_id == auth.installation_id
        ]
        total = len(repos)
        return self._page(request, repos, lambda chunk: {"total_count": total, "repositories": chunk})

    async def _list_deliveries(self, request: web.Request) -> web.Response:
        self._require_jwt(request)
        try:
            per_page = min(max(int(request.query.get("per_page", PER_PAGE_DEFAULT)), 1), PER_PAGE_MAX)
        except ValueError:
            per_page = PER_PAGE_DEFAULT
        newest_first = sorted(self.deliveries, key=lambda d: d["id"], reverse=True)
        cursor = request.query.get("cursor")
        if cursor:
            below = int(cursor.removeprefix("v1_"))
            newest_first = [d for d in newest_first if d["id"] <= below]
        chunk, rest = newest_first[:per_page], newest_first[per_page:]
        headers = {}
        if rest:
            next_url = request.url.update_query(cursor=f"v1_{rest[0]['id']}")
            headers["Link"] = f'<{next_url}>; rel="next"'
        return web.json_response(chunk, headers=headers)

    async def _redeliver(self, request: web.Request) -> web.Response:
        self._require_jwt(request)
        delivery_id = int(request.match_info["delivery_id"])
        original = next((d for d in self.deliveries if d["id"] == delivery_id), None)
        if original is None:
            raise ApiError(404, "Not Found")
        self.redelivery_requests.append(delivery_id)
        stored = self._delivery_payloads.get(original["guid"])
        if stored is not None and self.webhook_url is not None and self.webhook_secret is not None:
            task = asyncio.create_task(self.send_webhook(stored[0], stored[1], guid=original["guid"], redelivery=True))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        else:
            self.add_delivery(
                original["event"],
                original["action"],
                guid=original["guid"],
                redelivery=True,
                installation_id=original["installation_id"],
                repository_id=original["repository_id"],
            )
        return web.json_response({}, status=202)

    # ------------------------------------------------------------------------------- pull requests

    def _pull_json(self, request: web.Request, pull: Pull) -> Json:
        repo = self.repos[pull.repo]
        owner = pull.repo.split("/")[0]
        repo_json = _repo_json(repo)
        files = pull.files
        api = f"{request.url.origin()}/repos/{pull.repo}/pulls/{pull.number}"
        issue = f"{request.url.origin()}/repos/{pull.repo}/issues/{pull.number}"
        html = f"https://github.com/{pull.repo}/pull/{pull.number}"
        return {
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "issue_url": issue,
            "commits_url": f"{api}/commits",
            "review_comments_url": f"{api}/comments",
            "review_comment_url": f"{request.url.origin()}/repos/{pull.repo}/pulls/comments{{/number}}",
            "comments_url": f"{issue}/comments",
            "statuses_url": f"{request.url.origin()}/repos/{pull.repo}/statuses/{pull.head_sha}",
            "labels": [],
            "milestone": None,
            "merged_at": iso(pull.updated_at) if pull.merged else None,
            "_links": {
                k: {"href": v}
                for k, v in (
                    ("self", api),
                    ("html", html),
                    ("issue", issue),
                    ("comments", f"{issue}/comments"),
                    ("review_comments", f"{api}/comments"),
                    ("review_comment", f"{api}/comments{{/number}}"),
                    ("commits", f"{api}/commits"),
                    ("statuses", f"{api}/statuses"),
                )
            },
            "auto_merge": None,
            "mergeable": None,
            "mergeable_state": "unknown",
            "merged_by": None,
            "comments": 0,
            "review_comments": 0,
            "maintainer_can_modify": False,
            "url": api,
            "id": pull.id,
            "node_id": f"PR_{pull.id}",
            "html_url": f"https://github.com/{pull.repo}/pull/{pull.number}",
            "number": pull.number,
            "state": pull.state,
            "locked": False,
            "title": pull.title,
            "body": pull.body,
            "user": _user(pull.user),
            "draft": pull.draft,
            "merged": pull.merged,
            "created_at": iso(pull.created_at),
            "updated_at": iso(pull.updated_at),
            "closed_at": iso(pull.updated_at) if pull.state == "closed" else None,
            "head": {
                "ref": pull.head_ref,
                "sha": pull.head_sha,
                "label": f"{owner}:{pull.head_ref}",
                "repo": repo_json,
                "user": _user(owner),
            },
            "base": {
                "ref": pull.base_ref,
                "sha": pull.base_sha,
                "label": f"{owner}:{pull.base_ref}",
                "repo": repo_json,
                "user": _user(owner),
            },
            "author_association": "CONTRIBUTOR",
            "changed_files": len(files),
            "additions": sum(f["additions"] for f in files),
            "deletions": sum(f["deletions"] for f in files),
            "commits": max(len(repo.ancestors(pull.head_sha)) - len(repo.ancestors(pull.base_sha)), 1),
        }

    async def _list_pulls(self, request: web.Request) -> web.Response:
        repo = self._repo_for(request)
        state = request.query.get("state", "open")
        pulls = [
            p
            for (name, _), p in sorted(self.pulls.items(), key=lambda kv: -kv[0][1])
            if name == repo.full_name and state in ("all", p.state)
        ]
        return self._page(request, [self._pull_json(request, p) for p in pulls])

    async def _get_pull(self, request: web.Request) -> web.Response:
        return web.json_response(self._pull_json(request, self._pull_for(request)))

    async def _list_files(self, request: web.Request) -> web.Response:
        pull = self._pull_for(request)
        return self._page(request, [_file_urls(pull.repo, pull.head_sha, f) for f in pull.files[:PULL_FILES_CAP]])

    async def _list_reviews(self, request: web.Request) -> web.Response:
        pull = self._pull_for(request)
        return self._page(request, self.reviews.get((pull.repo, pull.number), []))

    def _review_json(self, repo: str, number: int, login: str, body: str, state: str, commit_id: str) -> Json:
        review_id = self.next_id()
        return {
            "id": review_id,
            "node_id": f"PRR_{review_id}",
            "user": _user(login),
            "body": body,
            "state": state,
            "commit_id": commit_id,
            "submitted_at": None if state == "PENDING" else iso(self.clock()),
            "html_url": f"https://github.com/{repo}/pull/{number}#pullrequestreview-{review_id}",
            "pull_request_url": f"https://api.github.com/repos/{repo}/pulls/{number}",
            "author_association": "NONE",
            "_links": {
                "html": {"href": f"https://github.com/{repo}/pull/{number}#pullrequestreview-{review_id}"},
                "pull_request": {"href": f"https://api.github.com/repos/{repo}/pulls/{number}"},
            },
        }

    async def _create_review(self, request: web.Request) -> web.Response:
        pull = self._pull_for(request)
        data = await self._body(request)
        commit_id = data.get("commit_id") or pull.head_sha
        if commit_id not in pull.files_by_sha:
            raise ApiError(422, "Unprocessable Entity", errors=[f"No commit found for SHA: {commit_id}"])
        event = data.get("event")
        if event is not None and event not in REVIEW_EVENTS:
            raise ApiError(422, "Unprocessable Entity", errors=[f"Unknown review event: {event}"])
        body = data.get("body") or ""
        comments = data.get("comments") or []
        if event == "REQUEST_CHANGES" and not body:
            raise ApiError(422, "Unprocessable Entity", errors=["Body is required for REQUEST_CHANGES"])
        if event == "COMMENT" and not body and not comments:
            raise ApiError(422, "Unprocessable Entity", errors=["Body is required for COMMENT"])
        files = {f["filename"]: f for f in pull.files_by_sha[commit_id]}
        for comment in comments:
            self._check_anchor(comment, files)
        bot = f"{self.app_slug}[bot]"
        review = self._review_json(
            pull.repo, pull.number, bot, body, REVIEW_EVENTS.get(event or "", "PENDING"), commit_id
        )
        self.reviews.setdefault((pull.repo, pull.number), []).append(review)
        for comment in comments:
            comment_id = self.next_id()
            self.review_comments.setdefault((pull.repo, pull.number), []).append(
                {
                    "id": comment_id,
                    "pull_request_review_id": review["id"],
                    "path": comment["path"],
                    "line": comment["line"],
                    "side": comment.get("side", "RIGHT"),
                    "start_line": comment.get("start_line"),
                    "start_side": comment.get("start_side") if comment.get("start_line") else None,
                    "body": comment["body"],
                    "commit_id": commit_id,
                    "user": _user(bot),
                }
            )
        self.counters["reviews_created"] += 1
        return web.json_response(review)

    @staticmethod
    def _check_anchor(comment: Json, files: dict[str, Json]) -> None:
        def invalid(why: str) -> ApiError:
            return ApiError(422, "Unprocessable Entity", errors=[why])

        if not isinstance(comment, dict) or not comment.get("body") or not comment.get("path"):
            raise invalid("Pull request review thread path and body are required")
        entry = files.get(comment["path"])
        if entry is None:
            raise invalid("Path could not be resolved")
        if not isinstance(comment.get("line"), int):
            raise invalid("Pull request review thread line must be an integer")
        if "patch" not in entry:
            raise invalid("Line could not be resolved")
        left, right = commentable_lines(entry["patch"])
        side = comment.get("side", "RIGHT")
        if side not in ("LEFT", "RIGHT"):
            raise invalid("Pull request review thread side must be LEFT or RIGHT")
        lines = right if side == "RIGHT" else left
        if comment["line"] not in lines:
            raise invalid("Pull request review thread line must be part of the diff")
        start = comment.get("start_line")
        if start is None:
            return
        # A multi-line comment: both ends in one hunk, the start before the line (GitHub refuses start == line).
        start_side = comment.get("start_side", side)
        if start_side not in ("LEFT", "RIGHT"):
            raise invalid("Pull request review thread start side must be LEFT or RIGHT")
        if not isinstance(start, int) or (start_side == side and start >= comment["line"]):
            raise invalid("Pull request review thread start line must precede the end line.")
        for hunk_left, hunk_right in hunk_lines(entry["patch"]):
            if comment["line"] in (hunk_right if side == "RIGHT" else hunk_left):
                if start in (hunk_right if start_side == "RIGHT" else hunk_left):
                    return
                break
        raise invalid("Pull request review thread start line must be part of the same hunk as the line.")

    # --------------------------------------------------------------------------------- check runs

    async def _list_check_runs(self, request: web.Request) -> web.Response:
        repo = self._repo_for(request)
        sha = repo.resolve(request.match_info["ref"])
        runs = sorted(self.check_runs_for(repo.full_name, sha), key=lambda run: -run["id"])
        q = request.query
        if "check_name" in q:
            runs = [run for run in runs if run["name"] == q["check_name"]]
        if "app_id" in q:
            runs = [run for run in runs if str(run["app"]["id"]) == q["app_id"]]
        if "status" in q:
            runs = [run for run in runs if run["status"] == q["status"]]
        if q.get("filter", "latest") == "latest":
            seen: set[str] = set()
            runs = [run for run in runs if not (run["name"] in seen or seen.add(run["name"]))]
        total = len(runs)
        return self._page(request, runs, lambda chunk: {"total_count": total, "check_runs": chunk})

    async def _create_check_run(self, request: web.Request) -> web.Response:
        repo = self._repo_for(request)
        data = await self._body(request)
        for key in ("name", "head_sha"):
            if not data.get(key):
                raise ApiError(422, f'Invalid request.\n\n"{key}" wasn\'t supplied.')
        if data["head_sha"] not in repo.parents:
            raise ApiError(422, "Unprocessable Entity", errors=[f"No commit found for SHA: {data['head_sha']}"])
        run_id = self.next_id()
        run: Json = {
            "id": run_id,
            "node_id": f"CR_{run_id}",
            "head_sha": data["head_sha"],
            "name": data["name"],
            "external_id": data.get("external_id", ""),
            "details_url": data.get("details_url"),
            "html_url": f"https://github.com/{repo.full_name}/runs/{run_id}",
            "status": "queued",
            "conclusion": None,
            "started_at": data.get("started_at", iso(self.clock())),
            "completed_at": None,
            "url": f"https://api.github.com/repos/{repo.full_name}/check-runs/{run_id}",
            "output": {
                "title": None,
                "summary": None,
                "text": None,
                "annotations_count": 0,
                "annotations_url": f"https://api.github.com/repos/{repo.full_name}/check-runs/{run_id}/annotations",
            },
            "check_suite": {"id": self.next_id()},
            "app": self._app_json(),
            "pull_requests": [],
        }
        self._apply_check_run_update(run, {k: v for k, v in data.items() if k not in ("name", "head_sha")})
        self.check_runs[run_id] = run
        self._check_run_repo[run_id] = repo.full_name
        self.counters["check_runs_created"] += 1
        return web.json_response(run, status=201)

    def _check_run_in(self, request: web.Request) -> Json:
        repo = self._repo_for(request)
        run_id = int(request.match_info["run_id"])
        if self._check_run_repo.get(run_id) != repo.full_name:
            raise ApiError(404, "Not Found")
        return self.check_runs[run_id]

    async def _get_check_run(self, request: web.Request) -> web.Response:
        return web.json_response(self._check_run_in(request))

    async def _update_check_run(self, request: web.Request) -> web.Response:
        run = self._check_run_in(request)
        data = await self._body(request)
        updated = json.loads(json.dumps(run))
        self._apply_check_run_update(updated, data)  # validate on a copy: a 422 changes nothing
        back = {"completed": ("queued", "in_progress"), "in_progress": ("queued",)}.get(run["status"], ())
        if updated["status"] in back:
            # GitHub does not reliably take a run back (a completed run reopened, one in progress queued again):
            # the fake never does, and keeps the attempt for tests to see.
            self.check_run_regressions.append((run["id"], run["status"], updated["status"]))
            updated.update(status=run["status"], conclusion=run["conclusion"], completed_at=run["completed_at"])
        run.update(updated)
        return web.json_response(run)

    def _apply_check_run_update(self, run: Json, data: Json) -> None:
        status = data.get("status", run["status"])
        conclusion = data.get("conclusion", run["conclusion"] if "status" not in data else None)
        if data.get("conclusion"):
            status = "completed"
        if status not in CHECK_STATUSES:
            raise ApiError(422, "Unprocessable Entity", errors=[f"Invalid status: {status}"])
        if status == "completed" and not conclusion:
            raise ApiError(422, "Unprocessable Entity", errors=["Conclusion is required when status is completed"])
        for key in ("name", "details_url", "external_id", "started_at"):
            if key in data:
                run[key] = data[key]
        run["status"], run["conclusion"] = status, conclusion if status == "completed" else None
        if status == "completed":
            run["completed_at"] = data.get("completed_at") or run["completed_at"] or iso(self.clock())
        if "output" in data:
            output = data["output"] or {}
            if not output.get("title") or not output.get("summary"):
                raise ApiError(422, "Unprocessable Entity", errors=["output requires title and summary"])
            run["output"].update({k: output.get(k) for k in ("title", "summary", "text")})

    # ------------------------------------------------------------------------ comments and reactions

    def _comment_json(self, repo: str, number: int, login: str, body: str) -> Json:
        comment_id = self.next_id()
        now = iso(self.clock())
        return {
            "id": comment_id,
            "node_id": f"IC_{comment_id}",
            "url": f"https://api.github.com/repos/{repo}/issues/comments/{comment_id}",
            "body": body,
            "user": _user(login),
            "created_at": now,
            "updated_at": now,
            "html_url": f"https://github.com/{repo}/pull/{number}#issuecomment-{comment_id}",
            "issue_url": f"https://api.github.com/repos/{repo}/issues/{number}",
            "author_association": "CONTRIBUTOR",
        }

    async def _list_issue_comments(self, request: web.Request) -> web.Response:
        pull = self._pull_for(request)
        return self._page(request, self.issue_comments.get((pull.repo, pull.number), []))

    async def _create_issue_comment(self, request: web.Request) -> web.Response:
        pull = self._pull_for(request)
        data = await self._body(request)
        if not data.get("body"):
            raise ApiError(
                422,
                "Validation Failed",
                errors=[{"resource": "IssueComment", "code": "missing_field", "field": "body"}],
            )
        comment = self._comment_json(pull.repo, pull.number, f"{self.app_slug}[bot]", data["body"])
        self.issue_comments.setdefault((pull.repo, pull.number), []).append(comment)
        return web.json_response(comment, status=201)

    async def _create_reaction(self, request: web.Request) -> web.Response:
        repo = self._repo_for(request)
        comment_id = int(request.match_info["comment_id"])
        exists = any(
            c["id"] == comment_id
            for (name, _), comments in self.issue_comments.items()
            if name == repo.full_name
            for c in comments
        )
        if not exists:
            raise ApiError(404, "Not Found")
        content = (await self._body(request)).get("content")
        if content not in REACTIONS:
            raise ApiError(
                422, "Validation Failed", errors=[{"resource": "Reaction", "code": "invalid", "field": "content"}]
            )
        bot = f"{self.app_slug}[bot]"
        reactions = self.reactions.setdefault(comment_id, [])
        for reaction in reactions:
            if reaction["content"] == content and reaction["user"]["login"] == bot:
                return web.json_response(reaction, status=200)  # GitHub answers 200 for an existing one
        reaction = {
            "id": self.next_id(),
            "node_id": "REA_x",
            "user": _user(bot),
            "content": content,
            "created_at": iso(self.clock()),
        }
        reactions.append(reaction)
        return web.json_response(reaction, status=201)

    # ------------------------------------------------------------------------- contents, compare, perms

    async def _get_contents(self, request: web.Request) -> web.Response:
        repo = self._repo_for(request)
        path = request.match_info.get("path", "").strip("/")
        ref = request.query.get("ref") or repo.default_branch
        tree = repo.contents.get(ref) or repo.contents.get(repo.resolve(ref)) or {}
        links = repo.links.get(ref) or repo.links.get(repo.resolve(ref)) or {}
        if path in links:
            return web.json_response({**links[path], "name": path.rsplit("/", 1)[-1], "path": path, "size": 0})
        if path in tree:
            text = tree[path]
            encoded = base64.encodebytes(text.encode()).decode()  # GitHub wraps base64 lines, like this
            return web.json_response(
                {
                    "type": "file",
                    "encoding": "base64",
                    "size": len(text.encode()),
                    "name": path.rsplit("/", 1)[-1],
                    "path": path,
                    "content": encoded,
                    "sha": blob_sha(text),
                    "html_url": f"https://github.com/{repo.full_name}/blob/{ref}/{path}",
                }
            )
        prefix = f"{path}/" if path else ""
        entries: dict[str, str] = {}
        for p in [*tree, *links]:
            if p.startswith(prefix):
                name, _, rest = p[len(prefix) :].partition("/")
                entries[name] = "dir" if rest else links[p]["type"] if p in links else "file"
        if entries:
            return web.json_response(
                [{"type": kind, "name": name, "path": f"{prefix}{name}"} for name, kind in sorted(entries.items())]
            )
        raise ApiError(404, "Not Found")

    async def _compare(self, request: web.Request) -> web.Response:
        repo = self._repo_for(request)
        base_ref, sep, head_ref = request.match_info["basehead"].partition("...")
        if not sep:
            raise ApiError(404, "Not Found")
        base, head = repo.resolve(base_ref), repo.resolve(head_ref)
        if base not in repo.parents or head not in repo.parents:
            raise ApiError(404, "Not Found")
        head_chain, base_chain = repo.ancestors(head), repo.ancestors(base)
        merge_base = next((sha for sha in head_chain if sha in base_chain), None)
        ahead = head_chain.index(merge_base) if merge_base else len(head_chain)
        behind = base_chain.index(merge_base) if merge_base else len(base_chain)
        status = "identical" if base == head else ("ahead" if behind == 0 else "behind" if ahead == 0 else "diverged")
        files = repo.compare_files.get((base, head))
        if files is None:
            files = next(
                (
                    p.files_by_sha[head]
                    for p in self.pulls.values()
                    if p.repo == repo.full_name and head in p.files_by_sha
                ),
                [],
            )
        return web.json_response(
            {
                "url": f"https://api.github.com/repos/{repo.full_name}/compare/{base}...{head}",
                "html_url": f"https://github.com/{repo.full_name}/compare/{base}...{head}",
                "permalink_url": f"https://github.com/{repo.full_name}/compare/{base}...{head}",
                "diff_url": f"https://github.com/{repo.full_name}/compare/{base}...{head}.diff",
                "patch_url": f"https://github.com/{repo.full_name}/compare/{base}...{head}.patch",
                "status": status,
                "ahead_by": ahead,
                "behind_by": behind,
                "total_commits": ahead,
                "base_commit": _commit_json(repo.full_name, base, repo.parents.get(base)),
                "merge_base_commit": _commit_json(
                    repo.full_name, merge_base or base, repo.parents.get(merge_base or base)
                ),
                "commits": [
                    _commit_json(repo.full_name, sha, repo.parents.get(sha)) for sha in reversed(head_chain[:ahead])
                ],
                "files": [_file_urls(repo.full_name, head, f) for f in files[:COMPARE_FILES_CAP]],
            }
        )

    async def _permission(self, request: web.Request) -> web.Response:
        repo = self._repo_for(request)
        user = request.match_info["user"]
        owner = repo.full_name.split("/")[0]
        permission = repo.permissions.get(user, "admin" if user == owner else "none")
        role = {"admin": "admin", "write": "write", "read": "read", "none": "none"}.get(permission, permission)
        legacy = {"maintain": "write", "triage": "read"}.get(permission, permission)
        return web.json_response({"permission": legacy, "role_name": role, "user": {**_user(user), "role_name": role}})

    # --------------------------------------------------------------------- admin (standalone server)

    async def _admin_state(self, request: web.Request) -> web.Response:
        return web.json_response(self.snapshot())

    async def _admin_inject(self, request: web.Request) -> web.Response:
        data = await request.json()
        fault = self.inject(data["method"], data["path"], data["fault"], data.get("times", 1), **data.get("params", {}))
        return web.json_response({"kind": fault.kind}, status=201)

    async def _admin_load(self, request: web.Request) -> web.Response:
        self.load_state(await request.json())
        return web.json_response({})


# ----------------------------------------------------------------------------------------- running it


@contextlib.asynccontextmanager
async def running(fake: FakeGitHub, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve ``fake`` on loopback for the duration of the block; yields its base URL (no trailing slash)."""
    runner = web.AppRunner(fake.make_app(), handler_cancellation=True, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound_port = runner.addresses[0][1]
    fake.base_url = f"http://{host}:{bound_port}"
    try:
        yield fake.base_url
    finally:
        fake.release_hangs()
        await runner.cleanup()
        fake.base_url = None


start_fake_github = running


class FakeGitHubThread:
    """Serves a fake from a background thread with its own loop, for tests that run the app as a subprocess.

    Arrange or inspect state with ``call(fn, ...)``, which runs ``fn`` on the server's loop.
    """

    def __init__(self, fake: FakeGitHub, host: str = "127.0.0.1", port: int = 0) -> None:
        self.fake = fake
        self._host, self._port = host, port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-github", daemon=True)
        self.base_url = ""

    def start(self) -> str:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake GitHub did not start")
        return self.base_url

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        assert self._loop is not None

        async def invoke() -> T:
            return fn(*args, **kwargs)

        return asyncio.run_coroutine_threadsafe(invoke(), self._loop).result(10)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def __enter__(self) -> FakeGitHubThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with running(self.fake, self._host, self._port) as url:
            self.base_url = url
            self._ready.set()
            await self._stop.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a fake GitHub REST API on loopback.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state-file", help="JSON state to load at start (see FakeGitHub.load_state)")
    args = parser.parse_args(argv)
    fake = FakeGitHub()
    if args.state_file:
        with open(args.state_file, encoding="utf-8") as fh:
            fake.load_state(json.load(fh))

    async def serve() -> None:
        async with running(fake, args.host, args.port) as url:
            print(f"fake GitHub listening on {url}", flush=True)
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()


def _json_or_none(body: Any) -> Any:
    if not isinstance(body, bytes | bytearray) or not body:
        return None
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
