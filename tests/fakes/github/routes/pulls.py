"""Pull requests: listing them, one pull request, and its files."""

from __future__ import annotations

from aiohttp import web

from tests.fakes.github.api import REPO_PATH, page
from tests.fakes.github.auth import pull_for, repo_for
from tests.fakes.github.diffs import file_urls
from tests.fakes.github.model import Pull, Repo
from tests.fakes.github.shapes import Json, iso, user_json
from tests.fakes.github.state import GitHubState

PULL_FILES_CAP = 3000  # GitHub lists at most 3000 files of a pull request
REPO_URLS = (
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


def repo_json(repo: Repo) -> Json:
    """A repository as GitHub's `repository` schema has it (what a pull request's head and base carry)."""
    api = f"https://api.github.com/repos/{repo.full_name}"
    owner, name = repo.full_name.split("/")
    return {
        "id": repo.id,
        "node_id": f"R_{repo.id}",
        "name": name,
        "full_name": repo.full_name,
        "owner": user_json(owner),
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
        **{f"{u}_url": f"{api}/{u}" for u in REPO_URLS},
    }


async def get_repo(gh: GitHubState, request: web.Request) -> web.Response:
    """GitHub's "Get a repository": the full repository (what `reviewer-app learnings` reads the id from)."""
    repo = repo_for(gh, request)
    return web.json_response(
        {
            **repo_json(repo),
            "has_issues": True,
            "has_projects": False,
            "has_wiki": False,
            "has_discussions": False,
            "subscribers_count": 0,
            "network_count": 0,
        }
    )


def pull_json(gh: GitHubState, request: web.Request, pull: Pull) -> Json:
    repo = gh.repos[pull.repo]
    owner = pull.repo.split("/")[0]
    base_repo = repo_json(repo)
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
        "user": user_json(pull.user),
        "draft": pull.draft,
        "merged": pull.merged,
        "created_at": iso(pull.created_at),
        "updated_at": iso(pull.updated_at),
        "closed_at": iso(pull.updated_at) if pull.state == "closed" else None,
        "head": {
            "ref": pull.head_ref,
            "sha": pull.head_sha,
            "label": f"{owner}:{pull.head_ref}",
            "repo": base_repo,
            "user": user_json(owner),
        },
        "base": {
            "ref": pull.base_ref,
            "sha": pull.base_sha,
            "label": f"{owner}:{pull.base_ref}",
            "repo": base_repo,
            "user": user_json(owner),
        },
        "author_association": "CONTRIBUTOR",
        "changed_files": len(files),
        "additions": sum(f["additions"] for f in files),
        "deletions": sum(f["deletions"] for f in files),
        "commits": max(len(repo.ancestors(pull.head_sha)) - len(repo.ancestors(pull.base_sha)), 1),
    }


async def list_pulls(gh: GitHubState, request: web.Request) -> web.Response:
    repo = repo_for(gh, request)
    state = request.query.get("state", "open")
    pulls = [
        p
        for (name, _), p in sorted(gh.pulls.items(), key=lambda kv: -kv[0][1])
        if name == repo.full_name and state in ("all", p.state)
    ]
    return page(request, [pull_json(gh, request, p) for p in pulls])


async def get_pull(gh: GitHubState, request: web.Request) -> web.Response:
    return web.json_response(pull_json(gh, request, pull_for(gh, request)))


async def list_files(gh: GitHubState, request: web.Request) -> web.Response:
    pull = pull_for(gh, request)
    tree = gh.repos[pull.repo].contents.get(pull.head_sha)
    return page(request, [file_urls(pull.repo, pull.head_sha, f, tree) for f in pull.files[:PULL_FILES_CAP]])


ROUTES = [
    ("GET", REPO_PATH, get_repo),
    ("GET", REPO_PATH + "/pulls", list_pulls),
    ("GET", REPO_PATH + r"/pulls/{number:\d+}", get_pull),
    ("GET", REPO_PATH + r"/pulls/{number:\d+}/files", list_files),
]
