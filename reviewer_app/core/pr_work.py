"""A pull request's review work as one state machine: what an admitted request means given the PR's known jobs.

Two questions never share a key here. "Have I seen this delivery?" is the delivery id's job (GitHub's retries and
redeliveries), answered before this module is asked. "What does this PR need now?" is this module's: a pure
function over the request and the facts the store read about the pull request inside the admitting transaction.

The rules (docs/architecture.md draws them):

- A job is *live* while it is queued or running, or once it succeeded. A request whose revision (PR, head,
  trigger) has a live job is a duplicate. A job that ended any other way (cancelled because the PR closed or the
  app went away, superseded, failed) is history: it never blocks a head that is current again (close and reopen,
  force-push back to an earlier head, an installation back from suspension).
- Heads are ordered by what GitHub says about the branch, not by a one-second timestamp when a better signal
  exists: a ``synchronize`` names the head it replaced (``before``). Only when neither side names the other are
  the PR's ``updated_at`` times compared, and a tie orders nothing; requests with no time at all are taken in the
  order they reached the PR's admission lock. A pending automatic job is superseded only by
  a head known to be newer; a request known to be older than a pending one is recorded as superseded by it. When
  the order is unknown both stay queued: the worker reads the PR's real head before it spends anything, and the
  job of a head that is no longer current ends superseded there, handing the head it read over (an *observed*
  head, as the sweep's: current at the time, so neither superseded by a pending job nor superseding one).
- A requested review (``/review``, Re-run) belongs to its requester and to the pull request, not to a head: a push
  never supersedes it. One that already settled on a head that is no longer current *follows* the PR: it is
  superseded by a successor with the same request (``full`` kept) that reviews the newest head.
- Automatic work on a paused pull request is recorded as skipped (its check run says why); requests still follow.
  A retargeted base (trigger ``base:<delivery>``) is both: it follows the pull request like a request, and is
  skipped while paused like automatic work.
- An answer in a thread (trigger ``reply:<comment>``) is about the thread, not a head: a push neither supersedes it
  nor moves it, and it never counts as a review of the head.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from reviewer_app.core.admission import AUTOMATIC_TRIGGERS, TRIGGER_DRAFT, TRIGGER_RETARGET, Enqueue, is_reply

# How a job ended that still answers for its revision: a request with the same revision key is a duplicate.
LIVE_STATES = ("queued", "running", "succeeded")
PENDING_STATES = ("queued", "running")

# How a review skipped because its pull request was a draft ends (the worker adds how to get one): once the pull
# request is ready, such a skip no longer answers for its head (the sweep reviews it if `ready_for_review` is lost).
DRAFT_SKIP = "skipped: draft pull request"
PAUSED_SKIP = "skipped: automatic reviews are paused on this pull request; comment /review resume to resume them"


@dataclass(frozen=True, slots=True)
class PendingJob:
    """One queued or running job of the pull request, as the admitting transaction read it."""

    id: int
    head_sha: str
    trigger: str
    state: str
    event_at: float | None = None
    before_sha: str | None = None

    @property
    def requested(self) -> bool:
        return self.trigger not in AUTOMATIC_TRIGGERS

    @property
    def reply(self) -> bool:
        return is_reply(self.trigger)


@dataclass(frozen=True, slots=True)
class PRFacts:
    """What the store knows about the pull request when a request arrives (read under the PR's admission lock)."""

    paused: bool = False
    live_revision_job: int | None = None  # a live job with the request's revision key
    pending: tuple[PendingJob, ...] = ()
    refusal: str | None = None  # why the budget guard refuses the request (core.admission.guard_refusal)


@dataclass(frozen=True, slots=True)
class Plan:
    """What admitting a request does to the pull request's jobs."""

    outcome: str  # "enqueued", "duplicate-revision", "refused", "skipped", "superseded"
    reason: str = ""
    insert_state: str | None = None  # the new job's state, None when no job is recorded
    insert_outcome: str | None = None  # the new job's outcome when it is recorded already finished
    superseded_by: int | None = None  # a newer pending job that makes the new one pointless
    supersede: tuple[int, ...] = ()  # pending automatic jobs the new head makes pointless
    follow: tuple[int, ...] = ()  # requested reviews settled on an older head: they move to the newest head
    duplicate_of: int | None = None
    # Queued automatic jobs of the same head that a full review against a new base makes pointless (a retarget).
    replaces: tuple[int, ...] = ()


def order(new_head: str, new_before: str | None, new_at: float | None, old: PendingJob) -> int:
    """+1 when the new head is known to be newer than ``old``'s, -1 when known older, 0 when unknown (pure)."""
    if new_head == old.head_sha:
        return 0
    if new_before and new_before == old.head_sha:
        return 1
    if old.before_sha and old.before_sha == new_head:
        return -1
    if new_at is None and old.event_at is None:
        return 1  # nothing but the order of arrival at this PR's admission lock (no timestamps at all)
    if new_at is not None and old.event_at is not None and new_at != old.event_at:
        return 1 if new_at > old.event_at else -1
    return 0  # a tie within GitHub's one-second resolution, or one side without a time: unknown


def plan_enqueue(decision: Enqueue, facts: PRFacts) -> Plan:
    """The plan for one Enqueue decision over the PR's facts (pure; the store applies it in one transaction)."""
    spec = decision.job
    before = spec.before_sha
    event_at = spec.event_at
    automatic = decision.automatic and (spec.trigger in AUTOMATIC_TRIGGERS or spec.trigger.startswith(TRIGGER_RETARGET))
    follow: tuple[int, ...] = ()
    if spec.head_sha and decision.supersede_older_heads:
        # A head was pushed: requested reviews that settled on another head follow it (unless it is known older).
        follow = tuple(
            p.id
            for p in facts.pending
            if p.requested
            and not p.reply
            and p.head_sha
            and p.head_sha != spec.head_sha
            and order(spec.head_sha, before, event_at, replace(p, event_at=None)) >= 0
        )
    if facts.live_revision_job is not None:
        return Plan(
            "duplicate-revision", "revision already admitted", follow=follow, duplicate_of=facts.live_revision_job
        )
    if automatic and facts.paused:
        return Plan(
            "skipped",
            "automatic reviews are paused on this pull request",
            insert_state="cancelled",
            insert_outcome=PAUSED_SKIP,
            follow=follow,
        )
    if facts.refusal is not None:
        return Plan("refused", facts.refusal, insert_state="cancelled", insert_outcome=f"refused: {facts.refusal}")
    if spec.trigger.startswith(TRIGGER_RETARGET):
        return _plan_retarget(spec.head_sha, facts, follow)
    if not (spec.head_sha and decision.supersede_older_heads):
        return Plan("enqueued", insert_state="queued", follow=follow)
    if decision.observed:
        # The head GitHub shows now: current, whatever older events' `before` links say (A, B, then back to A makes
        # "B came after A" stale). It supersedes nothing either: a push may have landed since it was read. A pending
        # job of another head finds out for itself when it reads the head.
        return Plan("enqueued", insert_state="queued", follow=follow)
    supersede: list[int] = []
    newer: PendingJob | None = None
    for p in facts.pending:
        if p.requested:
            continue  # requests are never superseded by a push (they follow it, above), nor are answers
        if p.head_sha == spec.head_sha:
            # The same head under another trigger: a waiting draft job is replaced by the ready one, anything else
            # stays (a running draft job of this head finishes; the new job then finds the head reviewed).
            if p.trigger == TRIGGER_DRAFT and p.state == "queued" and spec.trigger != TRIGGER_DRAFT:
                supersede.append(p.id)
            continue
        rank = order(spec.head_sha, before, event_at, p)
        if rank > 0 or (
            p.trigger == TRIGGER_DRAFT and p.state == "queued" and spec.trigger != TRIGGER_DRAFT and rank >= 0
        ):
            supersede.append(p.id)
        elif rank < 0 and newer is None:
            newer = p
    if newer is not None and not supersede:
        return Plan(
            "superseded",
            f"a newer head {newer.head_sha} is already queued (job {newer.id})",
            insert_state="superseded",
            insert_outcome=f"superseded by job {newer.id} for newer head {newer.head_sha}",
            superseded_by=newer.id,
            follow=(),
        )
    return Plan("enqueued", insert_state="queued", supersede=tuple(supersede), follow=follow)


def _plan_retarget(head_sha: str, facts: PRFacts, follow: tuple[int, ...]) -> Plan:
    """A base changed: one full review of the head against the base it has when the review runs. A retarget already
    queued is that review (it reads the base then: changing the base and back costs one review, not three); a queued
    automatic review of the same head is replaced by it. Running jobs are left alone (they may have read the old
    base)."""
    queued = [p for p in facts.pending if p.state == "queued" and not p.reply]
    earlier = next((p for p in queued if p.trigger.startswith(TRIGGER_RETARGET)), None)
    if earlier is not None:
        reason = f"a review against the new base is queued already (job {earlier.id}); it reads the base when it runs"
        return Plan("duplicate-revision", reason, follow=follow, duplicate_of=earlier.id)
    same_head = tuple(p.id for p in queued if p.trigger in AUTOMATIC_TRIGGERS and p.head_sha == head_sha)
    return Plan("enqueued", insert_state="queued", follow=follow, replaces=same_head)
