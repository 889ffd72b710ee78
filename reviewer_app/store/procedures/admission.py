"""Admission as one procedure: the delivery recorded once and its decision applied (core.pr_work's plan for an
Enqueue: follow, insert, supersede), with the parameters built ahead and the lock order of PostgreSQL's batches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reviewer_app.core.admission import (
    TRIGGER_RETARGET,
    CancelPR,
    Decision,
    Effect,
    Enqueue,
    Ignore,
    InstallationChange,
    JobSpec,
    Reply,
    ReposRemoved,
    SetPause,
    guard_refusal,
    is_reply,
    limits_author,
    limits_thread,
    pause_key,
    pause_said_key,
    quiet_comments,
    quietened,
)
from reviewer_app.core.batching import SWEEP_ACTION
from reviewer_app.core.cancel_reasons import cancel_reason
from reviewer_app.core.outcomes import close_fate
from reviewer_app.core.pr_work import PAUSED_SKIP, PendingJob, PRFacts, plan_enqueue
from reviewer_app.core.states import JobState
from reviewer_app.store import statements as s
from reviewer_app.store.procedures.steps import Count, Insert, Later, Many, Procedure, Row, Rows, Wake
from reviewer_app.store.records import AdmitResult, Delivery


@dataclass(frozen=True, slots=True)
class PreparedEnqueue:
    """An Enqueue decision with its statement parameters built ahead, outside the transaction: SQLite's writer
    thread (its one serial resource) and PostgreSQL's batch transaction then only run statements."""

    claim: tuple[Any, ...]  # CLAIM_DELIVERY_AND_LOCK_ENQUEUE
    precheck: tuple[Any, ...]  # ENQUEUE_PRECHECK
    insert: tuple[Any, ...]  # INSERT_JOB_IF_NEW_REVISION, for the common case: a queued job


_INSERT_STATE, _INSERT_OUTCOME, _INSERT_FINISHED, _INSERT_CANCEL_REASON = (
    8,
    15,
    16,
    18,
)  # positions in INSERT_JOB_IF_NEW_REVISION's parameters
INSERT_REVISION_KEY = 0
# Positions in ENQUEUE_PRECHECK's parameters that PostgreSQL's batched admission reads (postgres.py): whether the
# pre-check counts the day's or the hour's jobs, the pull request, and the columns ENQUEUE_PRECHECKS_TOGETHER takes.
PRECHECK_COUNTS_DAY, PRECHECK_COUNTS_HOUR, PRECHECK_REPO, PRECHECK_PR = 5, 8, 9, 10
PRECHECK_TOGETHER_COLUMNS = (0, 2, 3, 4, 12, 13, 14)  # delivery, installation, pause key, revision, pending?, repo, pr


def prepare_enqueue(decision: Enqueue, delivery: Delivery, *, now: float, max_attempts: int) -> PreparedEnqueue:
    spec = decision.job
    guard = decision.guard
    # The PR's pending jobs matter when a head is pushed (supersession, requests following the head), and for a
    # retarget (one queued review against the new base: core.pr_work._plan_retarget).
    supersede = (decision.supersede_older_heads and bool(spec.head_sha)) or spec.trigger.startswith(TRIGGER_RETARGET)
    count_daily = bool(guard and guard.reviews_per_day and spec.installation_id is not None)
    count_manual = bool(guard and guard.manual_per_pr_hour and not decision.automatic)
    claim = (
        delivery.delivery_id,
        delivery.event,
        delivery.action,
        now,
        spec.installation_id,
        count_daily,
        spec.repo_id,
        spec.pr_number,
    )
    precheck = (
        delivery.delivery_id,
        delivery.delivery_id,
        spec.installation_id,
        pause_key(spec.repo_id, spec.pr_number),
        spec.revision_key,
        count_daily,
        spec.installation_id,
        now - 86400,
        count_manual,
        spec.repo_id,
        spec.pr_number,
        now - 3600,
        supersede,
        spec.repo_id,
        spec.pr_number,
        is_reply(spec.trigger),  # the day's count is of answers for an answer, of reviews otherwise
    )
    insert = (
        spec.revision_key,
        spec.repo_id,
        spec.repo_full_name,
        spec.installation_id,
        spec.pr_number,
        spec.head_sha,
        spec.trigger,
        spec.priority,
        "queued",
        spec.details.to_json(),
        max_attempts,
        now + spec.delay_seconds,
        spec.event_at,
        now,
        now,
        None,
        None,
        spec.before_sha,
        None,
    )
    return PreparedEnqueue(claim, precheck, insert)


def lock_order(decision: Decision) -> tuple[int, int, int]:
    """Where the decision's PostgreSQL locks fall in the one order every admitting transaction takes them in
    (installation, then repository and pull request): admissions committed together are applied in this order, so
    two batches in flight do not deadlock. (A PR's own lock without its installation's can still meet an enqueue of
    that PR in another batch in the other order; PostgreSQL detects that and the batch runs again.)"""
    if isinstance(decision, Enqueue):
        return (decision.job.installation_id or 0, decision.job.repo_id, decision.job.pr_number)
    if isinstance(decision, InstallationChange | ReposRemoved):
        return (decision.installation_id, -1, -1)
    if isinstance(decision, CancelPR | SetPause):
        return (0, decision.repo_id, decision.pr_number)
    return (0, 0, 0)


def admit(
    delivery: Delivery, decision: Decision, prepared: PreparedEnqueue | None, *, now: float
) -> Procedure[AdmitResult]:
    """Record the delivery and apply its decision. ``prepared``: the Enqueue decision's parameters, else None."""
    if isinstance(decision, Enqueue):  # the hot path: the delivery check rides on enqueue's pre-check
        assert prepared is not None
        result = yield from enqueue(decision, prepared, now=now)
        if result.outcome == "duplicate-delivery":
            return result
    else:
        claimed = yield Count(s.CLAIM_DELIVERY, (delivery.delivery_id, delivery.event, delivery.action, now))
        if claimed != 1:  # SQLite claims nothing (None): it looks; on PostgreSQL 0 means another admission has it
            seen = yield Row(s.SELECT_SEEN_DELIVERY, (delivery.delivery_id,))
            if seen is not None or claimed == 0:
                return AdmitResult("duplicate-delivery", job_id=seen and seen[0], reason="delivery already seen")
        result = yield from _apply(decision, now=now)
    yield Later(
        s.RECORD_DELIVERY, (delivery.delivery_id, delivery.event, delivery.action, now, result.outcome, result.job_id)
    )
    if result.created:
        yield Wake()
    return result


def _apply(decision: Decision, *, now: float) -> Procedure[AdmitResult]:
    """Every decision but Enqueue."""
    if isinstance(decision, Ignore):
        return AdmitResult("ignored", reason=decision.reason)
    if isinstance(decision, CancelPR):
        yield Row(s.LOCK_PR_ADMISSION, (decision.repo_id, decision.pr_number))
        closed_at = s.CLOSED_AT_UNKNOWN if decision.closed_at is None else decision.closed_at
        reason = cancel_reason(decision.reason).value
        rows = yield Rows(
            s.CANCEL_PR_PENDING, (decision.reason, reason, now, now, decision.repo_id, decision.pr_number, closed_at)
        )
        if decision.merged is not None:  # the close itself (not a lost access): its findings' fate, in this commit
            fate = close_fate(decision.merged)
            at = now if decision.closed_at is None else decision.closed_at
            params = (fate.value, at, "merged" if decision.merged else "closed", decision.repo_id, decision.pr_number)
            yield Count(s.SETTLE_OPEN_FINDINGS_AT_CLOSE, params)
        return AdmitResult("cancelled", cancelled=tuple(r[0] for r in rows), reason=decision.reason)
    if isinstance(decision, Reply | SetPause) and decision.command_key is not None:
        # A command applies once per comment: a captured body sent again under a new delivery id is a duplicate.
        if (yield Count(s.CLAIM_COMMAND_IF_NEW, (decision.command_key, "applied"))) != 1:
            return AdmitResult("duplicate-command", reason="this comment's command was already applied")
    if isinstance(decision, Reply):
        since = now - decision.quiet_seconds
        for e in quiet_comments(decision):
            yield Row(s.LOCK_REPLY_ADMISSION, (e.repo_full_name, e.target))
            commented = yield Row(s.COMMENTED_SINCE, (e.repo_full_name, e.target, since))
            if commented[0]:
                return AdmitResult("ignored", reason=quietened(decision))
        yield from insert_effects(decision.effects, now)
        return AdmitResult("replied", reason=decision.reason)
    if isinstance(decision, SetPause):
        yield Row(s.LOCK_PR_ADMISSION, (decision.repo_id, decision.pr_number))
        key = pause_key(decision.repo_id, decision.pr_number)
        if decision.at is not None:
            # The later written pause or resume holds, whichever arrives (or is confirmed) last.
            said_key = pause_said_key(decision.repo_id, decision.pr_number)
            said = yield Row(s.SELECT_SETTING, (said_key,))
            if said is not None and float(said[0]) > decision.at:
                return AdmitResult("ignored", reason="a pause or resume written later holds")
            yield Count(s.UPSERT_SETTING, (said_key, repr(decision.at)))
        yield Count(s.UPSERT_SETTING, (key, "1" if decision.paused else "0"))
        yield from insert_effects(decision.effects, now)
        word = "paused" if decision.paused else "resumed"
        if not decision.paused:
            # The head skipped while paused is reviewed now: a resume answers the skip's own check run.
            row = yield Row(s.RESUME_PAUSED_HEAD, (now, now, now, decision.repo_id, decision.pr_number, PAUSED_SKIP))
            if row is not None:
                yield Wake()
                reason = "automatic reviews resumed on this pull request; the head skipped while paused is queued"
                return AdmitResult(word, job_id=row[0], reason=reason)
        return AdmitResult(word, reason=f"automatic reviews {word} on this pull request")
    if isinstance(decision, InstallationChange):
        yield Row(s.LOCK_INSTALLATION_ADMISSION, (decision.installation_id,))
        yield Count(
            s.UPSERT_INSTALLATION,
            (decision.installation_id, decision.account, 1 if decision.active else 0, decision.reason, now),
        )
        cancelled: tuple[int, ...] = ()
        if not decision.active:
            why = cancel_reason(decision.reason).value
            rows = yield Rows(s.CANCEL_INSTALLATION_PENDING, (decision.reason, why, now, now, decision.installation_id))
            cancelled = tuple(r[0] for r in rows)
        return AdmitResult(
            "installation",
            cancelled=cancelled,
            reason=decision.reason,
            installation_gone=None if decision.active else decision.installation_id,
        )
    if isinstance(decision, ReposRemoved):
        yield Row(s.LOCK_INSTALLATION_ADMISSION, (decision.installation_id,))
        ids: list[int] = []
        why = cancel_reason(decision.reason).value
        for repo_id in decision.repo_ids:
            rows = yield Rows(
                s.CANCEL_REPO_PENDING, (decision.reason, why, now, now, decision.installation_id, repo_id)
            )
            ids.extend(r[0] for r in rows)
        return AdmitResult("cancelled", cancelled=tuple(ids), reason=decision.reason)
    raise TypeError(f"unexpected decision {decision!r}")


def insert_effects(effects: Sequence[Effect], now: float) -> Procedure[None]:
    if effects:
        yield Many(
            s.INSERT_EFFECT, [(e.kind, e.installation_id, e.repo_full_name, e.target, e.content, now) for e in effects]
        )


def enqueue(decision: Enqueue, p: PreparedEnqueue, *, now: float) -> Procedure[AdmitResult]:
    """Apply an Enqueue decision as core.pr_work plans it: read the PR's facts, then follow, insert, supersede. A
    delivery already recorded answers duplicate-delivery (checked in the same statement as everything else)."""
    spec = decision.job
    claim = yield Row(s.CLAIM_DELIVERY_AND_LOCK_ENQUEUE, p.claim)  # PostgreSQL only
    pre = yield Row(s.ENQUEUE_PRECHECK, p.precheck)
    seen, seen_job_id, inactive_reason, paused, live_id, reviews_today, manual_recent, has_pending = pre
    if seen or (claim is not None and not claim["claimed"]):  # recorded, or claimed by another admission
        return AdmitResult("duplicate-delivery", job_id=seen_job_id, reason="delivery already seen")
    if inactive_reason is not None:
        return AdmitResult("ignored", reason=f"installation is not active ({inactive_reason})")
    if spec.details.action == "reopened":  # its findings open at the close are open again (core/outcomes.py)
        reopened_at = now if spec.event_at is None else spec.event_at
        yield Count(s.REOPEN_FINDINGS_CLOSED_BEFORE, (spec.repo_id, spec.pr_number, reopened_at))
    pending: tuple[PendingJob, ...] = ()
    if has_pending:  # only when the PR has pending jobs: most admissions skip this statement
        rows = yield Rows(s.PENDING_JOBS_OF_PR, (spec.repo_id, spec.pr_number))
        pending = tuple(PendingJob(*row) for row in rows)
    requester = spec.details.requested_by
    if manual_recent and isinstance(requester, str):  # the hourly allowance is each requester's own
        manual_recent = (yield Row(s.REQUESTS_BY_SINCE, (spec.repo_id, spec.pr_number, now - 3600, requester)))[0]
    author_today = 0
    if limits_author(decision):
        counted = (spec.installation_id, now - 86400, spec.details.author, is_reply(spec.trigger))
        author_today = (yield Row(s.AUTHOR_SPENT_SINCE, counted))[0]
    thread_recent = 0
    if limits_thread(decision):
        thread = spec.details.thread
        thread_recent = (yield Row(s.THREAD_REPLIES_SINCE, (spec.repo_id, spec.pr_number, now - 3600, thread)))[0]
    refusal = guard_refusal(
        decision,
        manual_recent=manual_recent,
        reviews_today=reviews_today,
        author_today=author_today,
        thread_recent=thread_recent,
    )
    plan = plan_enqueue(
        decision, PRFacts(paused=bool(paused), live_revision_job=live_id, pending=pending, refusal=refusal)
    )
    for followed in plan.follow:
        yield from _follow(followed, spec.head_sha, now=now)
    if plan.insert_state is None:
        if plan.duplicate_of is not None:
            yield from _learn_from_duplicate(decision, plan.duplicate_of)
        return AdmitResult(plan.outcome, job_id=plan.duplicate_of, reason=plan.reason)
    insert = p.insert
    if plan.insert_state != "queued":  # recorded, visibly: a finished job that says why
        values = list(insert)
        values[_INSERT_STATE], values[_INSERT_OUTCOME], values[_INSERT_FINISHED] = (
            plan.insert_state,
            plan.insert_outcome,
            now,
        )
        if plan.insert_state == JobState.CANCELLED:
            values[_INSERT_CANCEL_REASON] = cancel_reason(plan.insert_outcome or "").value
        insert = tuple(values)
    job_id = yield Insert(s.INSERT_JOB_IF_NEW_REVISION, insert)
    if job_id is None:
        # Another host committed a live job with the same revision key first (the key is the last word).
        existing = yield Row(s.SELECT_LIVE_JOB_BY_REVISION, (spec.revision_key,))
        return AdmitResult("duplicate-revision", job_id=existing and existing[0], reason="revision already admitted")
    if plan.superseded_by is not None:
        yield Count(s.SET_SUPERSEDED_BY, (plan.superseded_by, job_id))
    if plan.outcome == "refused":
        assert decision.guard is not None
        if not is_reply(spec.trigger) or (yield Row(s.REFUSALS_OF_ASKER_SINCE, _asker_refusals(spec, now)))[0] <= 1:
            # An answer's refusal is shown once a day per asker (the refusal just recorded is the one counted).
            yield from insert_effects(decision.guard.refusal_effects, now)
    elif plan.insert_state == "queued":
        yield from insert_effects(decision.effects, now)
    superseded: list[int] = []
    newer = f"superseded by job {job_id} for newer head {spec.head_sha}"
    rebased = f"superseded by job {job_id}: a full review of {spec.head_sha} against the new base"
    for ids, outcome in ((plan.supersede, newer), (plan.replaces, rebased)):
        for old in ids:
            if (yield Row(s.SUPERSEDE_IF_PENDING, (job_id, outcome, now, now, old))) is not None:
                yield Count(s.FINISH_SUPERSEDED_ATTEMPT, (now, old))
                superseded.append(old)
    return AdmitResult(plan.outcome, job_id=job_id, superseded=tuple(superseded), reason=plan.reason)


_READ_ACTIONS = frozenset({SWEEP_ACTION, "handover"})  # heads the app read, not events someone caused


def _learn_from_duplicate(decision: Enqueue, job_id: int) -> Procedure[None]:
    """An event for a revision that already has a job (``job_id``) still tells something about it: a running job's
    skip no longer stands, its head replaced the push's ``before``, it was current as late as the event, and a
    webhook means someone is watching (the sweep's queued job asks interactively)."""
    spec = decision.job
    if decision.automatic:
        yield Count(s.POKE_IF_RUNNING, (job_id,))
    if spec.before_sha:  # before event_at moves: it compares with it
        yield Count(s.LEARN_BEFORE, (spec.before_sha, job_id, spec.event_at or 0.0))
    if spec.event_at is not None:
        yield Count(s.RAISE_EVENT_AT_IF_PENDING, (spec.event_at, job_id, spec.event_at))
    action = spec.details.action
    if decision.automatic and action and action not in _READ_ACTIONS:
        yield Count(s.UNSWEEP_IF_QUEUED, (action, job_id))


def _asker_refusals(spec: JobSpec, now: float) -> tuple[object, ...]:
    return (spec.installation_id, now - 86400, spec.details.asked_by or "")


def _follow(job_id: int, head_sha: str, *, now: float) -> Procedure[None]:
    """Move a requested review settled on an older head to the newest one: supersede it, queue its successor."""
    outcome = f"superseded: the pull request moved on to {head_sha}; the requested review follows it"
    if (yield Row(s.SUPERSEDE_IF_PENDING, (None, outcome, now, now, job_id))) is None:
        return
    yield Count(s.FINISH_SUPERSEDED_ATTEMPT, (now, job_id))
    successor = yield Row(s.INSERT_FOLLOWING_REQUEST, (now, now, now, job_id))
    yield Count(s.SET_SUPERSEDED_BY, (successor[0], job_id))


__all__ = [
    "PreparedEnqueue",
    "INSERT_REVISION_KEY",
    "PRECHECK_COUNTS_DAY",
    "PRECHECK_COUNTS_HOUR",
    "PRECHECK_REPO",
    "PRECHECK_PR",
    "PRECHECK_TOGETHER_COLUMNS",
    "prepare_enqueue",
    "lock_order",
    "admit",
    "insert_effects",
    "enqueue",
]
