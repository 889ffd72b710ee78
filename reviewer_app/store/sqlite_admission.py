"""SQLite admission: apply one admission decision inside the writer's transaction (sync, in the writer thread)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

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
from reviewer_app.store import sql
from reviewer_app.store.base import AdmitResult, Delivery


def _fetchall(conn: sqlite3.Connection, query: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
    return conn.execute(query, params).fetchall()


def admit_in(
    conn: sqlite3.Connection, delivery: Delivery, decision: Decision, prepared: PreparedEnqueue | None, *, now: float
) -> AdmitResult:
    """Record the delivery and apply its decision inside the writer's transaction. ``prepared`` is the Enqueue
    decision's statement parameters (``prepare_enqueue``), None for every other decision."""
    if isinstance(decision, Enqueue):  # the hot path: the delivery check rides on enqueue's pre-check
        assert prepared is not None
        result = enqueue(conn, decision, prepared, now=now)
        if result.outcome == "duplicate-delivery":
            return result
    else:
        seen = conn.execute("SELECT job_id FROM deliveries WHERE delivery_id = ?", (delivery.delivery_id,)).fetchone()
        if seen:
            return AdmitResult("duplicate-delivery", job_id=seen[0], reason="delivery already seen")
        result = _apply(conn, decision, now=now)
    conn.execute(
        "INSERT INTO deliveries (delivery_id, event, action, received_at, outcome, job_id) VALUES (?, ?, ?, ?, ?, ?)",
        (delivery.delivery_id, delivery.event, delivery.action, now, result.outcome, result.job_id),
    )
    return result


def _apply(conn: sqlite3.Connection, decision: Decision, *, now: float) -> AdmitResult:
    """Every decision but Enqueue."""
    if isinstance(decision, Ignore):
        return AdmitResult("ignored", reason=decision.reason)
    if isinstance(decision, CancelPR):
        rows = _fetchall(conn, sql.CANCEL_PR_PENDING, (decision.reason, now, now, decision.repo_id, decision.pr_number))
        return AdmitResult("cancelled", cancelled=tuple(r[0] for r in rows), reason=decision.reason)
    if isinstance(decision, Reply):
        since = now - decision.quiet_seconds
        if any(conn.execute(sql.COMMENTED_SINCE, (e.repo_full_name, e.target, since)).fetchone()[0]
               for e in quiet_comments(decision)):  # fmt: skip
            return AdmitResult("ignored", reason=quietened(decision))
        insert_effects(conn, decision.effects, now)
        return AdmitResult("replied", reason=decision.reason)
    if isinstance(decision, SetPause):
        conn.execute(
            "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (pause_key(decision.repo_id, decision.pr_number), "1" if decision.paused else "0"),
        )
        insert_effects(conn, decision.effects, now)
        word = "paused" if decision.paused else "resumed"
        return AdmitResult(word, reason=f"automatic reviews {word} on this pull request")
    if isinstance(decision, InstallationChange):
        conn.execute(sql.UPSERT_INSTALLATION, (decision.installation_id, decision.account,
                                                     1 if decision.active else 0, decision.reason, now))  # fmt: skip
        cancelled: tuple[int, ...] = ()
        if not decision.active:
            rows = _fetchall(
                conn, sql.CANCEL_INSTALLATION_PENDING, (decision.reason, now, now, decision.installation_id)
            )
            cancelled = tuple(r[0] for r in rows)
        return AdmitResult("installation", cancelled=cancelled, reason=decision.reason,
                           installation_gone=None if decision.active else decision.installation_id)  # fmt: skip
    if isinstance(decision, ReposRemoved):
        ids: list[int] = []
        for repo_id in decision.repo_ids:
            rows = _fetchall(
                conn, sql.CANCEL_REPO_PENDING, (decision.reason, now, now, decision.installation_id, repo_id)
            )
            ids.extend(r[0] for r in rows)
        return AdmitResult("cancelled", cancelled=tuple(ids), reason=decision.reason)
    raise TypeError(f"unexpected decision {decision!r}")


def insert_effects(conn: sqlite3.Connection, effects: Sequence[Effect], now: float) -> None:
    if effects:
        conn.executemany(
            sql.INSERT_EFFECT,
            [(e.kind, e.installation_id, e.repo_full_name, e.target, e.content, now) for e in effects],
        )


# Everything admission must know before inserting a job, in one statement: one round trip (and one hand-over of
# the GIL) inside the writer's transaction instead of three. Positional parameters, in PreparedEnqueue.precheck's
# order: binding by position is cheaper than by name, and this runs for every webhook.
ENQUEUE_PRECHECK = f"""
SELECT EXISTS (SELECT 1 FROM deliveries WHERE delivery_id = ?) AS seen,
       (SELECT job_id FROM deliveries WHERE delivery_id = ?) AS seen_job_id,
       (SELECT reason FROM installations WHERE id = ? AND active = 0) AS inactive_reason,
       EXISTS (SELECT 1 FROM settings WHERE key = ? AND value = '1') AS paused,
       (SELECT id FROM jobs WHERE revision_key = ? AND state IN ({sql.LIVE_STATES})) AS live_id,
       CASE WHEN ? THEN (SELECT COUNT(*) FROM jobs WHERE installation_id = ?
                         AND created_at > ? AND {sql.SPENT_JOB})
            ELSE 0 END AS reviews_today,
       CASE WHEN ? THEN (SELECT COUNT(*) FROM jobs WHERE repo_id = ? AND pr_number = ?
                         AND priority = 0 AND created_at > ?)
            ELSE 0 END AS manual_recent,
       CASE WHEN ? THEN EXISTS (SELECT 1 FROM jobs WHERE repo_id = ? AND pr_number = ?
                                AND state IN ({sql.PENDING_STATES}))
            ELSE 0 END AS has_pending
"""

INSERT_JOB = (
    "INSERT INTO jobs (revision_key, repo_id, repo_full_name, installation_id, pr_number, head_sha, trigger,"
    " priority, state, details, attempts, max_attempts, next_attempt_at, event_at, created_at, updated_at,"
    " outcome, finished_at, before_sha)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_STATE, _INSERT_OUTCOME, _INSERT_FINISHED = 8, 15, 16  # positions in INSERT_JOB's parameters


@dataclass(frozen=True, slots=True)
class PreparedEnqueue:
    """An Enqueue decision with its statement parameters built ahead, outside the writer's transaction: the writer
    thread (the one serial resource of the SQLite store) then only runs statements."""

    precheck: tuple[Any, ...]
    insert: tuple[Any, ...]  # for the common case, a queued job


def prepare_enqueue(decision: Enqueue, *, now: float, max_attempts: int, delivery_id: str) -> PreparedEnqueue:
    spec = decision.job
    guard = decision.guard
    # The PR's pending jobs matter when a head is pushed (supersession, requests following the head).
    supersede = decision.supersede_older_heads and bool(spec.head_sha)
    count_daily = bool(guard and guard.reviews_per_day and spec.installation_id is not None)
    count_manual = bool(guard and guard.manual_per_pr_hour and not decision.automatic)
    precheck = (
        delivery_id, delivery_id, spec.installation_id, pause_key(spec.repo_id, spec.pr_number), spec.revision_key,
        count_daily, spec.installation_id, now - 86400,
        count_manual, spec.repo_id, spec.pr_number, now - 3600,
        supersede, spec.repo_id, spec.pr_number,
    )  # fmt: skip
    insert = (
        spec.revision_key, spec.repo_id, spec.repo_full_name, spec.installation_id, spec.pr_number,
        spec.head_sha, spec.trigger, spec.priority, "queued", orjson.dumps(spec.details).decode(), max_attempts,
        now + spec.delay_seconds, spec.details.get("event_at"), now, now, None, None, spec.details.get("before"),
    )  # fmt: skip
    return PreparedEnqueue(precheck, insert)


def enqueue(conn: sqlite3.Connection, decision: Enqueue, p: PreparedEnqueue, *, now: float) -> AdmitResult:
    """Apply an Enqueue decision as core.pr_work plans it; a delivery already recorded answers duplicate-delivery
    (checked in the same statement as everything else)."""
    spec = decision.job
    seen, seen_job_id, inactive_reason, paused, live_id, reviews_today, manual_recent, has_pending = conn.execute(
        ENQUEUE_PRECHECK, p.precheck
    ).fetchone()
    if seen:
        return AdmitResult("duplicate-delivery", job_id=seen_job_id, reason="delivery already seen")
    if inactive_reason is not None:
        return AdmitResult("ignored", reason=f"installation is not active ({inactive_reason})")
    pending = ()
    if has_pending:  # only when the PR has pending jobs: most admissions skip this statement
        rows = _fetchall(conn, sql.PENDING_JOBS_OF_PR, (spec.repo_id, spec.pr_number))
        pending = tuple(PendingJob(*row) for row in rows)
    requester = spec.details.get("requested_by")
    if manual_recent and isinstance(requester, str):
        manual_recent = conn.execute(sql.REQUESTS_BY_SINCE, (spec.repo_id, spec.pr_number, now - 3600,
                                                             requester)).fetchone()[0]  # fmt: skip
    author_today = 0
    if limits_author(decision):
        author_today = conn.execute(sql.AUTHOR_SPENT_SINCE, (spec.installation_id, now - 86400,
                                                             spec.details["author"])).fetchone()[0]  # fmt: skip
    refusal = guard_refusal(decision, manual_recent=manual_recent, reviews_today=reviews_today,
                            author_today=author_today)  # fmt: skip
    plan = plan_enqueue(decision, PRFacts(paused=bool(paused), live_revision_job=live_id, pending=pending,
                                          refusal=refusal))  # fmt: skip
    for followed in plan.follow:
        _follow(conn, followed, spec.head_sha, now=now)
    if plan.insert_state is None:
        return AdmitResult(plan.outcome, job_id=plan.duplicate_of, reason=plan.reason)
    insert = p.insert
    if plan.insert_state != "queued":  # recorded, visibly: a finished job that says why
        values = list(insert)
        values[_INSERT_STATE], values[_INSERT_OUTCOME], values[_INSERT_FINISHED] = (
            plan.insert_state,
            plan.insert_outcome,
            now,
        )
        insert = tuple(values)
    job_id = conn.execute(INSERT_JOB, insert).lastrowid
    assert job_id is not None
    if plan.superseded_by is not None:
        conn.execute(sql.SET_SUPERSEDED_BY, (plan.superseded_by, job_id))
    if plan.outcome == "refused":
        assert decision.guard is not None
        insert_effects(conn, decision.guard.refusal_effects, now)
    elif plan.insert_state == "queued":
        insert_effects(conn, decision.effects, now)
    superseded: list[int] = []
    outcome = f"superseded by job {job_id} for newer head {spec.head_sha}"
    for old in plan.supersede:
        if conn.execute(sql.SUPERSEDE_IF_PENDING, (job_id, outcome, now, now, old)).fetchone():
            conn.execute(sql.FINISH_SUPERSEDED_ATTEMPT, (now, old))
            superseded.append(old)
    return AdmitResult(plan.outcome, job_id=job_id, superseded=tuple(superseded), reason=plan.reason)


def _follow(conn: sqlite3.Connection, job_id: int, head_sha: str, *, now: float) -> None:
    """Move a requested review settled on an older head to the newest one: supersede it, queue its successor."""
    outcome = f"superseded: the pull request moved on to {head_sha}; the requested review follows it"
    if conn.execute(sql.SUPERSEDE_IF_PENDING, (None, outcome, now, now, job_id)).fetchone() is None:
        return
    conn.execute(sql.FINISH_SUPERSEDED_ATTEMPT, (now, job_id))
    successor = conn.execute(sql.INSERT_FOLLOWING_REQUEST, (now, now, now, job_id)).fetchone()[0]
    conn.execute(sql.SET_SUPERSEDED_BY, (successor, job_id))
