"""What each webhook event asks of the queue, decided over its payload alone (no I/O): a pull request's push, draft,
retarget or close, a slash command, a Re-run, an installation's change. The decisions are core/admission.py's."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from reviewer_app.core.admission import (
    AUTO_ACTIONS,
    OUTSIDE_ASSOCIATIONS,
    PR_CLOSED,
    PRIORITY_AUTO,
    PRIORITY_MANUAL,
    REPO_REMOVED,
    TRIGGER_AUTO,
    TRIGGER_DRAFT,
    TRIGGER_RETARGET,
    CancelPR,
    Decision,
    Effect,
    Enqueue,
    Guard,
    Ignore,
    InstallationChange,
    JobSpec,
    Reply,
    ReposRemoved,
    SetPause,
    applied_command_key,
    pause_request,
)
from reviewer_app.core.commands import (
    HELP_QUIET_SECONDS,
    Command,
    TeamRequest,
    confirmed_id,
    help_text,
    is_bot,
    may_command,
    parse_command,
    parse_forget,
    parse_learn,
)
from reviewer_app.core.job_records import JobDetails
from reviewer_app.core.markers import make_answer_marker
from reviewer_app.core.payload import (
    MalformedPayload,
    as_obj,
    as_text,
    as_whole,
    at,
    installation_of,
    int_at,
    is_int,
    str_at,
)
from reviewer_app.core.replies import decide_question
from reviewer_app.core.timestamps import parse_time


def decide_pull_request(
    action: str,
    payload: dict[str, Any],
    *,
    debounce_seconds: float = 0.0,
    guard: Guard | None = None,
    delivery_id: str = "",
) -> Decision:
    """The decision for a ``pull_request`` event."""
    repo_id = int_at(payload, "repository", "id")
    number = int_at(payload, "pull_request", "number")
    if action == "closed":
        pull = at(payload, "pull_request")
        closed_at = parse_time(pull.get("updated_at"))
        return CancelPR(repo_id, number, PR_CLOSED, closed_at=closed_at, merged=pull.get("merged") is True)
    if action == "edited":
        return _decide_retarget(payload, guard=guard, delivery_id=delivery_id)
    if action not in AUTO_ACTIONS:
        return Ignore(f"pull_request action {action!r} does not start a review")
    draft = at(payload, "pull_request").get("draft") is True
    if at(payload, "pull_request").get("state", "open") != "open":
        return Ignore("pull request is not open")
    installation = payload.get("installation")
    installation_id = installation.get("id") if isinstance(installation, dict) else None
    spec = JobSpec(
        repo_id=repo_id,
        repo_full_name=str_at(payload, "repository", "full_name"),
        installation_id=installation_id if isinstance(installation_id, int) else None,
        pr_number=number,
        head_sha=str_at(payload, "pull_request", "head", "sha"),
        # A draft's job has its own revision key: whether drafts are reviewed is the repository's setting, which
        # only the worker reads (`drafts:` in .github/reviewer.yml), and ready_for_review must still get a job of
        # its own for the same head when the draft's job was skipped.
        trigger=TRIGGER_DRAFT if draft else TRIGGER_AUTO,
        priority=PRIORITY_AUTO,
        delay_seconds=debounce_seconds if action == "synchronize" else 0.0,
        details=JobDetails(
            action=action,
            base_ref=as_text(at(payload, "pull_request").get("base", {}).get("ref")),
            base_sha=as_text(at(payload, "pull_request").get("base", {}).get("sha")),
            title=as_text(at(payload, "pull_request").get("title")),
            delivery_id=delivery_id or None,
        ),
        event_at=parse_time(at(payload, "pull_request").get("updated_at")),
        before_sha=as_text(payload.get("before")) if action == "synchronize" else None,
    )
    pull = at(payload, "pull_request")
    association = str(pull.get("author_association") or "").upper()
    login = as_obj(pull.get("user")).get("login")
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
    if action != "created":
        return Ignore(f"issue_comment action {action!r} triggers nothing")
    issue = at(payload, "issue")
    if not isinstance(issue, dict) or "pull_request" not in issue:
        return Ignore("comment on an issue, not a pull request")
    comment = at(payload, "comment")
    user = comment.get("user") if isinstance(comment, dict) else None
    if not isinstance(user, dict):
        raise MalformedPayload("payload has no comment.user")
    login = str(user.get("login") or "")
    if is_bot(user_type=user.get("type"), login=login, bot_login=bot_login):
        return Ignore("comments by bots are never commands")
    command = parse_command(str(comment.get("body") or ""), app_slug=app_slug)
    if command is None or command.verb == "unknown":
        # "@app why is this slow?" reads as an unknown command; a question that mentions the app gets an answer.
        question = decide_question(
            payload, app_slug=app_slug, bot_login=bot_login, guard=guard, delivery_id=delivery_id
        )
        if question is not None:
            return question
    if command is None:
        return Ignore("no command in the comment")
    inst = installation_of(payload)
    if inst is None:
        return Ignore("comment event without an installation")
    repo = str_at(payload, "repository", "full_name")
    repo_id = int_at(payload, "repository", "id")
    number = int_at(payload, "issue", "number")
    comment_id = int_at(payload, "comment", "id")

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
    if command.verb in ("learn", "forget"):
        # Applied only once the outbox has GitHub's word that the commenter may write to the repository (the owner
        # too: a learning is written by the outbox, never in the request), once per comment.
        # A malformed one too: its author's permission comes first, so only a person with write access is answered
        # (anyone else's gets one reaction, never a reply: github/team_commands.py).
        request = _team_request(command, repo_id, number, login, comment)
        verify = Effect(command.verb, inst, repo, comment_id, request.to_json())
        return Reply(
            f"{command.verb} awaits the permission check of {login}",
            (verify,),
            command_key=applied_command_key(comment_id),
        )
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


def _team_request(command: Command, repo_id: int, number: int, login: str, comment: dict[str, Any]) -> TeamRequest:
    """The request of a `/review learn` (or `learn confirm`) or `forget` comment; one that cannot be applied carries
    its error (a reason that repeats none of its text)."""
    url = comment.get("html_url")
    url = url if isinstance(url, str) and url.startswith(("https://", "http://")) else None
    written = parse_time(comment.get("created_at"))
    try:
        if command.verb == "forget":
            return TeamRequest(repo_id, number, login, url, written, forget=parse_forget(command.args))
        confirm = confirmed_id(command.args)
        if confirm is not None:
            return TeamRequest(repo_id, number, login, url, written, confirm=confirm)
        return TeamRequest(repo_id, number, login, url, written, learn=parse_learn(command.args))
    except ValueError as exc:
        return TeamRequest(repo_id, number, login, url, written, error=str(exc))


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
    node = at(payload, event)
    app = node.get("app") if isinstance(node, dict) else None
    if app_id is None or not isinstance(app, dict) or app.get("id") != app_id:
        return Ignore(f"{event} belongs to another app")
    inst = installation_of(payload)
    pulls = node.get("pull_requests") or []
    repo_id = int_at(payload, "repository", "id")
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
    head = str_at(payload, event, "head_sha")
    sender = as_obj(payload.get("sender")).get("login")
    sender = sender if isinstance(sender, str) and sender else None  # whose hourly allowance it uses
    spec = JobSpec(
        repo_id=repo_id,
        repo_full_name=str_at(payload, "repository", "full_name"),
        installation_id=inst,
        pr_number=number,
        head_sha=head,
        trigger=f"rerun:{delivery_id}",
        priority=PRIORITY_MANUAL,
        details=JobDetails(
            full=True, rerun_of=as_whole(node.get("id")), requested_by=sender, delivery_id=delivery_id or None
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
    inst = int_at(payload, "installation", "id")
    login = as_obj(at(payload, "installation").get("account")).get("login")
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
        ids = tuple(r["id"] for r in removed if is_int(as_obj(r).get("id"))) if isinstance(removed, list) else ()
        return ReposRemoved(inst, ids, REPO_REMOVED)
    if action == "added":
        # Nothing to cancel; the installation is active, and the sweep looks at the added repositories' pull requests.
        return InstallationChange(inst, account, True, "repositories added")
    return Ignore(f"installation_repositories action {action!r} changes nothing")
