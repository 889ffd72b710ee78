"""One store over a driver: every Store method written once, as a procedure or a named read (River's driver).

A driver (sqlite.py, postgres.py) supplies the engine's part, and only that: how to open, migrate and ping; how to
run a procedure in one transaction (``_run``); how to read outside one (``_rows``); how wake-ups reach subscribers.
It may also batch: SQLite commits concurrent writes together in its writer thread, PostgreSQL commits concurrent
admissions together. Both write concurrent finishes as one batch (finish_batches.py): one statement on PostgreSQL,
two on SQLite."""

from __future__ import annotations

import abc
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from reviewer_app.core.admission import Decision, Enqueue
from reviewer_app.core.queues import JOB_QUEUES, REVIEWS
from reviewer_app.core.states import JobState
from reviewer_app.store import procedures as p
from reviewer_app.store import statements as s
from reviewer_app.store.base import FencedFinishes
from reviewer_app.store.finish_batches import FinishBatches
from reviewer_app.store.learnings import LearningsStore
from reviewer_app.store.outcomes import OutcomesStore
from reviewer_app.store.records import (
    AdmitResult,
    Attempt,
    BatchRequest,
    Delivery,
    Finding,
    Job,
    Lease,
    QueueStats,
    Usage,
)
from reviewer_app.store.workers import HeldJob, WorkerInfo, WorkerStatus, is_gone

T = TypeVar("T")
ProcedureFactory = Callable[[], p.Procedure[T]]  # a fresh generator per try: a transaction may run again


class DrivenStore(LearningsStore, OutcomesStore, FencedFinishes, abc.ABC):
    """The store's logic, once; subclasses are the drivers."""

    engine: str

    # -- what a driver supplies ---------------------------------------------------------------------------

    @abc.abstractmethod
    async def _run(self, procedure: ProcedureFactory[T], *, one_statement: bool = False) -> T:
        """Run the procedure in one transaction; return its result after the commit (and its wake-ups sent).
        ``one_statement``: it runs a single statement on this dialect, which is atomic on its own (a driver may spare
        the BEGIN and COMMIT round trips)."""

    @abc.abstractmethod
    async def _rows(self, stmt: s.Statement, params: Sequence[Any] = ()) -> list[Any]:
        """Rows of one read outside any write transaction (each row indexable by position and by name)."""

    async def _admit(self, procedure: ProcedureFactory[AdmitResult], key: tuple[int, int, int]) -> AdmitResult:
        """Run one admission; a driver may commit concurrent admissions together (``key``: their lock order)."""
        return await self._run(procedure)

    # Whether procedures.finish_together is one statement on this dialect (a driver may then spare BEGIN/COMMIT).
    finishes_in_one_statement: bool = False
    _finish_batches: FinishBatches | None = None

    async def _finish_one(self, item: p.Finish) -> bool:
        """One fenced finish, written together with the others that arrive meanwhile (finish_batches.py)."""
        if self._finish_batches is None:
            self._finish_batches = FinishBatches(self._finish_together, name=f"{self.engine}-finishes")
        return await self._finish_batches.finish(item)

    async def _finish_together(self, items: Sequence[p.Finish]) -> set[str]:
        return await self._run(lambda: p.finish_together(items), one_statement=self.finishes_in_one_statement)

    async def _settle_finishes(self, timeout: float = 10.0) -> None:
        """Before closing: the finishes already handed over still go out."""
        if self._finish_batches is not None:
            await self._finish_batches.settle(timeout)

    # -- admission ----------------------------------------------------------------------------------------

    async def admit(self, delivery: Delivery, decision: Decision, *, now: float, max_attempts: int) -> AdmitResult:
        # Statement parameters are built here, so the transaction (the serial resource) only runs statements.
        prepared = (
            p.prepare_enqueue(decision, delivery, now=now, max_attempts=max_attempts)
            if isinstance(decision, Enqueue)
            else None
        )
        return await self._admit(lambda: p.admit(delivery, decision, prepared, now=now), p.lock_order(decision))

    # -- dispatch -----------------------------------------------------------------------------------------

    async def claim(
        self, *, owner: str, limit: int, now: float, lease_seconds: float, queue: str = REVIEWS
    ) -> list[Lease]:
        if limit <= 0:
            return []
        rows = await self._run(
            lambda: p.claim(owner=owner, limit=limit, now=now, lease_seconds=lease_seconds, queue=queue),
            one_statement=True,
        )
        return [p.lease_of(r, owner) for r in rows]

    async def renew_lease(self, lease: Lease, *, now: float, lease_seconds: float) -> float | None:
        expires = now + lease_seconds
        held = await self._run(lambda: p.renew_lease(lease, now=now, expires=expires), one_statement=True)
        return expires if held else None

    async def renew_leases(self, leases: Sequence[Lease], *, now: float, lease_seconds: float) -> set[str]:
        if not leases:
            return set()
        return await self._run(lambda: p.renew_leases(leases, now=now, lease_seconds=lease_seconds), one_statement=True)

    async def _finish(
        self, lease: Lease, state: JobState, *, now: float, outcome: str, error: str | None, usage: Usage | None
    ) -> bool:
        return await self._finish_one(p.Finish(lease, state.value, outcome, error, now, p.usage_params(usage)))

    async def retry_if_lease_held(
        self,
        lease: Lease,
        *,
        now: float,
        at: float,
        error: str,
        counts_attempt: bool = True,
        usage: Usage | None = None,
    ) -> bool:
        return await self._run(
            lambda: p.retry(lease, now=now, at=at, error=error, counts_attempt=counts_attempt, usage=usage)
        )

    async def save_progress_if_lease_held(self, lease: Lease, *, now: float, **fields: Any) -> bool:
        query, params = p.progress_update(lease, now=now, fields=fields)
        return await self._run(lambda: p.changes(query, params)) == 1

    async def record_usage_if_lease_held(self, lease: Lease, usage: Usage) -> bool:
        return await self._run(lambda: p.record_usage(lease, usage))

    async def rescue_expired(self, *, now: float) -> list[int]:
        return await self._run(lambda: p.rescue_expired(now=now))

    async def next_wakeup(self, *, now: float, queues: Sequence[str] = JOB_QUEUES) -> float | None:
        rows = await self._rows(s.NEXT_WAKEUP, (json.dumps(list(queues)),))
        return rows[0][0] if rows else None

    # -- check runs ---------------------------------------------------------------------------------------

    async def jobs_needing_check_sync(self, *, limit: int = 50, skip: Sequence[int] = ()) -> list[Job]:
        return [Job.from_row(r) for r in await self._rows(s.NEEDS_CHECK_SYNC, (json.dumps(list(skip)), limit))]

    async def claim_check_run_creation(self, job_id: int, *, owner: str, now: float, seconds: float) -> bool:
        params = (owner, now + seconds, job_id, now, owner, now)
        return await self._run(lambda: p.returns_row(s.CLAIM_CHECK_RUN_CREATION, params))

    async def set_check_run_if_unchanged(
        self, job_id: int, *, state: JobState, attempts: int, check_run_id: int | None, key: str
    ) -> bool:
        params = (check_run_id, key, job_id, state.value, attempts, check_run_id)
        return await self._run(lambda: p.changes(s.SET_CHECK_RUN_IF_UNCHANGED, params)) == 1

    async def forget_check_run_status(self, job_id: int, *, check_run_id: int | None) -> None:
        await self._run(lambda: p.changes(s.FORGET_CHECK_RUN_STATUS, (check_run_id, job_id)))

    # -- outbox, installations, usage ---------------------------------------------------------------------

    async def pending_effects(self, *, limit: int = 50, skip: Sequence[int] = ()) -> list[dict[str, Any]]:
        return [dict(r) for r in await self._rows(s.PENDING_EFFECTS, (json.dumps(list(skip)), limit))]

    async def mark_effect(self, effect_id: int, *, now: float, error: str | None, done: bool) -> None:
        await self._run(lambda: p.changes(s.MARK_EFFECT, (error, done, now, effect_id)))

    async def usage_by_repo(self, *, since: float) -> list[dict[str, Any]]:
        rows = [dict(r) for r in await self._rows(s.USAGE_BY_REPO, (since, since, since))]
        return [{**r, "batched": bool(r["batched"])} for r in rows]

    # -- Message Batches ----------------------------------------------------------------------------------

    async def record_batch_requests(
        self, job_id: int, *, batch_id: str, model: str, parts: Sequence[tuple[str, str]], now: float
    ) -> None:
        rows = [(custom_id, job_id, key, batch_id, model, now) for custom_id, key in parts]
        await self._run(lambda: p.many(s.INSERT_BATCH_REQUEST, rows))

    async def batch_requests_of(self, job_id: int) -> list[BatchRequest]:
        return [BatchRequest(*tuple(r)) for r in await self._rows(s.SELECT_BATCH_REQUESTS_OF_JOB, (job_id,))]

    async def open_batches(self, *, limit: int = 1000) -> list[str]:
        return [r[0] for r in await self._rows(s.OPEN_BATCHES, (limit,))]

    async def open_requests_of_batch(self, batch_id: str) -> list[str]:
        return [r[0] for r in await self._rows(s.SELECT_OPEN_REQUESTS_OF_BATCH, (batch_id,))]

    async def settle_batch_request(
        self, custom_id: str, *, state: str, result: str | None, error: str | None, usage: Usage | None, now: float
    ) -> int | None:
        return await self._run(
            lambda: p.settle_batch_request(custom_id, state=state, result=result, error=error, usage=usage, now=now)
        )

    async def withdraw_requests_of_ended_jobs(self) -> list[str]:
        return await self._run(p.withdraw_requests_of_ended_jobs)

    async def last_reviewed_head(self, repo_id: int, pr_number: int) -> str | None:
        rows = await self._rows(s.LAST_REVIEWED_HEAD, (repo_id, pr_number))
        return rows[0][0] if rows else None

    async def pull_of_head(self, repo_id: int, head_sha: str) -> int | None:
        rows = await self._rows(s.PULL_OF_HEAD, (repo_id, head_sha))
        return rows[0][0] if rows else None

    async def skip_if_unpoked(self, lease: Lease, *, pokes: int, now: float, outcome: str) -> bool:
        return await self._run(lambda: p.skip_if_unpoked(lease, pokes=pokes, now=now, outcome=outcome))

    async def record_published_review(self, job_id: int, review_id: int) -> None:
        await self._run(lambda: p.changes(s.RECORD_PUBLISHED_REVIEW, (review_id, job_id)))

    # -- findings -----------------------------------------------------------------------------------------

    async def record_findings(self, findings: Sequence[Finding], *, now: float) -> None:
        rows = [
            (
                f.repo_id,
                f.pr_number,
                f.job_id,
                f.review_id,
                f.head_sha,
                f.path,
                f.line,
                f.line_text,
                json.dumps(list(f.before)),
                json.dumps(list(f.after)),
                f.severity,
                f.title,
                f.body_digest,
                f.comment_id,
                f.thread_id,
                now,
            )
            for f in findings
        ]
        if rows:
            await self._run(lambda: p.many(s.INSERT_FINDING_IF_NEW, rows))

    async def open_findings(self, repo_id: int, pr_number: int) -> list[Finding]:
        return [Finding.from_row(r) for r in await self._rows(s.SELECT_OPEN_FINDINGS, (repo_id, pr_number))]

    async def link_findings(self, links: Sequence[tuple[int, int | None, str | None]]) -> None:
        rows = [(comment_id, thread_id, finding_id) for finding_id, comment_id, thread_id in links]
        if rows:
            await self._run(lambda: p.many(s.LINK_FINDING, rows))

    async def resolve_findings(self, ids: Sequence[int], *, now: float) -> None:
        if ids:
            await self._run(lambda: p.many(s.RESOLVE_FINDING_IF_OPEN, [(now, i) for i in ids]))

    async def resolved_findings(self, repo_id: int, pr_number: int) -> int:
        rows = await self._rows(s.COUNT_RESOLVED_FINDINGS, (repo_id, pr_number))
        return int(rows[0][0])

    async def installation_active(self, installation_id: int) -> bool:
        rows = await self._rows(s.SELECT_INSTALLATION_ACTIVE, (installation_id,))
        return not rows or bool(rows[0][0])

    # -- settings (queue pause) ---------------------------------------------------------------------------

    async def set_setting(self, key: str, value: str) -> None:
        await self._run(lambda: p.set_setting(key, value))

    async def claim_once(self, key: str, value: str = "claimed") -> bool:
        return await self._run(lambda: p.claim_once(key, value))

    async def get_setting(self, key: str) -> str | None:
        rows = await self._rows(s.SELECT_SETTING, (key,))
        return rows[0][0] if rows else None

    # -- missed-webhook recovery --------------------------------------------------------------------------

    async def deliveries_to_recover(self, guids: Sequence[str]) -> set[str]:
        if not guids:
            return set()
        return {r[0] for r in await self._rows(s.DELIVERIES_TO_RECOVER, (json.dumps(list(guids)),))}

    async def claim_redelivery(
        self, guid: str, delivery_id: int, *, owner: str, now: float, stale_before: float
    ) -> bool:
        return await self._run(
            lambda: p.claim_redelivery(guid, delivery_id, owner=owner, now=now, stale_before=stale_before)
        )

    async def mark_redelivery_requested(self, guid: str, *, owner: str, now: float, error: str | None) -> None:
        await self._run(lambda: p.changes(s.MARK_REDELIVERY_REQUESTED_IF_CLAIMED, (now, error, guid, owner)))

    async def release_redelivery(self, guid: str, *, owner: str, error: str) -> None:
        await self._run(lambda: p.changes(s.RELEASE_REDELIVERY_IF_CLAIMED, (error, guid, owner)))

    async def forget_redeliveries(self, before: float) -> int:
        return await self._run(lambda: p.changes(s.FORGET_REDELIVERIES, (before,)))

    async def take_duty_lease(self, duty: str, *, owner: str, now: float, seconds: float) -> bool:
        params = (duty, owner, now + seconds, now, now)
        return await self._run(lambda: p.returns_row(s.TAKE_DUTY_LEASE_IF_FREE, params))

    async def release_duty_lease(self, duty: str, *, owner: str, now: float) -> None:
        await self._run(lambda: p.changes(s.RELEASE_DUTY_LEASE_IF_HELD, (now, duty, owner)))

    # -- reads and admin ----------------------------------------------------------------------------------

    async def get_job(self, job_id: int) -> Job | None:
        rows = await self._rows(f"SELECT {s.JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,))
        return Job.from_row(rows[0]) if rows else None

    async def list_jobs(
        self,
        *,
        states: Sequence[str] = (),
        repo: str | None = None,
        pr_number: int | None = None,
        limit: int = 100,
        before_id: int | None = None,
    ) -> list[Job]:
        found = s.list_jobs_query(states=states, repo=repo, pr_number=pr_number, before_id=before_id)
        if found is None:  # no state this version knows
            return []
        query, params = found
        return [Job.from_row(r) for r in await self._rows(query, (*params, limit))]

    async def attempts_of(self, job_id: int) -> list[Attempt]:
        return [Attempt(*tuple(r)) for r in await self._rows(s.SELECT_ATTEMPTS, (job_id,))]

    async def stats(self, *, now: float) -> QueueStats:
        by_state = {r[0]: r[1] for r in await self._rows(s.STATE_COUNTS)}
        oldest = await self._rows(s.OLDEST_PENDING)
        expired = await self._rows(s.EXPIRED_LEASES, (now,))
        awaiting = await self._rows(s.AWAITING_RECONCILIATION)
        return QueueStats(
            by_state=by_state,
            oldest_pending_created_at=oldest[0][0],
            expired_leases=expired[0][0],
            awaiting_reconciliation=awaiting[0][0],
            pending_by_queue=await self._pending_by_queue(),
        )

    async def _pending_by_queue(self) -> dict[str, dict[str, int]]:
        pending: dict[str, dict[str, int]] = {}
        for queue, state, n in await self._rows(s.PENDING_BY_QUEUE):
            pending.setdefault(queue, {})[state] = n
        return pending

    async def cancel_job(self, job_id: int, *, now: float, reason: str) -> bool:
        return await self._run(lambda: p.changes(s.OPERATOR_CANCEL, (reason, now, now, job_id))) == 1

    async def retry_job(self, job_id: int, *, now: float) -> bool:
        return await self._run(lambda: p.operator_retry(job_id, now=now))

    async def prune(self, before: float, batch: int) -> int:
        return await self._run(lambda: p.prune(before, batch))

    async def queue_now(self, *, now: float, finished_since: float) -> QueueStats:
        by_state = {r[0]: r[1] for r in await self._rows(s.QUEUE_COUNTS, (finished_since,))}
        oldest = await self._rows(s.OLDEST_PENDING)
        expired = await self._rows(s.EXPIRED_LEASES, (now,))
        awaiting = await self._rows(s.AWAITING_RECONCILIATION)
        return QueueStats(by_state, oldest[0][0], expired[0][0], awaiting[0][0], await self._pending_by_queue())

    async def failed_since(self, since: float, *, limit: int) -> list[Job]:
        return [Job.from_row(r) for r in await self._rows(s.FAILED_SINCE, (since, limit))]

    async def spend_by_day(self, *, since: float, until: float) -> list[dict[str, Any]]:
        return [dict(r) for r in await self._rows(s.SPEND_BY_DAY, (since, until, since, until, since, until))]

    # -- the worker registry ------------------------------------------------------------------------------

    async def register_worker(self, info: WorkerInfo) -> None:
        params = (
            info.id,
            info.host,
            info.pid,
            info.role,
            info.version,
            info.slots,
            info.lease_seconds,
            info.started_at,
            info.heartbeat_at,
            info.jobs_running,
            json.dumps(info.queues, sort_keys=True),
        )
        await self._run(lambda: p.changes(s.UPSERT_WORKER, params), one_statement=True)

    async def deregister_worker(self, worker_id: str) -> None:
        await self._run(lambda: p.changes(s.DEREGISTER_WORKER, (worker_id,)), one_statement=True)

    async def workers(self, *, now: float) -> list[WorkerStatus]:
        infos = [
            WorkerInfo(*tuple(r)[:-1], queues=json.loads(r["queues"] or "{}"))
            for r in await self._rows(s.SELECT_WORKERS)
        ]
        held: dict[str, list[HeldJob]] = {}
        for job_id, owner, repo, pr, expires in await self._rows(s.RUNNING_JOBS_BY_OWNER):
            held.setdefault(owner, []).append(HeldJob(job_id, repo, pr, expires))
        return [WorkerStatus(i, is_gone(i, now), tuple(held.get(i.id, ()))) for i in infos]

    async def prune_workers(self, before: float) -> int:
        return await self._run(lambda: p.changes(s.PRUNE_WORKERS, (before,)), one_statement=True)

    async def void_holder(self, worker_id: str, *, now: float, jobs_at: float | None) -> int:
        return await self._run(lambda: p.void_holder(worker_id, now=now, jobs_at=jobs_at))
