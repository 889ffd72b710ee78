"""Comparing two commits: status, ahead and behind, the commits and the files between them."""

from __future__ import annotations

from aiohttp import web

from tests.fakes.github.api import REPO_PATH, ApiError
from tests.fakes.github.auth import repo_for
from tests.fakes.github.diffs import file_urls
from tests.fakes.github.shapes import Json, iso
from tests.fakes.github.state import GitHubState

COMPARE_FILES_CAP = 300  # GitHub lists at most 300 files of a comparison, silently


def commit_json(repo: str, sha: str, parent: str | None) -> Json:
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


async def compare(gh: GitHubState, request: web.Request) -> web.Response:
    repo = repo_for(gh, request)
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
            (p.files_by_sha[head] for p in gh.pulls.values() if p.repo == repo.full_name and head in p.files_by_sha),
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
            "base_commit": commit_json(repo.full_name, base, repo.parents.get(base)),
            "merge_base_commit": commit_json(repo.full_name, merge_base or base, repo.parents.get(merge_base or base)),
            "commits": [
                commit_json(repo.full_name, sha, repo.parents.get(sha)) for sha in reversed(head_chain[:ahead])
            ],
            "files": [file_urls(repo.full_name, head, f, repo.contents.get(head)) for f in files[:COMPARE_FILES_CAP]],
        }
    )


ROUTES = [
    ("GET", REPO_PATH + "/compare/{basehead:.+}", compare),
]
