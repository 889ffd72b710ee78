"""Replies as work: which comments get an answer from the app, decided over the payload alone (no I/O).

Two kinds of comment are answered: a reply in a review thread (``pull_request_review_comment`` created with an
``in_reply_to_id``; the worker checks that the app started the thread, which the payload does not say), and a
comment on the pull request's conversation that mentions the app with a question. Each becomes a job keyed on the
comment (``reply:<comment id>``): a replayed body under a new delivery id is a duplicate, one comment one answer.

Who gets one: the pull request's author, the repository's owner, and people the worker finds to have write access
(an association that says nothing of write access is checked with GitHub, as for ``/review``). Bots never do, nor
does an account whose association says it has no access at all. Answers count against the installation's daily
budget, and each thread has an hourly limit of its own.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from reviewer_app.core.admission import (
    OUTSIDE_ASSOCIATIONS,
    PRIORITY_REPLY,
    REVIEW_COMMENT_REACTION,
    TRIGGER_REPLY,
    Decision,
    Effect,
    Enqueue,
    Guard,
    Ignore,
    JobSpec,
)
from reviewer_app.core.commands import is_bot, own_lines
from reviewer_app.core.job_records import JobDetails
from reviewer_app.core.payload import MalformedPayload
from reviewer_app.core.timestamps import parse_time

CONVERSATION = "conversation"  # the thread of a pull request's conversation (issue comments)


def thread_of_review_comment(root_id: int) -> str:
    """The thread key of a review thread: its first comment's id (GitHub's ``in_reply_to_id`` names it)."""
    return f"review:{root_id}"


def mentions_with_question(body: str, *, app_slug: str) -> bool:
    """Whether ``body`` mentions ``@app_slug`` and asks something (a "?") outside code and quotes (pure)."""
    if not app_slug:
        return False
    mention = re.compile(rf"(?<![\w@/-])@{re.escape(app_slug)}(?:\[bot\])?(?![\w-])", re.IGNORECASE)
    mentioned = asked = False
    for line in own_lines(body):
        prose = re.sub(r"`[^`]*`", "", line)
        mentioned = mentioned or mention.search(prose) is not None
        asked = asked or "?" in prose
    return mentioned and asked


def _access(comment: dict[str, Any], login: str, pr_author: str | None) -> str | None:
    """ "author" or "owner" (answered without asking GitHub), "verify" (the worker asks GitHub for write access), or
    None (no answer: the association says the commenter has no access)."""
    if pr_author and login.casefold() == pr_author.casefold():
        return "author"
    association = str(comment.get("author_association") or "").upper()
    if association == "OWNER":
        return "owner"
    if association in OUTSIDE_ASSOCIATIONS or not association:
        return None
    return "verify"


def _reply_job(
    payload: dict[str, Any],
    *,
    number: int,
    comment_id: int,
    login: str,
    access: str,
    thread: str,
    in_reply_to: int | None,
    delivery_id: str,
    asked_at: float | None = None,
) -> JobSpec:
    installation = payload.get("installation")
    inst = installation.get("id") if isinstance(installation, dict) else None
    repo = payload.get("repository")
    if not isinstance(repo, dict) or not isinstance(repo.get("id"), int) or not isinstance(repo.get("full_name"), str):
        raise MalformedPayload("payload has no repository.id or repository.full_name")
    return JobSpec(
        repo_id=repo["id"],
        repo_full_name=repo["full_name"],
        installation_id=inst if isinstance(inst, int) and not isinstance(inst, bool) else None,
        pr_number=number,
        head_sha="",  # an answer is about a thread, not a head: it never settles on one
        trigger=f"{TRIGGER_REPLY}{comment_id}",
        priority=PRIORITY_REPLY,
        event_at=asked_at,  # a close GitHub timed before the question, delivered late, keeps it
        details=JobDetails(
            comment_id=comment_id,
            asked_by=login,
            thread=thread,
            in_reply_to=in_reply_to,
            verify_permission=access == "verify",
            delivery_id=delivery_id or None,
        ),
    )


def _reply_guard(guard: Guard | None, spec: JobSpec, comment: dict[str, Any], access: str, *, reaction: str) -> Enqueue:
    """The answer's job under the answers' own budget: the installation's answers a day (counted apart from its
    reviews), the thread's answers an hour, and an outside asker's answers a day (the asker in ``details.author``).
    A refusal shows as a 👎 on the question (``reaction``: the effect kind for the comment's kind), on the asker's
    first refused question of the day only (store/procedures/admission.py): never a reply, never once per question."""
    if guard is None or not (guard.answers_per_day or guard.replies_per_thread_hour or guard.answers_per_asker_day):
        return Enqueue(spec, supersede_older_heads=False, automatic=False)
    association = str(comment.get("author_association") or "").upper()
    outside = access == "author" and (association in OUTSIDE_ASSOCIATIONS or not association)
    per_asker = guard.answers_per_asker_day if outside else 0
    if per_asker:
        spec = replace(spec, details=replace(spec.details, author=spec.details.asked_by))
    assert spec.installation_id is not None and spec.details.comment_id is not None
    refused = Effect(reaction, spec.installation_id, spec.repo_full_name, spec.details.comment_id, "-1")
    budget = Guard(
        reviews_per_day=guard.answers_per_day,
        replies_per_thread_hour=guard.replies_per_thread_hour,
        author_per_day=per_asker,
        refusal_effects=(refused,),
    )
    return Enqueue(spec, supersede_older_heads=False, automatic=False, guard=budget)


def _int_field(node: dict[str, Any], key: str, what: str) -> int:
    value = node.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedPayload(f"payload field {what}.{key} is not an integer")
    return value


def decide_review_comment(
    action: str, payload: dict[str, Any], *, bot_login: str, guard: Guard | None = None, delivery_id: str = ""
) -> Decision:
    """The decision for a ``pull_request_review_comment`` event: a reply in a review thread gets an answer job (the
    worker answers only in a thread the app started)."""
    if action != "created":
        return Ignore(f"pull_request_review_comment action {action!r} asks nothing")
    comment, pull = payload.get("comment"), payload.get("pull_request")
    if not isinstance(comment, dict) or not isinstance(pull, dict):
        raise MalformedPayload("payload has no comment or pull_request")
    user = comment.get("user")
    if not isinstance(user, dict):
        raise MalformedPayload("payload has no comment.user")
    login = str(user.get("login") or "")
    sender = payload.get("sender")
    sender_type = sender.get("type") if isinstance(sender, dict) else None
    if is_bot(user_type=user.get("type"), login=login, bot_login=bot_login) or sender_type == "Bot":
        return Ignore("comments by bots (the app's own included) are never answered")
    root = comment.get("in_reply_to_id")
    if not isinstance(root, int) or isinstance(root, bool):
        return Ignore("a review comment that starts a thread asks the app nothing")
    if pull.get("state", "open") != "open":
        return Ignore("pull request is not open")
    author = (pull.get("user") or {}).get("login") if isinstance(pull.get("user"), dict) else None
    access = _access(comment, login, author if isinstance(author, str) else None)
    if access is None:
        return Ignore(f"{login} is neither the pull request's author nor a collaborator: no answer")
    number = _int_field(pull, "number", "pull_request")
    comment_id = _int_field(comment, "id", "comment")
    spec = _reply_job(
        payload,
        number=number,
        comment_id=comment_id,
        login=login,
        access=access,
        thread=thread_of_review_comment(root),
        in_reply_to=root,
        delivery_id=delivery_id,
        asked_at=parse_time(comment.get("created_at")),
    )
    if spec.installation_id is None:
        return Ignore("review comment event without an installation")
    return _reply_guard(guard, spec, comment, access, reaction=REVIEW_COMMENT_REACTION)


def decide_question(
    payload: dict[str, Any], *, app_slug: str, bot_login: str, guard: Guard | None = None, delivery_id: str = ""
) -> Decision | None:
    """An ``issue_comment`` on a pull request that mentions the app with a question: an answer job, an Ignore that
    says why not, or None when the comment asks the app nothing (core.events.decide_comment goes on)."""
    comment, issue = payload.get("comment"), payload.get("issue")
    if not isinstance(comment, dict) or not isinstance(issue, dict):
        return None
    if not mentions_with_question(str(comment.get("body") or ""), app_slug=app_slug):
        return None
    user = comment.get("user") if isinstance(comment.get("user"), dict) else {}
    login = str(user.get("login") or "")
    sender = payload.get("sender")
    if is_bot(user_type=user.get("type"), login=login, bot_login=bot_login) or (
        isinstance(sender, dict) and sender.get("type") == "Bot"
    ):
        return Ignore("comments by bots (the app's own included) are never answered")
    if issue.get("state", "open") != "open":
        return Ignore("pull request is not open")
    author = (issue.get("user") or {}).get("login") if isinstance(issue.get("user"), dict) else None
    access = _access(comment, login, author if isinstance(author, str) else None)
    if access is None:
        return Ignore(f"{login} is neither the pull request's author nor a collaborator: no answer")
    spec = _reply_job(
        payload,
        number=_int_field(issue, "number", "issue"),
        comment_id=_int_field(comment, "id", "comment"),
        login=login,
        access=access,
        thread=CONVERSATION,
        in_reply_to=None,
        delivery_id=delivery_id,
        asked_at=parse_time(comment.get("created_at")),
    )
    if spec.installation_id is None:
        return Ignore("comment event without an installation")
    return _reply_guard(guard, spec, comment, access, reaction="reaction")
