"""Whether a review job is still wanted, and for whom: pure decisions over the facts review/gate.py gathers.

A job is asked when it starts (who asked for it, what the repository's settings say of automatic work, whether its
head was reviewed already, whether its request was answered by an earlier job) and again before each model call and
before it publishes (the pull request closed, or its head moved on). Pausing is decided at admission, before a job
exists (core/pr_work.py).

Each decision returns why not (``Skip``), not yet (``Wait``), the head it moved on to (``Moved``), or None: wanted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reviewer_app.core.admission import PR_CLOSED_AT_WORKER, TRIGGER_AUTO, TRIGGER_DRAFT
from reviewer_app.core.cancel_reasons import COVERED_PREFIX
from reviewer_app.core.commands import WRITE_PERMISSIONS
from reviewer_app.core.markers import parse_markers
from reviewer_app.core.pr_work import DRAFT_SKIP

CONFIG_PATH = (
    ".github/reviewer.yml"  # a repository's review settings, read from its base branch (review/repo_config.py)
)
NO_INSTALLATION = "the event named no installation, and no installation of the app holds this repository"
AUTO_OFF_TEXT = f"skipped: automatic reviews are turned off in {CONFIG_PATH}; comment /review to ask for one"
DRAFT_SKIP_TEXT = (
    f"{DRAFT_SKIP}; it is reviewed when marked ready for review (or set `drafts: true` in {CONFIG_PATH}, or comment "
    "/review)"
)
# How long after its admission a job takes a read of an older head for GitHub's lag rather than the truth.
STALE_READ_SECONDS = 15.0


@dataclass(frozen=True)
class Skip:
    """Not reviewed: the job ends, and its check run says why (skipped, refused, or covered by another review)."""

    reason: str


@dataclass(frozen=True)
class Wait:
    """Not yet: the job looks again shortly."""

    reason: str


@dataclass(frozen=True)
class Moved:
    """The pull request's head moved on to ``head``: the job is superseded, and the head it moved to handed over."""

    head: str


def requester_refusal(login: str, permission: str) -> Skip | None:
    """A requested review (`/review` by someone other than the repository's owner) runs only for people with write
    access; ``permission`` is what GitHub says of ``login`` ("unknown" when it could not say: refused)."""
    if permission in WRITE_PERMISSIONS:
        return None
    return Skip(
        f"skipped: {login} may not request reviews here ({permission} access; reviews can be requested by people "
        "with write access)"
    )


def asker_refusal(login: str, permission: str) -> Skip | None:
    """Someone whose association says little of write access is answered only when GitHub says they have it."""
    if permission in WRITE_PERMISSIONS:
        return None
    return Skip(
        f"skipped: {login} is not the pull request's author and has {permission} access (answers go to the author "
        "and to people with write access)"
    )


def settings_refusal(*, draft: bool, auto: bool, drafts: bool) -> Skip | None:
    """What the repository's settings say of automatic work (a push, a draft's push, a retargeted base): skipped,
    visibly, where automatic reviews are turned off, or for a draft where drafts are not reviewed."""
    if not auto:
        return Skip(AUTO_OFF_TEXT)
    if draft and not drafts:
        return Skip(DRAFT_SKIP_TEXT)
    return None


@dataclass(frozen=True)
class AutomaticFacts:
    """What an automatic job is decided on: the pull request and the repository's settings as they are now, and
    what the store knows of the head."""

    trigger: str
    head_sha: str
    draft: bool
    auto: bool
    drafts: bool
    draft_job: int | None = None  # a running draft's job of this head (looked for by a ready PR's push only)
    # This job published its own review already (an attempt that then waited on GitHub, or died before finishing):
    # it goes on to find it by its marker, so its own review does not make it "covered".
    published: bool = False
    answered: bool = False  # this job holds a stored model answer
    last_reviewed: str | None = None  # the PR's last reviewed head the store knows (not read once published)


def automatic_verdict(facts: AutomaticFacts) -> Skip | Wait | None:
    """An automatic review (`/review` and Re-run are never decided here) as the pull request stands now."""
    refused = settings_refusal(draft=facts.draft, auto=facts.auto, drafts=facts.drafts)
    if refused is not None:
        return refused
    if facts.trigger == TRIGGER_DRAFT and not facts.draft:
        # Marked ready since: its ready_for_review job (or the sweep, if that webhook went missing) reviews it.
        return Skip("skipped: the pull request is no longer a draft; its ready-for-review review covers this head")
    if facts.trigger == TRIGGER_AUTO and facts.draft_job is not None:
        # Marked ready while its draft's review of this head runs: wait for it, then this job finds the head reviewed
        # (or reviews it, if the draft's job was skipped). Never two reviews of one head.
        return Wait(f"waiting for the draft's review of this head (job {facts.draft_job}) to finish")
    if not facts.published and facts.last_reviewed == facts.head_sha:
        # Reviewed as a draft (drafts: true), then marked ready at the same head: nothing new to review. "covered",
        # not "skipped": the check run (if one was opened) says success, so a later run on this head does not hide
        # the review's own check behind a grey "skipped".
        return Skip(f"{COVERED_PREFIX}commit {facts.head_sha} was already reviewed; comment /review to review it again")
    return None


def looks_on_github(facts: AutomaticFacts) -> bool:
    """Whether GitHub's markers are read before an automatic review is paid for: the store remembers no review of
    the pull request and this job has none of its own. What the store knows covers the ordinary case; the markers
    cover what it no longer knows (a signed delivery replayed after its jobs were pruned, a database restored from an
    old backup)."""
    return not facts.published and not facts.answered and facts.last_reviewed is None


def reviewed_on_github(head_sha: str, reviewed: bool) -> Skip | None:
    """A head the app's bot reviewed already (by the markers on GitHub) is not reviewed again."""
    if not reviewed:
        return None
    return Skip(
        f"{COVERED_PREFIX}commit {head_sha} was already reviewed (found on GitHub); comment /review to review it again"
    )


def review_of_jobs(reviews: Iterable[Mapping[str, Any]], *, bot_login: str, job_ids: Iterable[int]) -> int | None:
    """The id of a review by the app's bot carrying the marker of one of ``job_ids``, or None."""
    ids = set(job_ids)
    for review in reviews:
        if str((review.get("user") or {}).get("login")) == bot_login and any(
            m.job_id in ids for m in parse_markers(review.get("body"))
        ):
            return int(review["id"])
    return None


def request_answered(review_id: int | None) -> Skip | None:
    """A requested review that followed the pull request to a newer head ends when an earlier job of the same request
    published its review after all (its POST was in flight when the push moved the request on): one request, one
    review."""
    if review_id is None:
        return None
    return Skip(f"{COVERED_PREFIX}the request was answered by review {review_id} of an earlier commit")


def pull_closed(state: object) -> Skip | None:
    """A pull request that is not open any more ends its work (a reopen admits its head again)."""
    return None if state == "open" else Skip(PR_CLOSED_AT_WORKER)


def head_verdict(*, state: object, current: str, head_sha: str, older: bool) -> Skip | Wait | Moved | None:
    """The pull request as read now against the job's head: closed, moved on (``current``), or a read that shows a
    head the store knows this one replaced (``older``: GitHub's reads are eventually consistent, and a stale read
    never undoes newer knowledge; read again shortly)."""
    closed = pull_closed(state)
    if closed is not None:
        return closed
    if not current or current == head_sha:
        return None
    if older:
        return Wait(
            f"GitHub still shows {current[:12]}, which this job's head replaced; reading the pull request again"
        )
    return Moved(current)


def reads_may_lag(*, before_sha: str | None, created_at: float, now: float) -> bool:
    """Whether a read of another head may be GitHub's lag: for a push that named the head it replaced, until
    STALE_READ_SECONDS after its job was admitted; past that, the read wins."""
    return bool(before_sha) and now - created_at <= STALE_READ_SECONDS


def known_older(head: str, *, job_head: str, job_before: str, pushes: Sequence[tuple[str, str]]) -> bool:
    """Whether ``head`` is older than ``job_head`` by the pushes' own links (``pushes``: each push's head and the head
    it named as replaced): following the replaced heads back from ``job_head`` reaches ``head``, and no push of
    ``head`` names one of the heads passed on the way (a force-push back to it). Event times are not used: a
    handed-over head carries the time it was read, not the time it was pushed."""
    replaced: dict[str, set[str]] = {}
    for pushed, before in pushes:
        replaced.setdefault(pushed, set()).add(before)
    replaced.setdefault(job_head, set()).add(job_before)
    newer, step, reached = {job_head}, {job_before}, False
    while step and len(newer) < 50:
        reached = reached or head in step
        step -= {head}  # not walked through: only the heads newer than it are collected
        newer |= step
        step = {b for h in step for b in replaced.get(h, ())} - newer
    return reached and not (replaced.get(head, set()) & newer)
