"""The admin commands as data over the job database: status, jobs list/show/retry/cancel, queue pause/resume.

`admin_text.py` renders them for a terminal, `cli/admin_commands.py` is their command line."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

from reviewer_app.core.queues import queue_rows
from reviewer_app.core.states import JobEvent, JobState, sources_of
from reviewer_app.store.base import Attempt, Job, Store, WorkerStatus

PENDING_SCAN = 1000  # pending jobs read to name expired claims and unreconciled publications
FAILED_SHOWN = 10


class AdminError(Exception):
    """Not found, or not allowed in the job's state: one line for the operator, exit code 1."""


# -- the commands, as data ------------------------------------------------------------------------------------


def github_web_url(api_url: str) -> str:
    """https://github.com for the public API; https://HOST for GitHub Enterprise Server's https://HOST/api/v3."""
    parts = urlsplit(api_url)
    if parts.hostname == "api.github.com":
        return "https://github.com"
    path = parts.path.rstrip("/")
    if path.endswith("/api/v3"):
        path = path[: -len("/api/v3")]
    return f"{parts.scheme}://{parts.netloc}{path}"


@dataclass
class Admin:
    store: Store
    clock: Callable[[], float] = time.time
    web_url: str = "https://github.com"

    def links(self, job: Job) -> dict[str, str]:
        pull = f"{self.web_url}/{job.repo_full_name}/pull/{job.pr_number}"
        out = {"pull_request": pull}
        if job.check_run_id is not None:
            out["check_run"] = f"{self.web_url}/{job.repo_full_name}/runs/{job.check_run_id}"
        if job.review_id is not None:
            out["review"] = f"{pull}#pullrequestreview-{job.review_id}"
        answer = job.details.answer_url  # an answer in a thread (review/answer.py)
        if isinstance(answer, str) and answer.startswith(f"{self.web_url}/"):
            out["answer"] = answer
        return out

    def job_summary(self, job: Job) -> dict[str, Any]:
        return {
            "id": job.id,
            "state": job.state.value,
            "repo": job.repo_full_name,
            "pr": job.pr_number,
            "head_sha": job.head_sha,
            "trigger": job.trigger,
            "priority": job.priority,
            "attempts": job.attempts,
            "max_attempts": job.max_attempts,
            "created_at": job.created_at,
            "started_at": job.started_at,
            "finished_at": job.finished_at,
            "next_attempt_at": job.next_attempt_at,
            "lease_owner": job.lease_owner,
            "lease_expires_at": job.lease_expires_at,
            "last_error": job.last_error,
            "outcome": job.outcome,
            "superseded_by": job.superseded_by,
            "check_run_id": job.check_run_id,
            "review_id": job.review_id,
            "publish_intent_at": job.publish_intent_at,
            "delivery_id": job.details.delivery_id,
            "links": self.links(job),
        }

    async def status(self) -> dict[str, Any]:
        now = self.clock()
        workers = await self.store.workers(now=now)
        stats = await self.store.stats(now=now)
        pending = await self.store.list_jobs(states=(JobState.QUEUED.value, JobState.RUNNING.value), limit=PENDING_SCAN)
        failed = await self.store.list_jobs(states=(JobState.FAILED.value,), limit=FAILED_SHOWN)
        oldest_at = stats.oldest_pending_created_at
        oldest = [j for j in pending if oldest_at is not None and j.created_at == oldest_at]
        expired = [j for j in pending if j.state == JobState.RUNNING and (j.lease_expires_at or now) < now]
        unreconciled = [j for j in pending if j.publish_intent_at is not None and j.review_id is None]
        return {
            "now": now,
            "paused": await self.store.get_setting("queue_paused") == "1",
            "jobs_by_state": {s.value: stats.by_state.get(s.value, 0) for s in JobState},
            "oldest_pending": None
            if oldest_at is None
            else {
                "age_seconds": max(0.0, now - oldest_at),
                "created_at": oldest_at,
                "job": self.job_summary(oldest[0]) if oldest else None,
            },
            "expired_claims": {"count": stats.expired_leases, "jobs": [self.job_summary(j) for j in expired]},
            "exhausted_retries": {
                "count": stats.by_state.get(JobState.FAILED.value, 0),
                "newest": [self.job_summary(j) for j in failed],
            },
            "awaiting_reconciliation": {
                "count": stats.awaiting_reconciliation,
                "jobs": [self.job_summary(j) for j in unreconciled],
            },
            "workers": [worker_summary(w) for w in workers],
            "queues": [
                asdict(row)
                for row in queue_rows(stats.pending_by_queue, [w.info.queues for w in workers if not w.gone])
            ],
        }

    async def list_jobs(
        self, *, states: Sequence[str] = (), repo: str | None = None, pr: int | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        jobs = await self.store.list_jobs(states=states, repo=repo, pr_number=pr, limit=limit)
        return [self.job_summary(j) for j in jobs]

    async def _job(self, job_id: int) -> Job:
        job = await self.store.get_job(job_id)
        if job is None:
            raise AdminError(f"no job {job_id}")
        return job

    async def show(self, job_id: int) -> dict[str, Any]:
        job = await self._job(job_id)
        attempts = await self.store.attempts_of(job_id)
        return {
            **self.job_summary(job),
            "details": job.details.to_dict(),
            "attempt_history": [_attempt(a) for a in attempts],
        }

    async def retry(self, job_id: int) -> dict[str, Any]:
        job = await self._job(job_id)
        allowed = sources_of(JobEvent.RETRY_BY_OPERATOR)
        if job.state not in allowed or not await self.store.retry_job(job_id, now=self.clock()):
            state = (await self._job(job_id)).state
            raise AdminError(f"job {job_id} is {state.value}: only {_either(allowed)} jobs can be retried")
        return self.job_summary(await self._job(job_id))

    async def cancel(self, job_id: int, *, reason: str) -> dict[str, Any]:
        job = await self._job(job_id)
        allowed = sources_of(JobEvent.CANCEL)
        if job.state not in allowed or not await self.store.cancel_job(job_id, now=self.clock(), reason=reason):
            state = (await self._job(job_id)).state
            raise AdminError(f"job {job_id} is {state.value}: only {_either(allowed)} jobs can be cancelled")
        return {**self.job_summary(await self._job(job_id)), "previous_state": job.state.value}

    async def set_paused(self, paused: bool) -> dict[str, Any]:
        await self.store.set_setting("queue_paused", "1" if paused else "0")
        return {"paused": paused}


def _attempt(a: Attempt) -> dict[str, Any]:
    return {
        "attempt": a.attempt,
        "lease_owner": a.lease_owner,
        "started_at": a.started_at,
        "finished_at": a.finished_at,
        "outcome": a.outcome,
        "error": a.error,
        "model": a.model,
        "tokens": {
            "input": a.input_tokens,
            "output": a.output_tokens,
            "cache_creation": a.cache_creation_tokens,
            "cache_read": a.cache_read_tokens,
        },
    }


def worker_summary(w: WorkerStatus) -> dict[str, Any]:
    """A registered process for `status --json` and the dashboard: alive, or gone with the jobs it held."""
    i = w.info
    return {
        "id": i.id,
        "host": i.host,
        "pid": i.pid,
        "role": i.role,
        "version": i.version,
        "slots": i.slots,
        "jobs_running": i.jobs_running,
        "queues": i.queues,
        "started_at": i.started_at,
        "heartbeat_at": i.heartbeat_at,
        "gone": w.gone,
        "held_jobs": [
            {"id": h.job_id, "repo": h.repo, "pr": h.pr_number, "rescued_at": h.lease_expires_at} for h in w.held
        ],
        "rescued_at": w.rescued_at,
    }


def _either(states: frozenset[JobState]) -> str:
    return " or ".join(sorted(s.value for s in states))
