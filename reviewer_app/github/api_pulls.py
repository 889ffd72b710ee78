"""A repository's pull requests, their files, and comparisons of two commits."""

from __future__ import annotations

from reviewer_app.github.api_transport import PER_PAGE, GitHubTransport, Json, split_repo

MAX_PULL_FILES = 3000  # GitHub lists no more than this many files of a pull request
MAX_COMPARE_FILES = 300  # a comparison's `files` stop at this many, without saying how many there are


class PullCalls(GitHubTransport):
    """A pull request, its files, a repository's open pull requests, a comparison."""

    async def get_pull(self, installation_id: int, repo: str, number: int) -> Json:
        return await self._get(
            "/repos/{owner}/{name}/pulls/{number}",
            {**split_repo(repo), "number": number},
            installation_id=installation_id,
            what=f"pull request {repo}#{number}",
            conditional=True,  # read by the gate at every step of a review: unchanged, it costs no rate limit
        )

    async def list_pull_files(self, installation_id: int, repo: str, number: int) -> list[Json]:
        """The PR's files (GitHub-shaped entries; ``patch`` may be absent), at most 3000 as GitHub caps it."""
        return await self._get_all(
            "/repos/{owner}/{name}/pulls/{number}/files{?per_page}",
            {**split_repo(repo), "number": number, "per_page": PER_PAGE},
            installation_id=installation_id,
            what=f"files of pull request {repo}#{number}",
            limit=MAX_PULL_FILES,
            conditional=True,  # read again by every attempt and every answer in a thread
        )

    async def list_open_pulls(self, installation_id: int, repo: str) -> list[Json]:
        return await self._get_all(
            "/repos/{owner}/{name}/pulls{?state,per_page}",
            {**split_repo(repo), "state": "open", "per_page": PER_PAGE},
            installation_id=installation_id,
            what=f"open pull requests of {repo}",
        )

    async def compare(self, installation_id: int, repo: str, base: str, head: str) -> Json:
        return await self._get(
            "/repos/{owner}/{name}/compare/{base}...{head}",
            {**split_repo(repo), "base": base, "head": head},
            installation_id=installation_id,
            what=f"comparison {base[:12]}...{head[:12]} in {repo}",
        )
