"""The app's check runs on a commit: listing, creating and updating them (the sync duty that uses them:
checks.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reviewer_app.github.api_transport import PER_PAGE, GitHubTransport, Json, split_repo


class CheckRunCalls(GitHubTransport):
    """This app's check runs on a commit."""

    async def list_check_runs_for_ref(
        self,
        installation_id: int,
        repo: str,
        sha: str,
        check_name: str | None = None,
        *,
        latest_only: bool = False,
    ) -> list[Json]:
        """This app's check runs on ``sha``, newest first.

        All of them by default: GitHub's own default (``filter=latest``) hides older runs of the same name, and
        a caller reconciling by ``external_id`` must see every run to avoid creating a duplicate.
        """
        return await self._get_all(
            "/repos/{owner}/{name}/commits/{sha}/check-runs{?check_name,app_id,filter,per_page}",
            {
                **split_repo(repo),
                "sha": sha,
                "check_name": check_name,
                "app_id": self._credentials.app_id,
                "filter": "latest" if latest_only else "all",
                "per_page": PER_PAGE,
            },
            installation_id=installation_id,
            what=f"check runs of {repo}@{sha[:12]}",
            iterable_key="check_runs",
        )

    async def create_check_run(
        self,
        installation_id: int,
        repo: str,
        *,
        name: str,
        head_sha: str,
        status: str = "in_progress",
        external_id: str | None = None,
        details_url: str | None = None,
        output: Mapping[str, Any] | None = None,
        conclusion: str | None = None,
    ) -> Json:
        data: Json = {"name": name, "head_sha": head_sha, "status": status}
        optional = {
            "external_id": external_id,
            "details_url": details_url,
            "conclusion": conclusion,
            "output": dict(output) if output is not None else None,
        }
        data.update({key: value for key, value in optional.items() if value is not None})
        return await self._write(
            "POST",
            "/repos/{owner}/{name}/check-runs",
            split_repo(repo),
            installation_id=installation_id,
            what=f"check run {name!r} on {repo}@{head_sha[:12]}",
            data=data,
        )

    async def update_check_run(
        self,
        installation_id: int,
        repo: str,
        check_run_id: int,
        *,
        status: str | None = None,
        conclusion: str | None = None,
        output: Mapping[str, Any] | None = None,
        completed_at: str | None = None,
        external_id: str | None = None,
        details_url: str | None = None,
    ) -> Json:
        fields = {
            "status": status,
            "conclusion": conclusion,
            "completed_at": completed_at,
            "external_id": external_id,
            "details_url": details_url,
            "output": dict(output) if output is not None else None,
        }
        return await self._write(
            "PATCH",
            "/repos/{owner}/{name}/check-runs/{check_run_id}",
            {**split_repo(repo), "check_run_id": check_run_id},
            installation_id=installation_id,
            what=f"check run {check_run_id} in {repo}",
            data={key: value for key, value in fields.items() if value is not None},
        )
