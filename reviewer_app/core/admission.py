"""What admission can decide (pure): the decisions, the jobs they enqueue, their triggers and priorities, and the budget
guard the admitting transaction checks. Each event's decision over its payload is in core/events.py."""

from __future__ import annotations

from dataclasses import dataclass, field

from reviewer_app.core.job_records import JobDetails

AUTO_ACTIONS = frozenset({"opened", "reopened", "synchronize", "ready_for_review"})

# Automatic triggers: a push to a ready pull request, and a push to a draft (reviewed only where the repository
# asks for drafts). Requested reviews carry "manual:<comment id>" or "rerun:<delivery id>".
TRIGGER_AUTO = "auto"
TRIGGER_DRAFT = "draft"
AUTOMATIC_TRIGGERS = frozenset({TRIGGER_AUTO, TRIGGER_DRAFT})
# A base retargeted ("base:<delivery id>"): a full review of the head, owned by the pull request like a request,
# but skipped while automatic reviews are paused.
TRIGGER_RETARGET = "base:"
# An answer to a person in a thread the app started, or to a question that mentions it ("reply:<comment id>"): not a
# review of any head. A push never supersedes it, and it never counts as the head reviewed (core/replies.py).
TRIGGER_REPLY = "reply:"


def is_reply(trigger: str) -> bool:
    return trigger.startswith(TRIGGER_REPLY)


# Why pending work ends with its episode: the pull request closed, or the app lost access to it. Such a job is
# history; when the pull request (or the installation, or the repository) comes back, its head is owed a review.
PR_CLOSED = "pull request closed"
PR_CLOSED_AT_WORKER = "the pull request was closed"
UNINSTALLED = "the app was uninstalled"
SUSPENDED = "the installation was suspended"
REPO_REMOVED = "the repository was removed from the installation"
NO_ACCESS = "GitHub refused the app's access to the installation (suspended or uninstalled)"

# Lower number, earlier claim. Manual requests go ahead of automatic work.
PRIORITY_MANUAL = 0
PRIORITY_REPLY = 5  # a person is waiting, but the hourly allowance of requested reviews (priority 0) is not theirs
PRIORITY_AUTO = 10


@dataclass(frozen=True)
class JobSpec:
    """Everything a job needs to run, taken from the webhook; the revision key makes it unique."""

    repo_id: int
    repo_full_name: str
    installation_id: int | None
    pr_number: int
    head_sha: str
    trigger: str = TRIGGER_AUTO
    priority: int = PRIORITY_AUTO
    delay_seconds: float = 0.0
    details: JobDetails = field(default_factory=JobDetails)
    # When GitHub says the event happened (the pull request's updated_at, a `/review` comment's created_at), to
    # order heads no push links and closes against what came after them; None when the request carries no time (a
    # Re-run). A request's time orders it against closes only: it never supersedes nor follows by it.
    event_at: float | None = None
    # The head a push replaced (a synchronize's `before`): the ordering signal admission trusts over a one-second
    # updated_at.
    before_sha: str | None = None

    @property
    def revision_key(self) -> str:
        return f"{self.repo_id}:{self.pr_number}:{self.head_sha}:{self.trigger}"


REVIEW_COMMENT_REACTION = "review_reaction"  # an Effect's kind: a reaction on a review comment


@dataclass(frozen=True)
class Effect:
    """A small GitHub write decided at admission (a reaction, a help reply), sent later by the outbox duty."""

    # "reaction" (target: an issue comment's id), "review_reaction" (target: a review comment's id), "comment"
    # (target: PR number), "pause"/"resume" (target: the command's
    # comment id; content: pause_request), applied once the commenter's permission is confirmed, or "installation"
    # (target: installation id, repo_full_name: its account, content: "deleted" or "suspend"), applied once GitHub
    # confirms it.
    kind: str
    installation_id: int
    repo_full_name: str
    target: int
    content: str


@dataclass(frozen=True, kw_only=True)
class Guard:
    """Budget limits checked in the admitting transaction; 0 means no limit."""

    reviews_per_day: int = 0  # per installation
    manual_per_pr_hour: int = 0  # manual re-requests per pull request
    author_per_day: int = 0  # automatic reviews per outside author (details.author) per day
    replies_per_thread_hour: int = 0  # answers per thread (details.thread) per hour
    # Answers have a budget of their own, so questions never refuse a review: per installation and day, and per
    # outside asker (a pull request's author without owner, member or collaborator association) and day.
    answers_per_day: int = 0
    answers_per_asker_day: int = 0
    refusal_effects: tuple[Effect, ...] = ()  # what to send when the guard refuses


@dataclass(frozen=True)
class Enqueue:
    job: JobSpec
    supersede_older_heads: bool = True
    automatic: bool = True  # automatic reviews respect `/review pause`
    guard: Guard | None = None
    effects: tuple[Effect, ...] = ()  # sent once the job is admitted (e.g. the accepting reaction)
    # The head as GitHub showed it to the app just now (the sweep, a worker's hand-over), not an event of the branch:
    # never ordered against pending jobs by their `before` links, which a force-push back makes stale.
    observed: bool = False


@dataclass(frozen=True)
class SetPause:
    repo_id: int
    pr_number: int
    paused: bool
    effects: tuple[Effect, ...] = ()
    command_key: str | None = None  # see ``applied_command_key``: applied once per comment
    # When the command was written (the comment's created_at): of two pauses and resumes, the later written holds,
    # whichever order they arrive or are applied in (a member's waits for the outbox's permission check).
    at: float | None = None


@dataclass(frozen=True)
class Reply:
    """Nothing to queue, only something to say (help, a refusal), or a command to verify before it applies."""

    reason: str
    effects: tuple[Effect, ...] = ()
    # When non-zero, the reply's comment is dropped if the outbox already holds a comment for the same pull request
    # from the last ``quiet_seconds`` (the store decides, in the admitting transaction).
    quiet_seconds: float = 0.0
    command_key: str | None = None  # see ``applied_command_key``: a pause/resume awaiting its permission check


@dataclass(frozen=True)
class InstallationChange:
    """An installation came, went, or was (un)suspended; ``active`` False cancels its pending jobs."""

    installation_id: int
    account: str
    active: bool
    reason: str


@dataclass(frozen=True)
class ReposRemoved:
    installation_id: int
    repo_ids: tuple[int, ...]
    reason: str


@dataclass(frozen=True)
class CancelPR:
    repo_id: int
    pr_number: int
    reason: str
    # When GitHub says the pull request was closed (its updated_at): the close cancels only work it is newer than,
    # so a close delivered after a reopen (GitHub does not deliver in order) does not undo the reopen. None: all.
    closed_at: float | None = None
    # The close event's ``merged``: the findings still open get their fate at merge or close (core/outcomes.py).
    # None: not a close of the pull request (its repository or installation went away).
    merged: bool | None = None


@dataclass(frozen=True)
class Ignore:
    reason: str


Decision = Enqueue | CancelPR | Ignore | SetPause | Reply | InstallationChange | ReposRemoved


def pause_request(repo_id: int, pr_number: int, login: str, at: float | None = None) -> str:
    """The content of a ``pause``/``resume`` effect (its target is the comment): what to change, for whom, and when
    it was written."""
    return f"{repo_id}:{pr_number}:{login}" + (f":{at!r}" if at is not None else "")


def parse_pause_request(content: str) -> tuple[int, int, str, float | None]:
    """(repository id, pull request, login, written at); rows queued before the time was kept have no time (a
    GitHub login never holds a colon)."""
    repo_id, pr_number, login, *at = content.split(":")
    return int(repo_id), int(pr_number), login, float(at[0]) if at else None


def pause_said_key(repo_id: int, pr_number: int) -> str:
    """The settings key that holds when the pause or resume now in force was written."""
    return f"paused_at:{repo_id}:{pr_number}"


def applied_command_key(comment_id: int) -> str:
    """The settings key that records a state-changing command (pause, resume) as applied. The event and delivery
    headers are not signed, so a captured comment body can be sent again under a new delivery id; the comment id is
    in the signed body and unique on GitHub, so a command applies once per comment however often it arrives (a
    replayed ``pause`` cannot pause again after a later ``resume``)."""
    return f"command:{comment_id}"


def pause_key(repo_id: int, pr_number: int) -> str:
    """The settings key that says automatic reviews of one pull request are paused."""
    return f"paused:{repo_id}:{pr_number}"


def quiet_comments(decision: Reply) -> list[Effect]:
    """The comments of a Reply that go out only when the pull request got none from the app lately."""
    return [e for e in decision.effects if e.kind == "comment"] if decision.quiet_seconds else []


def quietened(decision: Reply) -> str:
    minutes = decision.quiet_seconds / 60
    return f"{decision.reason}: not repeated, already answered on this pull request in the last {minutes:g} minutes"


def guard_refusal(
    decision: Enqueue, *, manual_recent: int, reviews_today: int, author_today: int = 0, thread_recent: int = 0
) -> str | None:
    """Why the budget guard refuses this job, or None (pure, over the counts the admitting transaction read)."""
    guard = decision.guard
    if guard is None:
        return None
    if limits_thread(decision) and thread_recent >= guard.replies_per_thread_hour:
        return f"limit of {guard.replies_per_thread_hour} answers per thread per hour reached"
    if guard.manual_per_pr_hour and not decision.automatic and manual_recent >= guard.manual_per_pr_hour:
        return f"limit of {guard.manual_per_pr_hour} requested reviews per pull request per hour reached"
    answer = is_reply(decision.job.trigger)
    if guard.reviews_per_day and decision.job.installation_id is not None and reviews_today >= guard.reviews_per_day:
        kind = "answers" if answer else "reviews"
        return f"limit of {guard.reviews_per_day} {kind} per day for this installation reached"
    if limits_author(decision) and author_today >= guard.author_per_day:
        author = decision.job.details.author
        if answer:
            return f"limit of {guard.author_per_day} answers per day to {author} reached"
        return f"limit of {guard.author_per_day} automatic reviews per day of pull requests by {author} reached"
    return None


# Associations that say nothing of write access, or say there is none: a fork's author. Automatic reviews of their
# pull requests have a daily limit per author, so one account cannot spend an installation's day.
OUTSIDE_ASSOCIATIONS = frozenset({"CONTRIBUTOR", "FIRST_TIME_CONTRIBUTOR", "FIRST_TIMER", "NONE", "MANNEQUIN"})


def limits_author(decision: Enqueue) -> bool:
    """Whether the per-author limit applies to this decision (the store counts the author's jobs only then)."""
    return bool(decision.guard and decision.guard.author_per_day and decision.job.details.author)


def limits_thread(decision: Enqueue) -> bool:
    """Whether the per-thread limit applies (the store counts the thread's answers only then)."""
    return bool(decision.guard and decision.guard.replies_per_thread_hour and decision.job.details.thread)
