"""The whole app in-process against the fake GitHub and the fake Anthropic, both on loopback HTTP."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from reviewer_app.config import load_config
from reviewer_app.core.states import JobState
from reviewer_app.service import Service, build_service
from reviewer_app.store.base import Job
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.github import FakeGitHub, Pull, added_file, running
from tests.helpers import SECRET, eventually, webhook_headers

REPO = "octo-org/widgets"

SOURCE = added_file("src/widget.py", [line for i in range(1, 6) for line in (f"def f{i}():", f"    return {i}")])


@dataclass
class Harness:
    github: FakeGitHub
    anthropic: FakeAnthropic
    svc: Service
    client: TestClient
    installation_id: int

    @property
    def store(self) -> Any:
        return self.svc.store

    def pr_payload(self, pull: Pull, action: str = "opened") -> dict[str, Any]:
        repo = self.github.repos[pull.repo]
        return {
            "action": action,
            "number": pull.number,
            "pull_request": {
                "number": pull.number,
                "state": pull.state,
                "draft": pull.draft,
                "title": pull.title,
                "body": pull.body,
                "user": {"login": pull.user, "type": "User"},
                "head": {"sha": pull.head_sha, "ref": pull.head_ref},
                "base": {"sha": pull.base_sha, "ref": pull.base_ref},
                "updated_at": "2026-12-01T10:00:00Z",
            },
            "repository": {"id": repo.id, "full_name": repo.full_name, "default_branch": repo.default_branch},
            "installation": {"id": self.installation_id},
            "sender": {"login": pull.user, "type": "User"},
        }

    def comment_payload(
        self,
        pull: Pull,
        body: str,
        *,
        login: str = "maintainer",
        association: str = "MEMBER",
        user_type: str = "User",
        action: str = "created",
        comment_id: int | None = None,
    ) -> dict[str, Any]:
        repo = self.github.repos[pull.repo]
        comment = self.github.add_issue_comment(pull.repo, pull.number, login, body)
        return {
            "action": action,
            "issue": {"number": pull.number, "pull_request": {"url": "..."}, "state": "open"},
            "comment": {
                "id": comment_id or comment["id"],
                "body": body,
                "author_association": association,
                "user": {"login": login, "type": user_type},
            },
            "repository": {"id": repo.id, "full_name": repo.full_name},
            "installation": {"id": self.installation_id},
            "sender": {"login": login, "type": user_type},
        }

    def rerun_payload(self, pull: Pull, check_run: dict[str, Any], *, event: str = "check_run") -> dict[str, Any]:
        repo = self.github.repos[pull.repo]
        node = {
            "id": check_run["id"],
            "head_sha": check_run["head_sha"],
            "app": {"id": self.github.app_id},
            "pull_requests": [{"number": pull.number}],
        }
        return {
            "action": "rerequested",
            event: node,
            "repository": {"id": repo.id, "full_name": repo.full_name},
            "installation": {"id": self.installation_id},
        }

    def installation_payload(self, action: str) -> dict[str, Any]:
        return {"action": action, "installation": {"id": self.installation_id, "account": {"login": "octo-org"}}}

    async def deliver(self, event: str, payload: dict[str, Any], *, delivery: str | None = None) -> dict[str, Any]:
        body = json.dumps(payload).encode()
        resp = await self.client.post(
            "/api/github/webhooks", data=body, headers=webhook_headers(body, event=event, delivery=delivery)
        )
        assert resp.status in (200, 202), await resp.text()
        return await resp.json()

    async def open_pr(self, number: int = 1, files: list[dict[str, Any]] | None = None, **kw: Any) -> tuple[Pull, int]:
        pull = self.github.add_pull(REPO, number, files=files if files is not None else [SOURCE], **kw)
        answer = await self.deliver("pull_request", self.pr_payload(pull))
        return pull, answer["job_id"]

    async def job(self, job_id: int) -> Job:
        return await self.store.get_job(job_id)

    async def wait_state(self, job_id: int, *states: JobState, timeout: float = 15) -> Job:
        async def reached() -> Job | None:
            job = await self.job(job_id)
            return job if job.state in states else None

        return await eventually(reached, timeout=timeout)

    async def wait_check_synced(self, job_id: int, timeout: float = 15) -> Job:
        """The job is terminal and its check run shows it."""

        async def synced() -> Job | None:
            job = await self.job(job_id)
            return job if job.check_run_status == "completed" else None

        return await eventually(synced, timeout=timeout)

    def reviews(self, number: int = 1) -> list[dict[str, Any]]:
        return self.github.reviews_for(REPO, number)

    def check_runs(self, sha: str) -> list[dict[str, Any]]:
        return self.github.check_runs_for(REPO, sha)


@contextlib.asynccontextmanager
async def harness(tmp_path: Path, **env: str) -> AsyncIterator[Harness]:
    github = FakeGitHub()
    anthropic = FakeAnthropic()
    inst = github.add_installation()
    github.add_repo(REPO, inst.id)
    github.set_permission(REPO, "maintainer", "write")  # the usual commenter: a member with write access
    async with running(github) as gh_url, anthropic.serve() as an_url:
        cfg = load_config(
            {
                "DATABASE_URL": f"sqlite:///{tmp_path}/reviewer.db",
                "GITHUB_WEBHOOK_SECRET": SECRET,
                "GITHUB_APP_ID": str(github.app_id),
                "GITHUB_PRIVATE_KEY": github.private_key,
                "GITHUB_API_URL": gh_url,
                "ANTHROPIC_API_KEY": "sk-ant-test-key",
                "ANTHROPIC_BASE_URL": an_url,
                "REVIEWER_LEASE_SECONDS": "5",
                "REVIEWER_RENEW_SECONDS": "0.5",
                "REVIEWER_RETRY_BASE_SECONDS": "0.05",
                "REVIEWER_RETRY_MAX_SECONDS": "0.2",
                "REVIEWER_SCAN_SECONDS": "0.05",
                "REVIEWER_CHECK_SYNC_SECONDS": "0.05",
                "REVIEWER_GITHUB_RETRY_SECONDS": "0.01",
                "REVIEWER_SHUTDOWN_GRACE_SECONDS": "1",
                "REVIEWER_MODEL_TIMEOUT_SECONDS": "5",
                "REVIEWER_DEBOUNCE_SECONDS": "0",
                "REVIEWER_RECOVERY_SECONDS": "0",  # the missed-webhook duties run only where a test turns them on
                "REVIEWER_SWEEP_SECONDS": "0",
                # Every review interactive unless a test turns Message Batches on (tests/test_batches*.py).
                "REVIEWER_BATCH": "0",
                "REVIEWER_BATCH_POLL_SECONDS": "1",
                **env,
            }
        )
        svc = await build_service(cfg)
        client = TestClient(TestServer(svc.app))
        await client.start_server()
        svc.start_background()
        try:
            yield Harness(github, anthropic, svc, client, inst.id)
        finally:
            await svc.stop()
            await client.close()
