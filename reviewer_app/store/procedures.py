"""The store's multi-statement operations, written once as procedures over named statements (statements.py).

A procedure is a generator: it yields one step at a time (a statement to run, or a wake-up to send after the commit)
and receives the step's result. It never touches a connection, so each driver runs it in its own terms: SQLite in
its writer thread, inside a group-committed transaction; PostgreSQL on a pooled connection, awaiting each step. A
statement a dialect does not need (``Dialects(..., None)``) is skipped and answers None."""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

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
from reviewer_app.core.pr_work import PAUSED_SKIP, PendingJob, PRFacts, plan_enqueue
from reviewer_app.core.states import JobState
from reviewer_app.store import statements as s
from reviewer_app.store.base import PROGRESS_COLUMNS, AdmitResult, Delivery, Job, Lease, Usage

T = TypeVar("T")


# -- the steps a procedure yields ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rows:
    """Run a statement; every row."""

    stmt: s.Statement
    params: Sequence[Any] = ()


@dataclass(frozen=True, slots=True)
class Row:
    """Run a statement; its first row, or None."""

    stmt: s.Statement
    params: Sequence[Any] = ()


@dataclass(frozen=True, slots=True)
class Count:
    """Run a statement; the number of rows it changed."""

    stmt: s.Statement
    params: Sequence[Any] = ()


@dataclass(frozen=True, slots=True)
class Insert:
    """Insert one row; its id (SQLite: the row id; PostgreSQL: what ``RETURNING id`` gives, None on a conflict)."""

    stmt: s.Statement
    params: Sequence[Any] = ()


@dataclass(frozen=True, slots=True)
class Many:
    """Run a statement once per parameter tuple."""

    stmt: s.Statement
    params: Sequence[Sequence[Any]] = ()


@dataclass(frozen=True, slots=True)
class Later:
    """A write no later step of the transaction reads back: a driver may hold it and run it with the others of its
    statement just before the commit (PostgreSQL: one pipelined ``executemany`` per batch)."""

    stmt: s.Statement
    params: Sequence[Any] = ()


@dataclass(frozen=True, slots=True)
class Wake:
    """After the commit, wake whoever waits for claimable work. ``other_hosts``: only other hosts need to know (a
    hand-back or a rescue: this host's dispatcher already knows), so SQLite, one host, does nothing."""

    other_hosts: bool = False


Step = Rows | Row | Count | Insert | Many | Later | Wake
Procedure = Generator[Step, Any, T]


def usage_params(u: Usage | None) -> tuple[str | None, int, int, int, int]:
    if u is None:
        return (None, 0, 0, 0, 0)
    return (u.model or None, u.input_tokens, u.output_tokens, u.cache_creation_tokens, u.cache_read_tokens)


# -- admission ----------------------------------------------------------------------------------------------


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


# -- dispatch -----------------------------------------------------------------------------------------------


def claim(*, owner: str, limit: int, now: float, lease_seconds: float) -> Procedure[list[Any]]:
    """The claimed rows, whole (a worker starts without reading its job again), in id order. The caller makes leases
    of them after the commit: on SQLite that keeps the parsing out of the writer thread, the drain's serial part."""
    rows = yield Rows(s.CLAIM_QUEUED, (owner, now + lease_seconds, now, limit))
    rows = sorted(rows, key=lambda r: r["id"])
    if rows:
        yield Many(s.RECORD_CLAIMED_ATTEMPTS, [(r["id"], r["attempts"], owner, r["lease_token"], now) for r in rows])
    return rows


def lease_of(row: Any, owner: str) -> Lease:
    """A claimed row as the worker's lease, the job with it."""
    return Lease(row["id"], row["lease_token"], owner, row["attempts"], row["lease_expires_at"], Job.from_row(row))


def renew_leases(leases: Sequence[Lease], *, now: float, lease_seconds: float) -> Procedure[set[str]]:
    held = json.dumps([{"id": le.job_id, "token": le.token} for le in leases])
    rows = yield Rows(s.RENEW_MANY_IF_LEASE_HELD, (now + lease_seconds, now, held))
    return {r[0] for r in rows}


def renew_lease(lease: Lease, *, now: float, expires: float) -> Procedure[bool]:
    return (yield Count(s.RENEW_IF_LEASE_HELD, (expires, now, lease.job_id, lease.token))) == 1


@dataclass(frozen=True, slots=True)
class Finish:
    """One fenced finish: the job leaves `running` for ``state`` only while ``lease`` still holds it."""

    lease: Lease
    state: str
    outcome: str
    error: str | None
    now: float
    usage: tuple[str | None, int, int, int, int]

    @property
    def cancel_reason(self) -> str | None:
        return cancel_reason(self.outcome).value if self.state == JobState.CANCELLED else None


def finish(item: Finish) -> Procedure[bool]:
    """One fenced finish, on any dialect: the job leaves `running` only while the lease holds; the attempt's history
    row is closed with the state, or with 'lease_lost'. True if the lease still held the job."""
    lease = item.lease
    done = (
        yield Count(
            s.FINISH_IF_LEASE_HELD,
            (item.state, item.outcome, item.cancel_reason, item.error, item.now, item.now, lease.job_id, lease.token),
        )
    ) == 1
    yield Count(
        s.FINISH_ATTEMPT, (item.now, item.state if done else "lease_lost", item.error, *item.usage, lease.token)
    )
    return done


def finish_together(batch: Sequence[Finish]) -> Procedure[set[str]]:
    """Every finish of ``batch`` together: one statement on PostgreSQL (one round trip for all), two on SQLite (the
    jobs, then their attempts); each job leaves `running` only under its own token. The tokens that held their job.
    On SQLite a single finish, or a batch naming one job twice (a stale lease beside the current one), goes one at a
    time."""
    batch = sorted(batch, key=lambda f: f.lease.job_id)  # rows locked in id order on every host
    rows = [
        (f.lease.job_id, f.lease.token, f.state, f.outcome, f.error, f.now, *f.usage, f.cancel_reason) for f in batch
    ]
    tokens = yield Rows(s.FINISH_JOBS_AND_ATTEMPTS, [list(c) for c in zip(*rows, strict=True)])
    if tokens is not None:
        return {r[0] for r in tokens}
    if len(batch) == 1 or len({f.lease.job_id for f in batch}) < len(batch):
        held: set[str] = set()
        for f in batch:
            if (yield from finish(f)):
                held.add(f.lease.token)
        return held
    finished = yield Rows(s.FINISH_JOBS_FROM_JSON, (orjson.dumps(rows).decode(),))
    ids = {r[0] for r in finished}
    closed = [
        (f.lease.token, f.now, f.state if f.lease.job_id in ids else "lease_lost", f.error, *f.usage) for f in batch
    ]
    yield Count(s.CLOSE_ATTEMPTS_FROM_JSON, (orjson.dumps(closed).decode(),))
    return {f.lease.token for f in batch if f.lease.job_id in ids}


def retry(
    lease: Lease, *, now: float, at: float, error: str, counts_attempt: bool, usage: Usage | None
) -> Procedure[bool]:
    held = (
        yield Count(s.REQUEUE_IF_LEASE_HELD, (at, error, 0 if counts_attempt else 1, now, lease.job_id, lease.token))
    ) == 1
    outcome = ("retry" if counts_attempt else "deferred") if held else "lease_lost"
    yield Count(s.FINISH_ATTEMPT, (now, outcome, error, *usage_params(usage), lease.token))
    if held and at <= now:
        yield Wake(other_hosts=True)  # handed back for another host to take now (shutdown)
    return held


def progress_update(lease: Lease, *, now: float, fields: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
    """The progress checkpoint as one statement (the columns a worker may set), written only while this attempt
    holds the lease; an unknown column is refused before anything runs."""
    unknown = set(fields) - PROGRESS_COLUMNS
    if unknown:
        raise ValueError(f"not a progress column: {sorted(unknown)}")
    cols = sorted(fields)
    values = [fields[c].to_json() if c in ("answer", "details") else fields[c] for c in cols]
    assignments = ", ".join(f"{c} = ?" for c in cols)
    query = f"UPDATE jobs SET {assignments}, updated_at = ? WHERE id = ? AND lease_token = ? AND state = 'running'"
    return query, (*values, now, lease.job_id, lease.token)


def skip_if_unpoked(lease: Lease, *, pokes: int, now: float, outcome: str) -> Procedure[bool]:
    """End an automatic job skipped, only while ``lease`` holds it and no event for its revision came since it read
    ``pokes``; its attempt is closed with it."""
    why = cancel_reason(outcome).value
    done = (
        yield Count(s.SKIP_IF_LEASE_HELD_AND_UNPOKED, (outcome, why, now, now, lease.job_id, lease.token, pokes))
    ) == 1
    if done:
        yield Count(s.FINISH_ATTEMPT, (now, JobState.CANCELLED.value, None, *usage_params(None), lease.token))
    return done


def record_usage(lease: Lease, usage: Usage) -> Procedure[bool]:
    return (yield Count(s.ADD_ATTEMPT_USAGE, (*usage_params(usage), lease.token))) == 1


def rescue_expired(*, now: float) -> Procedure[list[int]]:
    """Jobs whose lease expired back to the queue, or failed when no attempt is left."""
    rescued: list[int] = []
    requeued = False
    for job_id, token, attempts, max_attempts in (yield Rows(s.SELECT_EXPIRED_FOR_RESCUE, (now,))):
        error = f"lease expired during attempt {attempts} (worker crashed, was killed or hung)"
        if attempts >= max_attempts:
            changed = yield Count(s.EXPIRE_TO_FAILED, (error, f"failed: {error}", now, now, job_id, token))
        else:
            changed = yield Count(s.EXPIRE_TO_QUEUE, (now, error, now, job_id, token))
            requeued = True
        if changed == 1:
            rescued.append(job_id)
            yield Count(s.FINISH_ATTEMPT, (now, "lease_expired", error, None, 0, 0, 0, 0, token))
    if requeued:
        yield Wake(other_hosts=True)
    return rescued


# -- one-statement writes, and the few that read before they write -----------------------------------------


def changes(stmt: s.Statement, params: Sequence[Any]) -> Procedure[int]:
    """One statement; the rows it changed."""
    return (yield Count(stmt, params))


def many(stmt: s.Statement, params: Sequence[Sequence[Any]]) -> Procedure[None]:
    """One statement per parameter tuple, in one transaction."""
    yield Many(stmt, params)


def returns_row(stmt: s.Statement, params: Sequence[Any]) -> Procedure[bool]:
    """One guarded statement with ``RETURNING``: whether its guard let it write."""
    return (yield Row(stmt, params)) is not None


def claim_once(key: str, value: str) -> Procedure[bool]:
    """Whether this caller is the first to claim ``key`` (any host): one write of a kind happens once."""
    return (yield Count(s.CLAIM_COMMAND_IF_NEW, (key, value))) == 1


def set_setting(key: str, value: str) -> Procedure[None]:
    yield Count(s.UPSERT_SETTING, (key, value))
    yield Wake()  # a resumed queue has claimable work at once


def operator_retry(job_id: int, *, now: float) -> Procedure[bool]:
    retried = (yield Count(s.OPERATOR_RETRY, (now, now, job_id))) == 1
    if retried:
        yield Wake()
    return retried


def claim_redelivery(guid: str, delivery_id: int, *, owner: str, now: float, stale_before: float) -> Procedure[bool]:
    if (yield Row(s.SELECT_DELIVERY_ID, (guid,))) is not None:
        return False
    return (yield Row(s.CLAIM_REDELIVERY_IF_UNCLAIMED, (guid, delivery_id, owner, now, stale_before))) is not None


def prune(before: float, batch: int) -> Procedure[int]:
    """Up to ``batch`` terminal jobs finished before ``before`` (with their attempts), deliveries received before it
    and effects sent before it; the number deleted."""
    ids = [r[0] for r in (yield Rows(s.PRUNABLE_JOBS, (before, batch)))]
    removed = 0
    if ids:
        yield Count(s.forget_pruned_superseders(len(ids)), ids)
        yield Count(s.delete_pruned_attempts(len(ids)), ids)
        yield Count(s.delete_pruned_batch_requests(len(ids)), ids)
        removed += yield Count(s.delete_pruned_jobs(len(ids)), ids)
    removed += yield Count(s.PRUNE_DELIVERIES, (before, batch))
    return removed + (yield Count(s.PRUNE_FINISHED_EFFECTS, (before, batch)))


# -- Message Batches ----------------------------------------------------------------------------------------


def settle_batch_request(
    custom_id: str, *, state: str, result: str | None, error: str | None, usage: Usage | None, now: float
) -> Procedure[int | None]:
    """Record a batch's report on one request (once) and wake its job when the request was still pending; the job's
    id, or None when the request was reported before or is not ours."""
    tokens = usage_params(usage)[1:]
    row = yield Row(s.SETTLE_BATCH_REQUEST_IF_OPEN, (state, result, error, now, *tokens, custom_id))
    if row is None:
        return None
    job_id, settled_state = row[0], row[1]
    if settled_state == state and (yield Count(s.WAKE_QUEUED_JOB, (now, now, job_id, now))) == 1:
        yield Wake()
    return int(job_id)


def withdraw_requests_of_ended_jobs() -> Procedure[list[str]]:
    """Withdraw the pending requests of jobs that ended while batched; the batches left with no pending request
    (nothing of theirs will be used: worth cancelling)."""
    touched = sorted({r[0] for r in (yield Rows(s.WITHDRAW_REQUESTS_OF_ENDED_JOBS))})
    idle: list[str] = []
    for batch_id in touched:
        if (yield Row(s.PENDING_REQUESTS_OF_BATCH, (batch_id,)))[0] == 0:
            idle.append(batch_id)
    return idle
