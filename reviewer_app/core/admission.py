"""Admission decisions: what a webhook asks of the queue, decided over the payload alone (no I/O)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from reviewer_app.core.job_records import JobDetails
from reviewer_app.core.timestamps import parse_time

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


class MalformedPayload(ValueError):
    """The payload lacks a field the event must carry; the receiver answers 400."""


# The signature covers the body, not the X-GitHub-Event header: a captured body relabelled as another event must not
# be read as that event (an issue_comment sent as `installation` was read as "uninstalled"). Each event's top-level
# objects as GitHub sends them, and the objects of the other events, which it never carries.
_EVENT_OBJECTS: dict[str, tuple[str, ...]] = {
    "pull_request": ("pull_request", "repository"),
    "issue_comment": ("issue", "comment", "repository"),
    "pull_request_review_comment": ("pull_request", "comment", "repository"),
    "check_run": ("check_run", "repository"),
    "check_suite": ("check_suite", "repository"),
    "installation": ("installation",),
    "installation_repositories": ("installation", "repositories_added", "repositories_removed"),
}
# `repository` belongs to every repository event and to no installation event.
_FOREIGN_OBJECTS = frozenset(
    {
        "pull_request",
        "issue",
        "comment",
        "check_run",
        "check_suite",
        "review",
        "repository",
        "repositories_added",
        "repositories_removed",
    }
)


def require_shape(event: str, payload: dict[str, Any]) -> None:
    """Raise MalformedPayload unless the payload has the objects ``event`` carries and none that only other events
    carry (pure)."""
    expected = _EVENT_OBJECTS.get(event)
    if expected is None:
        return
    missing = [key for key in expected if key not in payload]
    foreign = sorted(key for key in _FOREIGN_OBJECTS - set(expected) if key in payload)
    if missing or foreign:
        problem = f"has no {', '.join(missing)}" if missing else f"carries {', '.join(foreign)}"
        raise MalformedPayload(f"not a {event} payload: it {problem}")


def _text(value: Any) -> str | None:
    """``value`` when it is a non-empty string (an optional part of a payload), else None."""
    return value if isinstance(value, str) and value else None


def _whole(value: Any) -> int | None:
    return value if _is_int(value) else None


def _obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one: for the optional parts of a payload."""
    return value if isinstance(value, dict) else {}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _get(payload: dict[str, Any], *path: str) -> Any:
    node: Any = payload
    for key in path:
        if not isinstance(node, dict) or key not in node:
            raise MalformedPayload(f"payload has no {'.'.join(path)}")
        node = node[key]
    return node


def _int(payload: dict[str, Any], *path: str) -> int:
    value = _get(payload, *path)
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedPayload(f"payload field {'.'.join(path)} is not an integer")
    return value


def _str(payload: dict[str, Any], *path: str) -> str:
    value = _get(payload, *path)
    if not isinstance(value, str) or not value:
        raise MalformedPayload(f"payload field {'.'.join(path)} is not a non-empty string")
    return value


def decide_pull_request(
    action: str,
    payload: dict[str, Any],
    *,
    debounce_seconds: float = 0.0,
    guard: Guard | None = None,
    delivery_id: str = "",
) -> Decision:
    """The decision for a ``pull_request`` event."""
    repo_id = _int(payload, "repository", "id")
    number = _int(payload, "pull_request", "number")
    if action == "closed":
        return CancelPR(
            repo_id, number, PR_CLOSED, closed_at=parse_time(_get(payload, "pull_request").get("updated_at"))
        )
    if action == "edited":
        return _decide_retarget(payload, guard=guard, delivery_id=delivery_id)
    if action not in AUTO_ACTIONS:
        return Ignore(f"pull_request action {action!r} does not start a review")
    draft = _get(payload, "pull_request").get("draft") is True
    if _get(payload, "pull_request").get("state", "open") != "open":
        return Ignore("pull request is not open")
    installation = payload.get("installation")
    installation_id = installation.get("id") if isinstance(installation, dict) else None
    spec = JobSpec(
        repo_id=repo_id,
        repo_full_name=_str(payload, "repository", "full_name"),
        installation_id=installation_id if isinstance(installation_id, int) else None,
        pr_number=number,
        head_sha=_str(payload, "pull_request", "head", "sha"),
        # A draft's job has its own revision key: whether drafts are reviewed is the repository's setting, which
        # only the worker reads (`drafts:` in .github/reviewer.yml), and ready_for_review must still get a job of
        # its own for the same head when the draft's job was skipped.
        trigger=TRIGGER_DRAFT if draft else TRIGGER_AUTO,
        priority=PRIORITY_AUTO,
        delay_seconds=debounce_seconds if action == "synchronize" else 0.0,
        details=JobDetails(
            action=action,
            base_ref=_text(_get(payload, "pull_request").get("base", {}).get("ref")),
            base_sha=_text(_get(payload, "pull_request").get("base", {}).get("sha")),
            title=_text(_get(payload, "pull_request").get("title")),
            delivery_id=delivery_id or None,
        ),
        event_at=parse_time(_get(payload, "pull_request").get("updated_at")),
        before_sha=_text(payload.get("before")) if action == "synchronize" else None,
    )
    pull = _get(payload, "pull_request")
    association = str(pull.get("author_association") or "").upper()
    login = _obj(pull.get("user")).get("login")
    if guard and guard.author_per_day and association in OUTSIDE_ASSOCIATIONS and isinstance(login, str) and login:
        spec = replace(spec, details=replace(spec.details, author=login))
        return Enqueue(spec, guard=Guard(reviews_per_day=guard.reviews_per_day, author_per_day=guard.author_per_day))
    daily = Guard(reviews_per_day=guard.reviews_per_day) if guard and guard.reviews_per_day else None
    return Enqueue(spec, guard=daily)


def _decide_retarget(payload: dict[str, Any], *, guard: Guard | None, delivery_id: str) -> Decision:
    """``pull_request.edited``: only a new base matters (title and body edits change no code). The diff is now taken
    against another branch, so the head is reviewed again in full, whatever was reviewed of it before. It is keyed
    on its delivery (each retarget is its own; a redelivery is a duplicate), belongs to the pull request like a
    Re-run (follows it to its newest head, supersedes nothing), but is automatic work: paused PRs skip it and the
    daily limit counts it."""
    if not isinstance(payload.get("changes"), dict) or not isinstance(payload["changes"].get("base"), dict):
        return Ignore("pull_request edited without a new base changes no code")
    decision = decide_pull_request("opened", payload, guard=guard, delivery_id=delivery_id)
    if not isinstance(decision, Enqueue):
        return decision
    base_sha = decision.job.details.base_sha
    spec = replace(
        decision.job,
        trigger=f"{TRIGGER_RETARGET}{delivery_id or base_sha}",
        details=replace(decision.job.details, action="edited", full=True),
    )
    return replace(decision, job=spec, supersede_older_heads=False)


def decide_observed_head(
    installation_id: int,
    repo_id: int | None,
    repo_full_name: str | None,
    pull: dict[str, Any],
    *,
    action: str,
    guard: Guard | None = None,
) -> Decision:
    """The decision for an open pull request's head as the app read it from GitHub (the sweep, or a worker that
    found the head moved on): the one an ``opened`` webhook would get, ordered by the PR's ``updated_at``."""
    payload = {
        "action": "opened",
        "pull_request": dict(pull),
        "installation": {"id": installation_id},
        "repository": {"id": repo_id, "full_name": repo_full_name},
    }
    decision = decide_pull_request("opened", payload, guard=guard)
    if isinstance(decision, Enqueue):
        spec = replace(decision.job, details=replace(decision.job.details, action=action))
        decision = replace(decision, job=spec, observed=True)
    return decision


def _installation_id(payload: dict[str, Any]) -> int | None:
    installation = payload.get("installation")
    value = installation.get("id") if isinstance(installation, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def decide_comment(
    action: str,
    payload: dict[str, Any],
    *,
    app_slug: str,
    bot_login: str,
    guard: Guard | None = None,
    delivery_id: str = "",
) -> Decision:
    """The decision for an ``issue_comment`` event: slash commands on pull requests."""
    from reviewer_app.core.commands import HELP_QUIET_SECONDS, help_text, is_bot, may_command, parse_command
    from reviewer_app.core.markers import make_answer_marker

    if action != "created":
        return Ignore(f"issue_comment action {action!r} triggers nothing")
    issue = _get(payload, "issue")
    if not isinstance(issue, dict) or "pull_request" not in issue:
        return Ignore("comment on an issue, not a pull request")
    comment = _get(payload, "comment")
    user = comment.get("user") if isinstance(comment, dict) else None
    if not isinstance(user, dict):
        raise MalformedPayload("payload has no comment.user")
    login = str(user.get("login") or "")
    if is_bot(user_type=user.get("type"), login=login, bot_login=bot_login):
        return Ignore("comments by bots are never commands")
    command = parse_command(str(comment.get("body") or ""), app_slug=app_slug)
    if command is None or command.verb == "unknown":
        # "@app why is this slow?" reads as an unknown command; a question that mentions the app gets an answer.
        from reviewer_app.core.replies import decide_question

        question = decide_question(
            payload, app_slug=app_slug, bot_login=bot_login, guard=guard, delivery_id=delivery_id
        )
        if question is not None:
            return question
    if command is None:
        return Ignore("no command in the comment")
    inst = _installation_id(payload)
    if inst is None:
        return Ignore("comment event without an installation")
    repo = _str(payload, "repository", "full_name")
    repo_id = _int(payload, "repository", "id")
    number = _int(payload, "issue", "number")
    comment_id = _int(payload, "comment", "id")

    def react(content: str) -> Effect:
        return Effect("reaction", inst, repo, comment_id, content)

    def say(text: str) -> Effect:
        return Effect("comment", inst, repo, number, text)

    if not may_command(
        author_association=str(comment.get("author_association") or ""),
        user_type=user.get("type"),
        login=login,
        bot_login=bot_login,
    ):
        return Reply(f"{login} may not run review commands (needs write access)", (react("-1"),))
    if command.verb in ("help", "unknown"):
        # Only our own text is posted, never the comment's (it could carry mentions and links), and at most once
        # per pull request in a while, however many people ask.
        text = ("Unknown command.\n\n" if command.verb == "unknown" else "") + help_text(app_slug)
        text = f"{text}\n\n{make_answer_marker(comment_id)}"  # one answer per comment, however often it is sent
        return Reply(f"{command.verb} command answered with help", (say(text),), quiet_seconds=HELP_QUIET_SECONDS)
    if command.verb in ("pause", "resume"):
        once = applied_command_key(comment_id)
        written = parse_time(comment.get("created_at"))
        if str(comment.get("author_association") or "").upper() == "OWNER":
            return SetPause(repo_id, number, command.verb == "pause", (react("+1"),), command_key=once, at=written)
        # As for `/review`, the association says little of write access: the outbox asks GitHub for the commenter's
        # permission, then applies the change (and reacts) or refuses it (-1). Never in the request.
        verify = Effect(command.verb, inst, repo, comment_id, pause_request(repo_id, number, login, written))
        return Reply(f"{command.verb} awaits the permission check of {login}", (verify,), command_key=once)
    refused = (
        Guard(
            reviews_per_day=guard.reviews_per_day,
            manual_per_pr_hour=guard.manual_per_pr_hour,
            refusal_effects=(react("-1"),),
        )
        if guard
        else None
    )
    # The association says little about write access (MEMBER: any member of the owning organisation, COLLABORATOR:
    # read access is enough), so the worker asks GitHub for the requester's permission before a review is paid
    # for, and reacts then. Only the repository's owner is taken at its word.
    verify = str(comment.get("author_association") or "").upper() != "OWNER"
    spec = JobSpec(
        repo_id=repo_id,
        repo_full_name=repo,
        installation_id=inst,
        pr_number=number,
        head_sha="",  # a comment does not name the head: the worker reviews the head it finds
        trigger=f"manual:{comment_id}",
        priority=PRIORITY_MANUAL,
        # When it was asked (the comment's created_at): a close GitHub timed earlier, delivered late, keeps it.
        event_at=parse_time(comment.get("created_at")),
        details=JobDetails(
            full=command.verb == "full",
            requested_by=login,
            comment_id=comment_id,
            verify_permission=verify,
            delivery_id=delivery_id or None,
        ),
    )
    accepted = () if verify else (react("+1"),)
    return Enqueue(spec, supersede_older_heads=False, automatic=False, guard=refused, effects=accepted)


def rerun_job_id(payload: dict[str, Any]) -> int | None:
    """The job a ``check_run`` payload's own run belongs to, from its ``external_id`` (``reviewer-app-job-N``, see
    github/checks.py), or None. GitHub leaves ``pull_requests`` empty for a pull request from a fork, so a Re-run
    there is tied to its pull request through the job that created the run."""
    node = payload.get("check_run")
    value = node.get("external_id") if isinstance(node, dict) else None
    found = _JOB_EXTERNAL_ID.fullmatch(value) if isinstance(value, str) else None
    return int(found.group(1)) if found else None


_JOB_EXTERNAL_ID = re.compile(r"reviewer-app-job-([1-9][0-9]{0,17})")


def decide_rerun(
    event: str,
    action: str,
    payload: dict[str, Any],
    *,
    app_id: int | None,
    delivery_id: str,
    job_pull: tuple[int, int] | None = None,
    guard: Guard | None = None,
) -> Decision:
    """``check_run`` / ``check_suite`` rerequested for this app's own check: a new review of that head.

    Each click is its own request, keyed on its delivery: GitHub keeps one suite per app and commit (and a check
    run's id) across clicks, so a key on either would make every click after the first a duplicate. A redelivery
    of the same delivery keeps its id, and stays a duplicate. GitHub lists no pull request on a fork's check run or
    suite: ``job_pull`` is then (repository id, PR number) of the app's job the receiver read from the store (the
    one a check run's ``external_id`` names, see ``rerun_job_id``; for a suite, the latest job for its head); it is
    used only when the payload lists no pull request and only for a job of the same repository."""
    if action != "rerequested":
        return Ignore(f"{event} action {action!r} triggers nothing")
    node = _get(payload, event)
    app = node.get("app") if isinstance(node, dict) else None
    if app_id is None or not isinstance(app, dict) or app.get("id") != app_id:
        return Ignore(f"{event} belongs to another app")
    inst = _installation_id(payload)
    pulls = node.get("pull_requests") or []
    repo_id = _int(payload, "repository", "id")
    if pulls:
        number = pulls[0].get("number")
        if not isinstance(number, int):
            raise MalformedPayload(f"payload field {event}.pull_requests[0].number is not an integer")
    elif job_pull is not None and job_pull[0] == repo_id:
        number = job_pull[1]  # a fork's pull request: GitHub lists none, the run's own job names it
    else:
        number = None
    if inst is None or number is None:
        return Ignore(f"{event} is not attached to a pull request")
    head = _str(payload, event, "head_sha")
    sender = _obj(payload.get("sender")).get("login")
    sender = sender if isinstance(sender, str) and sender else None  # whose hourly allowance it uses
    spec = JobSpec(
        repo_id=repo_id,
        repo_full_name=_str(payload, "repository", "full_name"),
        installation_id=inst,
        pr_number=number,
        head_sha=head,
        trigger=f"rerun:{delivery_id}",
        priority=PRIORITY_MANUAL,
        details=JobDetails(
            full=True, rerun_of=_whole(node.get("id")), requested_by=sender, delivery_id=delivery_id or None
        ),
    )
    # A requested review: it follows the pull request to its newest head and supersedes nothing. Like `/review`, it
    # counts against both budget limits (a refusal shows on the head's check run; there is no comment to react on).
    limits = (
        Guard(reviews_per_day=guard.reviews_per_day, manual_per_pr_hour=guard.manual_per_pr_hour) if guard else None
    )
    return Enqueue(spec, supersede_older_heads=False, automatic=False, guard=limits)


def decide_installation(event: str, action: str, payload: dict[str, Any]) -> Decision:
    """``installation`` and ``installation_repositories``: track them; a gone installation's work is cancelled."""
    inst = _int(payload, "installation", "id")
    login = _obj(_get(payload, "installation").get("account")).get("login")
    account = login if isinstance(login, str) else ""
    if event == "installation":
        if action in ("created", "unsuspend", "new_permissions_accepted"):
            return InstallationChange(inst, account, True, f"installation {action}")
        if action in ("deleted", "suspend"):
            # The event header is not signed, and a captured body can be sent again: nothing is cancelled on the
            # webhook's word. The outbox asks GitHub (GET /app/installations/{id}) and applies what it confirms.
            confirm = Effect("installation", inst, account, inst, action)
            return Reply(f"installation {action}: to be confirmed with GitHub before its work is cancelled", (confirm,))
        return Ignore(f"installation action {action!r} changes nothing")
    if action == "removed":
        removed = payload.get("repositories_removed")
        ids = tuple(r["id"] for r in removed if _is_int(_obj(r).get("id"))) if isinstance(removed, list) else ()
        return ReposRemoved(inst, ids, REPO_REMOVED)
    if action == "added":
        # Nothing to cancel; the installation is active, and the sweep looks at the added repositories' pull requests.
        return InstallationChange(inst, account, True, "repositories added")
    return Ignore(f"installation_repositories action {action!r} changes nothing")
