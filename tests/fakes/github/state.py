"""The fake's model of GitHub for one app: installations, repositories and their commits, pull requests, reviews,
comments, check runs, deliveries, tokens, injected faults and the requests seen, with the helpers tests use to
arrange it and to look at what the app did."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import re
import secrets
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import aiohttp

from tests.fakes.github.api import RateLimits
from tests.fakes.github.diffs import normalize_file
from tests.fakes.github.faults import Fault, Hangs, new_fault
from tests.fakes.github.graphql import ThreadsState
from tests.fakes.github.model import Installation, IssuedToken, ManifestCode, Pull, RecordedRequest, Repo
from tests.fakes.github.shapes import Json, iso, random_sha, user_json
from tests.fakes.keys import test_key_pair

# Every id the fake hands out (installations, repositories, reviews, comments, check runs and suites, deliveries, the
# App's own) is past 2**32, as github.com's review, comment and check-run ids are past 2**31 - 1 today: an id read
# through a 32-bit field, or truncated anywhere the app keeps or compares one, breaks a test.
FIRST_ID = 2**32 + 1_000


class GitHubState:
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
        self.token_requests: list[Json] = []  # the body of each token request (repositories, permissions)
        self.reviews: dict[tuple[str, int], list[Json]] = {}
        self.review_comments: dict[tuple[str, int], list[Json]] = {}
        self.issue_comments: dict[tuple[str, int], list[Json]] = {}
        self.check_runs: dict[int, Json] = {}
        self.check_run_regressions: list[tuple[int, str, str]] = []  # (run, status shown, status asked for)
        self.check_run_repo: dict[int, str] = {}
        self.reactions: dict[int, list[Json]] = {}
        self.deliveries: list[Json] = []
        self.delivery_payloads: dict[str, tuple[str, Json]] = {}  # guid -> (event, payload)
        self.redelivery_requests: list[int] = []
        self.manifest_codes: dict[str, ManifestCode] = {}  # code -> manifest, until converted or expired
        self.archive_links: dict[str, tuple[str, str, float]] = {}  # download token -> (repo, ref, expires at)
        self.crafted_archives: dict[str, bytes] = {}  # repo -> the archive served instead of its files (tests)
        self.review_threads = ThreadsState()  # resolved threads, schema rejections (graphql.py)

        self.faults: list[Fault] = []
        self.requests: list[RecordedRequest] = []
        self.counters: Counter[str] = Counter()
        self.rate_limits = RateLimits()
        self.writes_in_flight: Counter[int | None] = Counter()
        self.max_concurrent_writes: Counter[int | None] = Counter()  # per installation (None: app JWT)
        self._ids = itertools.count(FIRST_ID)
        self.hangs = Hangs()
        self.background: set[asyncio.Task[Any]] = set()  # redeliveries under way

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
        """A symbolic link to ``target`` (relative to the link's folder, as git stores it). As on GitHub, the contents
        API answers a link to a file of the repository with that file's content, and any other link (outside the
        tree, to a folder, to nothing) with the link itself (routes/contents.py)."""
        r = self.repos[repo]
        r.links.setdefault(ref or r.default_branch, {})[path] = {"type": "symlink", "target": target}

    def set_submodule(self, repo: str, path: str, url: str, *, ref: str | None = None) -> None:
        r = self.repos[repo]
        r.links.setdefault(ref or r.default_branch, {})[path] = {"type": "submodule", "submodule_git_url": url}

    def set_permission(self, repo: str, user: str, permission: str) -> None:
        self.repos[repo].permissions[user] = permission

    def set_compare_files(self, repo: str, base: str, head: str, files: list[Json]) -> None:
        self.repos[repo].compare_files[(base, head)] = [normalize_file(f) for f in files]

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
        pull.files_by_sha[head_sha] = [normalize_file(f) for f in files]
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
        new_files = [normalize_file(f) for f in files] if files is not None else list(pull.files)
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
        review = self.review_json(repo, number, user_login, body, state, commit_id or pull.head_sha)
        self.reviews.setdefault((repo, number), []).append(review)
        return review

    def add_issue_comment(self, repo: str, number: int, user_login: str, body: str) -> Json:
        comment = self.comment_json(repo, number, user_login, body)
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
            self.delivery_payloads[delivery["guid"]] = (event, payload)
        return delivery

    # ------------------------------------------------------------------------------ tokens and faults

    def expire_tokens(self, installation_id: int | None = None) -> None:
        """Make issued tokens expire now (they stay known, so their use counts as an expired-token request)."""
        for tok in self.tokens.values():
            if installation_id in (None, tok.installation_id):
                tok.expires_at = min(tok.expires_at, int(self.clock()))

    def add_user_token(
        self,
        login: str,
        *,
        repositories: Iterable[str] | None = None,
        permissions: dict[str, str] | None = None,
        expires_at: float | None = None,
    ) -> str:
        """A person's token (a fine-grained personal access token, or the GitHub CLI's): it acts as ``login`` and
        sees what ``login`` may read (of those, only ``repositories``, names without the owner, when given), with
        ``permissions`` (by default what a review by a person needs; no ``checks``: only an App writes check runs).
        It lives a year unless ``expires_at`` says when it stops working."""
        value = "github_pat_" + secrets.token_hex(20)
        granted = permissions or {"pull_requests": "write", "contents": "read", "issues": "write", "metadata": "read"}
        self.tokens[value] = IssuedToken(
            installation_id=None,
            expires_at=int(self.clock() + 365 * 86400 if expires_at is None else expires_at),
            repositories=None if repositories is None else frozenset(repositories),
            permissions=tuple(sorted(granted.items())),
            user=login,
        )
        self.issued_tokens.append(value)
        return value

    def revoke_tokens(self, installation_id: int | None = None) -> None:
        for value, tok in list(self.tokens.items()):
            if installation_id in (None, tok.installation_id):
                del self.tokens[value]

    def inject(self, method: str, path_regex: str, fault: str, times: int | None = 1, **params: Any) -> Fault:
        """Fail the next ``times`` requests (None: all) whose method and path (``re.search``) match.

        ``after=N`` lets the first N matching requests through. Faults and their params: error(status=500), hang(delay=None), secondary_rate_limit(retry_after=60,
        status=403), primary_rate_limit(reset=now+60, status=403), too_many_requests(retry_after=60),
        unauthorized(), lost_response(mode="drop"|"502"|"slow", delay=None), advance_head(new_sha=None, repo=None, number=None).
        """
        injected = new_fault(method, path_regex, fault, times, params)
        self.faults.append(injected)
        return injected

    def clear_faults(self) -> None:
        self.faults.clear()

    def release_hangs(self) -> None:
        """Let every held request (``hang``, slow ``lost_response``) go on now."""
        self.hangs.release()

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
            if self.check_run_repo[run_id] == repo and run["head_sha"] == sha
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

    # ------------------------------------------------------------------------ the records it makes

    def app_json(self) -> Json:
        return dict(
            {
                "id": self.app_id,
                "slug": self.app_slug,
                "node_id": f"A_{self.app_id}",
                "name": self.app_name,
                "owner": {**user_json(self.app_owner), "type": "Organization"},
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

    def review_json(self, repo: str, number: int, login: str, body: str, state: str, commit_id: str) -> Json:
        review_id = self.next_id()
        return {
            "id": review_id,
            "node_id": f"PRR_{review_id}",
            "user": user_json(login),
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

    def comment_json(self, repo: str, number: int, login: str, body: str) -> Json:
        comment_id = self.next_id()
        now = iso(self.clock())
        return {
            "id": comment_id,
            "node_id": f"IC_{comment_id}",
            "url": f"https://api.github.com/repos/{repo}/issues/comments/{comment_id}",
            "body": body,
            "user": user_json(login),
            "created_at": now,
            "updated_at": now,
            "html_url": f"https://github.com/{repo}/pull/{number}#issuecomment-{comment_id}",
            "issue_url": f"https://api.github.com/repos/{repo}/issues/{number}",
            "author_association": "CONTRIBUTOR",
        }
