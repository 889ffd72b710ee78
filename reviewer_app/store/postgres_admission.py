"""Admission on PostgreSQL: apply one decision inside the caller's transaction, safe against other hosts."""

# SQLite has one writer, so its admissions never interleave. Here several processes admit at once, so a decision
# first takes transaction-scoped advisory locks, always in the same order (installation, then pull request): two
# heads of one PR, a budget count and an uninstall then see each other's committed rows, exactly as on SQLite. The
# unique keys (delivery id, revision key) stay the last word on duplicates.

from __future__ import annotations

import json
from collections.abc import Sequence

import asyncpg

from reviewer_app.core.admission import (
    CancelPR,
    Decision,
    Effect,
    Enqueue,
    Ignore,
    InstallationChange,
    Reply,
    ReposRemoved,
    SetPause,
    guard_refusal,
    limits_author,
    pause_key,
    quiet_comments,
    quietened,
)
from reviewer_app.core.pr_work import PendingJob, PRFacts, plan_enqueue
from reviewer_app.store import postgres_sql as q
from reviewer_app.store.base import AdmitResult, Delivery


async def admit_in(
    conn: asyncpg.Connection, delivery: Delivery, decision: Decision, *, now: float, max_attempts: int
) -> AdmitResult:
    """Record the delivery and apply its decision; the caller commits (and notifies when a job was created)."""
    claimed = await conn.fetchval(q.INSERT_DELIVERY_IF_NEW, delivery.delivery_id, delivery.event, delivery.action, now)
    if claimed is None:
        seen = await conn.fetchrow(q.SELECT_DELIVERY, delivery.delivery_id)
        return AdmitResult("duplicate-delivery", job_id=seen["job_id"], reason="delivery already seen")
    result = await _apply(conn, decision, now=now, max_attempts=max_attempts)
    await conn.execute(q.RECORD_DELIVERY_OUTCOME, delivery.delivery_id, result.outcome, result.job_id)
    return result


async def _apply(conn: asyncpg.Connection, decision: Decision, *, now: float, max_attempts: int) -> AdmitResult:
    if isinstance(decision, Ignore):
        return AdmitResult("ignored", reason=decision.reason)
    if isinstance(decision, CancelPR):
        await conn.execute(q.LOCK_PR_ADMISSION, decision.repo_id, decision.pr_number)
        rows = await conn.fetch(q.CANCEL_PR_PENDING, decision.reason, now, now, decision.repo_id, decision.pr_number)
        return AdmitResult("cancelled", cancelled=tuple(r[0] for r in rows), reason=decision.reason)
    if isinstance(decision, Reply):
        for e in quiet_comments(decision):
            await conn.execute(q.LOCK_REPLY_ADMISSION, e.repo_full_name, e.target)
            if await conn.fetchval(q.COMMENTED_SINCE, e.repo_full_name, e.target, now - decision.quiet_seconds):
                return AdmitResult("ignored", reason=quietened(decision))
        await _effects(conn, decision.effects, now)
        return AdmitResult("replied", reason=decision.reason)
    if isinstance(decision, SetPause):
        await conn.execute(q.LOCK_PR_ADMISSION, decision.repo_id, decision.pr_number)
        await conn.execute(
            q.UPSERT_SETTING, pause_key(decision.repo_id, decision.pr_number), "1" if decision.paused else "0"
        )
        await _effects(conn, decision.effects, now)
        word = "paused" if decision.paused else "resumed"
        return AdmitResult(word, reason=f"automatic reviews {word} on this pull request")
    if isinstance(decision, InstallationChange):
        await conn.execute(q.LOCK_INSTALLATION_ADMISSION, decision.installation_id)
        await conn.execute(q.UPSERT_INSTALLATION, decision.installation_id, decision.account,
                           1 if decision.active else 0, decision.reason, now)  # fmt: skip
        cancelled: tuple[int, ...] = ()
        if not decision.active:
            rows = await conn.fetch(q.CANCEL_INSTALLATION_PENDING, decision.reason, now, now, decision.installation_id)
            cancelled = tuple(r[0] for r in rows)
        return AdmitResult("installation", cancelled=cancelled, reason=decision.reason,
                           installation_gone=None if decision.active else decision.installation_id)  # fmt: skip
    if isinstance(decision, ReposRemoved):
        await conn.execute(q.LOCK_INSTALLATION_ADMISSION, decision.installation_id)
        ids: list[int] = []
        for repo_id in decision.repo_ids:
            rows = await conn.fetch(q.CANCEL_REPO_PENDING, decision.reason, now, now, decision.installation_id, repo_id)
            ids.extend(r[0] for r in rows)
        return AdmitResult("cancelled", cancelled=tuple(ids), reason=decision.reason)
    assert isinstance(decision, Enqueue)
    return await _enqueue(conn, decision, now=now, max_attempts=max_attempts)


async def _effects(conn: asyncpg.Connection, effects: Sequence[Effect], now: float) -> None:
    if effects:
        await conn.executemany(
            q.INSERT_EFFECT, [(e.kind, e.installation_id, e.repo_full_name, e.target, e.content, now) for e in effects]
        )


async def _enqueue(conn: asyncpg.Connection, decision: Enqueue, *, now: float, max_attempts: int) -> AdmitResult:
    spec, guard = decision.job, decision.guard
    # The PR's pending jobs matter when a head is pushed (supersession, requests following the head).
    supersede = decision.supersede_older_heads and bool(spec.head_sha)
    await conn.execute(q.LOCK_ENQUEUE_ADMISSION, spec.installation_id, spec.repo_id, spec.pr_number)
    pre = await conn.fetchrow(
        q.ENQUEUE_PRECHECK,
        spec.installation_id, pause_key(spec.repo_id, spec.pr_number), spec.revision_key,
        bool(guard and guard.reviews_per_day and spec.installation_id is not None), now - 86400,
        bool(guard and guard.manual_per_pr_hour and not decision.automatic), spec.repo_id, spec.pr_number,
        now - 3600, supersede,
    )  # fmt: skip
    if pre["inactive_reason"] is not None:
        return AdmitResult("ignored", reason=f"installation is not active ({pre['inactive_reason']})")
    pending: tuple[PendingJob, ...] = ()
    if pre["has_pending"]:  # only when the PR has pending jobs: most admissions skip this statement
        rows = await conn.fetch(q.PENDING_JOBS_OF_PR, spec.repo_id, spec.pr_number)
        pending = tuple(PendingJob(*row) for row in rows)
    manual_recent = pre["manual_recent"]
    requester = spec.details.get("requested_by")
    if manual_recent and isinstance(requester, str):
        manual_recent = await conn.fetchval(q.REQUESTS_BY_SINCE, spec.repo_id, spec.pr_number, now - 3600, requester)
    author_today = 0
    if limits_author(decision):
        author_today = await conn.fetchval(q.AUTHOR_SPENT_SINCE, spec.installation_id, now - 86400,
                                           spec.details["author"])  # fmt: skip
    refusal = guard_refusal(decision, manual_recent=manual_recent, reviews_today=pre["reviews_today"],
                            author_today=author_today)  # fmt: skip
    plan = plan_enqueue(decision, PRFacts(paused=pre["paused"], live_revision_job=pre["live_id"], pending=pending,
                                          refusal=refusal))  # fmt: skip
    for followed in plan.follow:
        await _follow(conn, followed, spec.head_sha, now=now)
    if plan.insert_state is None:
        return AdmitResult(plan.outcome, job_id=plan.duplicate_of, reason=plan.reason)
    finished = None if plan.insert_state == "queued" else now
    job_id = await conn.fetchval(
        q.INSERT_JOB_IF_NEW_REVISION,
        spec.revision_key, spec.repo_id, spec.repo_full_name, spec.installation_id, spec.pr_number,
        spec.head_sha, spec.trigger, spec.priority, plan.insert_state, json.dumps(spec.details), max_attempts,
        now + spec.delay_seconds, spec.details.get("event_at"), now, plan.insert_outcome, finished,
        spec.details.get("before"),
    )  # fmt: skip
    if job_id is None:
        # Another transaction committed a live job with the same revision key first (the key is the last word).
        existing = await conn.fetchval(q.SELECT_LIVE_JOB_BY_REVISION, spec.revision_key)
        return AdmitResult("duplicate-revision", job_id=existing, reason="revision already admitted")
    if plan.superseded_by is not None:
        await conn.execute(q.SET_SUPERSEDED_BY, plan.superseded_by, job_id)
    if plan.outcome == "refused":
        assert guard is not None
        await _effects(conn, guard.refusal_effects, now)
    elif plan.insert_state == "queued":
        await _effects(conn, decision.effects, now)
    superseded: list[int] = []
    outcome = f"superseded by job {job_id} for newer head {spec.head_sha}"
    for old in plan.supersede:
        if await conn.fetchval(q.SUPERSEDE_IF_PENDING, job_id, outcome, now, now, old) is not None:
            await conn.execute(q.FINISH_SUPERSEDED_ATTEMPT, now, old)
            superseded.append(old)
    return AdmitResult(plan.outcome, job_id=job_id, superseded=tuple(superseded), reason=plan.reason)


async def _follow(conn: asyncpg.Connection, job_id: int, head_sha: str, *, now: float) -> None:
    """Move a requested review settled on an older head to the newest one: supersede it, queue its successor."""
    outcome = f"superseded: the pull request moved on to {head_sha}; the requested review follows it"
    if await conn.fetchval(q.SUPERSEDE_IF_PENDING, None, outcome, now, now, job_id) is None:
        return
    await conn.execute(q.FINISH_SUPERSEDED_ATTEMPT, now, job_id)
    successor = await conn.fetchval(q.INSERT_FOLLOWING_REQUEST, now, now, now, job_id)
    await conn.execute(q.SET_SUPERSEDED_BY, successor, job_id)
