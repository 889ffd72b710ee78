"""The whole app in-process against the fake GitHub and the fake Anthropic, both on loopback HTTP."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from reviewer_app.core.states import JobState
from reviewer_app.service import Service, build_service
from reviewer_app.settings.config import load_config
from reviewer_app.store.base import Job
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.github import FakeGitHub, Pull, added_file, running
from tests.fakes.platforms import fake_for, in_client_environment
from tests.helpers import SECRET, eventually, webhook_headers
from tests.payloads import (
    check_run_event,
    check_suite_event,
    installation_event,
    installation_repositories_event,
    issue_comment_event,
    pull_request_event,
    repository_entry,
)
from tests.pg import fresh_schema

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

    def _repo_fields(self, pull: Pull) -> dict[str, Any]:
        repo = self.github.repos[pull.repo]
        return {"repo": repo.full_name, "repo_id": repo.id, "installation_id": self.installation_id}

    def pr_payload(self, pull: Pull, action: str = "opened", **extra: Any) -> dict[str, Any]:
        """The ``pull_request`` event GitHub sends for ``pull`` as the fake holds it (``extra``: e.g. ``before``)."""
        repo = self.github.repos[pull.repo]
        return pull_request_event(
            action,
            number=pull.number,
            head=pull.head_sha,
            base_sha=pull.base_sha,
            head_ref=pull.head_ref,
            base_ref=pull.base_ref,
            default_branch=repo.default_branch,
            private=repo.private,
            draft=pull.draft,
            state=pull.state,
            title=pull.title,
            body=pull.body,
            author=pull.user,
            **self._repo_fields(pull),
            **extra,
        )

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
        """An ``issue_comment`` on ``pull``, posted on the fake first so it has the id GitHub gave it."""
        comment = self.github.add_issue_comment(pull.repo, pull.number, login, body)
        return issue_comment_event(
            body,
            comment_id=comment_id or comment["id"],
            login=login,
            association=association,
            user_type=user_type,
            action=action,
            number=pull.number,
            title=pull.title,
            author=pull.user,
            **self._repo_fields(pull),
        )

    def rerun_payload(
        self, pull: Pull, check_run: dict[str, Any], *, event: str = "check_run", fork: bool = False
    ) -> dict[str, Any]:
        """A Re-run click on ``check_run`` (``event`` check_run), or Re-run all checks on its suite (check_suite).
        ``fork``: the pull request comes from a fork, which GitHub does not list on the run or the suite."""
        common = {
            "head_sha": check_run["head_sha"],
            "number": None if fork else pull.number,
            "app_id": self.github.app_id,
            "head_ref": pull.head_ref,
            "base_ref": pull.base_ref,
            "base_sha": pull.base_sha,
            **self._repo_fields(pull),
        }
        if event == "check_suite":
            return check_suite_event(suite_id=check_run.get("check_suite", {}).get("id", 8001), **common)
        return check_run_event(run_id=check_run["id"], external_id=check_run.get("external_id") or "", **common)

    def installation_payload(self, action: str) -> dict[str, Any]:
        return installation_event(action, installation_id=self.installation_id, account=REPO.split("/")[0])

    def repositories_payload(
        self, action: str, added: Sequence[str] = (), removed: Sequence[str] = ()
    ) -> dict[str, Any]:
        """An ``installation_repositories`` event: the repositories (full names on the fake) added or removed."""

        def entries(names: Sequence[str]) -> list[dict[str, Any]]:
            return [repository_entry(name, self.github.repos[name].id) for name in names]

        return installation_repositories_event(
            action, added=entries(added), removed=entries(removed), installation_id=self.installation_id
        )

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
async def harness(tmp_path: Path, provider: str = "anthropic", **env: str) -> AsyncIterator[Harness]:
    """The app reaching Claude through ``provider`` (REVIEWER_MODEL_PROVIDER): the fake of its wire format, with the
    standard environment its SDK client reads pointed at that fake."""
    github = FakeGitHub()
    anthropic = fake_for(provider)
    inst = github.add_installation()
    github.add_repo(REPO, inst.id)
    github.set_permission(REPO, "maintainer", "write")  # the usual commenter: a member with write access
    async with running(github) as gh_url, anthropic.serve():
        with in_client_environment(anthropic, tmp_path) as client_env:
            cfg = load_config(
                {
                    "DATABASE_URL": f"sqlite:///{tmp_path}/reviewer.db",
                    "GITHUB_WEBHOOK_SECRET": SECRET,
                    "GITHUB_APP_ID": str(github.app_id),
                    "GITHUB_PRIVATE_KEY": github.private_key,
                    "GITHUB_API_URL": gh_url,
                    "REVIEWER_MODEL_PROVIDER": provider,
                    **client_env,
                    "REVIEWER_LEASE_SECONDS": "5",
                    "REVIEWER_RENEW_SECONDS": "0.5",
                    "REVIEWER_RETRY_BASE_SECONDS": "0.05",
                    "REVIEWER_RETRY_MAX_SECONDS": "0.2",
                    "REVIEWER_SCAN_SECONDS": "0.05",
                    "REVIEWER_CHECK_SYNC_SECONDS": "0.05",
                    "REVIEWER_GITHUB_RETRY_SECONDS": "0.01",
                    # Writes one at a time but not a second apart (tests/github/test_write_pacing.py paces them).
                    "REVIEWER_GITHUB_WRITE_INTERVAL_SECONDS": "0",
                    "REVIEWER_SHUTDOWN_GRACE_SECONDS": "1",
                    "REVIEWER_MODEL_TIMEOUT_SECONDS": "5",
                    "REVIEWER_DEBOUNCE_SECONDS": "0",
                    "REVIEWER_RECOVERY_SECONDS": "0",  # the missed-webhook duties run only where a test turns them on
                    "REVIEWER_SWEEP_SECONDS": "0",
                    "REVIEWER_SIGNAL_PASS_SECONDS": "0",  # the signal pass too (tests/review/test_signals.py)
                    # Every review interactive unless a test turns Message Batches on (tests/review/test_batches*.py).
                    "REVIEWER_BATCH": "0",
                    # Findings published as the model wrote them unless a test turns the verification pass on
                    # (tests/review/test_verification.py); the evidence check runs always.
                    "REVIEWER_VERIFY": "0",
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


@contextlib.asynccontextmanager
async def harness_on(backend: str, tmp_path: Path, **env: str) -> AsyncIterator[Harness]:
    """The harness on ``backend``: "sqlite", or "postgres" (a fresh schema on the test server, tests/pg.py)."""
    if backend == "sqlite":
        async with harness(tmp_path, **env) as running:
            yield running
        return
    async with fresh_schema() as (dsn, schema):
        url = f"{dsn}{'&' if '?' in dsn else '?'}search_path={schema}"
        async with harness(tmp_path, DATABASE_URL=url, **env) as running:
            yield running
