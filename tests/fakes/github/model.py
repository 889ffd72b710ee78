"""The records of the fake's model of GitHub: installations, repositories, pull requests, tokens, manifest codes and
the requests the fake has seen."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.fakes.github.shapes import Json


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
    installation_id: int | None  # None for a person's token
    expires_at: int
    repositories: frozenset[str] | None = None  # names (without owner) the token may touch; None: all
    permissions: tuple[tuple[str, str], ...] = ()  # (permission, level), as granted
    user: str | None = None  # a person's token (a personal access token, the GitHub CLI's): whom it acts as


@dataclass(frozen=True)
class ManifestCode:
    """A manifest the user submitted on GitHub's new-App page, waiting for its one conversion."""

    manifest: Json
    created_at: float
    owner: str

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
    route: str = ""  # the route's pattern, e.g. /repos/{owner}/{name}/check-runs (tests/github/test_fake_schema.py)
    request_json: Any = None  # a write's JSON body as the app sent it
    response_json: Any = None  # the JSON the fake answered
    arrived: float = 0.0  # time.time() when the request came in (pacing and rate-limit tests)
