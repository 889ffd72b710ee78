"""Webhook bodies as GitHub sends them: one template per event (tests/fixtures/webhooks/), filled in by builders, and
held to GitHub's webhook schemas (the pydantic models githubkit generates from GitHub's description).

A template string that is exactly ``$name`` becomes the value of ``name`` (of any JSON type); ``${name}`` inside a
string is replaced by the value's text. Every placeholder must be given: a builder that forgets one fails loudly.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import time
import warnings
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

# Payload times are near the run's own "now" (an hour ago, on the hour), never a fixed date: the receiver takes an
# event older than the delivery window (REVIEWER_RETENTION_DAYS) for a replay, and a fixed date would age into one.
BASE_TIME = (int(time.time()) // 3600 - 1) * 3600


def stamp(offset: float = 0.0) -> str:
    """GitHub's timestamp for ``offset`` seconds after BASE_TIME."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(BASE_TIME + offset))


DEFAULT_STAMP = stamp()

TEMPLATES = Path(__file__).parent / "fixtures" / "webhooks"

# Every (event, action) the app handles (reviewer_app/web/events.py and core/admission.py), each with a builder below.
HANDLED: dict[str, tuple[str, ...]] = {
    "pull_request": ("opened", "reopened", "synchronize", "ready_for_review", "closed", "edited"),
    "issue_comment": ("created",),
    "check_run": ("rerequested",),
    "check_suite": ("rerequested",),
    "installation": ("created", "deleted", "suspend", "unsuspend", "new_permissions_accepted"),
    "installation_repositories": ("added", "removed"),
    "pull_request_review_comment": ("created",),
}

APP_ID = 4242  # the fake GitHub's default App id
ACCOUNT = "octo-org"
_WHOLE = re.compile(r"\$([a-z_]+)")
_INLINE = re.compile(r"\$\{([a-z_]+)\}")


class SchemaMismatch(AssertionError):
    """A webhook body a test built is not what GitHub's schema for its event and action says GitHub sends."""


@cache
def _template(event: str) -> Any:
    return json.loads((TEMPLATES / f"{event}.json").read_text())


def fill(node: Any, values: dict[str, Any]) -> Any:
    """The template ``node`` with its placeholders replaced by ``values`` (a KeyError names a missing one)."""
    if isinstance(node, str):
        if whole := _WHOLE.fullmatch(node):
            return copy.deepcopy(values[whole.group(1)])
        return _INLINE.sub(lambda m: str(values[m.group(1)]), node)
    if isinstance(node, dict):
        return {key: fill(value, values) for key, value in node.items()}
    if isinstance(node, list):
        return [fill(value, values) for value in node]
    return node


def user_id(login: str) -> int:
    """A stable id per login, as GitHub's ids are stable per account."""
    return 1000 + int(hashlib.sha1(login.encode()).hexdigest()[:7], 16)


def sha(n: int | str) -> str:
    return hashlib.sha1(str(n).encode()).hexdigest()


def _account(role: str, login: str, kind: str = "User") -> dict[str, Any]:
    return {role: login, f"{role}_id": user_id(login), f"{role}_type": kind}


def _repository(repo: str, repo_id: int, *, default_branch: str = "main", private: bool = False) -> dict[str, Any]:
    owner, name = repo.split("/")
    return {
        "full_name": repo,
        "repo": name,
        "repo_id": repo_id,
        "default_branch": default_branch,
        "private": private,
        "visibility": "private" if private else "public",
        **_account("owner", owner, "Organization"),
    }


def _bot_or_user(login: str) -> str:
    return "Bot" if login.endswith("[bot]") else "User"


_WITHOUT_ASSIGNEE = frozenset({"opened", "reopened", "closed", "ready_for_review", "edited", "converted_to_draft"})


def pull_request_event(
    action: str = "opened",
    *,
    number: int = 1,
    head: str | None = None,
    base_sha: str | None = None,
    head_ref: str = "feature",
    base_ref: str = "main",
    repo: str = "octo/widgets",
    repo_id: int = 1001,
    default_branch: str = "main",
    private: bool = False,
    installation_id: int = 77,
    draft: bool = False,
    state: str | None = None,
    title: str = "Add widget frobnication",
    body: str | None = "This PR adds frobnication.\n",
    author: str = "alice",
    author_association: str = "MEMBER",
    sender: str | None = None,
    updated_at: str = DEFAULT_STAMP,
    before: str | None = None,
    changes: dict[str, Any] | None = None,
    merged: bool = False,
) -> dict[str, Any]:
    """A ``pull_request`` event. ``synchronize`` names the head it replaced (``before``), ``edited`` what changed
    (``changes``, a title edit unless given), ``closed`` a closed pull request (``merged``: by a merge)."""
    head = head or sha(f"{repo}{number}")
    state = state or ("closed" if action == "closed" else "open")
    values = {
        "action": action,
        "number": number,
        "pr_id": 500000 + number,
        "head_sha": head,
        "base_sha": base_sha or sha("base"),
        "head_ref": head_ref,
        "base_ref": base_ref,
        "installation_id": installation_id,
        "draft": draft,
        "state": state,
        "title": title,
        "body": body,
        "author_association": author_association,
        "updated_at": updated_at,
        "closed_at": updated_at if state == "closed" else None,
        **_repository(repo, repo_id, default_branch=default_branch, private=private),
        **_account("author", author, _bot_or_user(author)),
        **_account("sender", sender or author, _bot_or_user(sender or author)),
    }
    payload = fill(_template("pull_request"), values)
    if action not in _WITHOUT_ASSIGNEE:  # GitHub's schemas of these other actions require it (and only them)
        payload["pull_request"]["assignee"] = None
    if action == "synchronize":
        payload["before"], payload["after"] = before or sha(f"before {head}"), head
    if action in ("labeled", "unlabeled"):
        payload["label"] = {
            "id": 208045946,
            "node_id": "MDU6TGFiZWwyMDgwNDU5NDY=",
            "url": f"https://api.github.com/repos/{repo}/labels/bug",
            "name": "bug",
            "color": "d73a4a",
            "default": True,
            "description": "Something isn't working",
            "archived_at": None,
            "archived_by": None,
        }
    if merged:
        payload["pull_request"]["merged"] = True
        payload["pull_request"]["merged_at"] = updated_at
    if action == "edited":
        payload["changes"] = changes if changes is not None else {"title": {"from": "An older title"}}
    return payload


def issue_comment_event(
    body: str,
    *,
    comment_id: int = 5001,
    login: str = "maintainer",
    association: str = "MEMBER",
    user_type: str = "User",
    action: str = "created",
    number: int = 1,
    repo: str = "octo/widgets",
    repo_id: int = 1001,
    private: bool = False,
    installation_id: int = 77,
    title: str = "Add widget frobnication",
    author: str = "alice",
) -> dict[str, Any]:
    """An ``issue_comment`` event on a pull request (GitHub sends pull-request comments as issue comments)."""
    values = {
        "action": action,
        "number": number,
        "issue_id": 700000 + number,
        "installation_id": installation_id,
        "title": title,
        "state": "open",
        "pr_body": "This PR adds frobnication.",
        "author_association": "MEMBER",
        "comment_id": comment_id,
        "comment_body": body,
        "association": association,
        **_repository(repo, repo_id, private=private),
        **_account("author", author),
        **_account("commenter", login, user_type),
        **_account("sender", login, user_type),
    }
    payload = fill(_template("issue_comment"), values)
    payload["comment"]["created_at"] = payload["comment"]["updated_at"] = DEFAULT_STAMP
    if action == "edited":
        payload["changes"] = {"body": {"from": "an earlier version"}}
    return payload


def rest_review_comment(
    comment_id: int,
    *,
    login: str,
    body: str,
    in_reply_to: int | None = None,
    path: str = "src/widget.py",
    line: int = 2,
    repo: str = "octo/widgets",
    number: int = 1,
    commit: str | None = None,
) -> dict[str, Any]:
    """A review comment as the REST API serves it (what ``review_comment_event`` wraps)."""
    api, html = f"https://api.github.com/repos/{repo}", f"https://github.com/{repo}/pull/{number}"
    return {
        "url": f"{api}/pulls/comments/{comment_id}",
        "pull_request_review_id": 880000 + comment_id,
        "id": comment_id,
        "node_id": f"PRRC_{comment_id}",
        "diff_hunk": "@@ -1,3 +1,3 @@\n def f():\n-    return 1\n+    return 2",
        "path": path,
        "commit_id": commit or sha("head"),
        "original_commit_id": commit or sha("head"),
        "in_reply_to_id": in_reply_to,
        "user": {"login": login},
        "body": body,
        "created_at": DEFAULT_STAMP,
        "updated_at": DEFAULT_STAMP,
        "html_url": f"{html}#discussion_r{comment_id}",
        "pull_request_url": f"{api}/pulls/{number}",
        "_links": {
            "self": {"href": f"{api}/pulls/comments/{comment_id}"},
            "html": {"href": f"{html}#discussion_r{comment_id}"},
            "pull_request": {"href": f"{api}/pulls/{number}"},
        },
        "line": line,
        "original_line": line,
        "side": "RIGHT",
        "start_line": None,
        "start_side": None,
        "subject_type": "line",
    }


_LONG_FORM_ONLY = frozenset(
    {
        "merged",
        "mergeable",
        "rebaseable",
        "mergeable_state",
        "merged_by",
        "comments",
        "review_comments",
        "maintainer_can_modify",
        "commits",
        "additions",
        "deletions",
        "changed_files",
    }
)


def review_comment_event(
    comment: dict[str, Any],
    *,
    login: str,
    association: str = "NONE",
    user_type: str | None = None,
    action: str = "created",
    number: int = 1,
    head: str | None = None,
    base_sha: str | None = None,
    base_ref: str = "main",
    repo: str = "octo/widgets",
    repo_id: int = 1001,
    installation_id: int = 77,
    author: str = "alice",
    state: str | None = None,
) -> dict[str, Any]:
    """A ``pull_request_review_comment`` event: ``comment`` is the review comment as the REST API serves it (the fake
    GitHub's listing), written by ``login``; the pull request around it as the ``pull_request`` event carries it."""
    kind = user_type or _bot_or_user(login)
    around = pull_request_event(
        "synchronize",  # its pull_request declares `assignee`, as the review comment event's does
        number=number,
        head=head,
        base_sha=base_sha,
        base_ref=base_ref,
        repo=repo,
        repo_id=repo_id,
        installation_id=installation_id,
        author=author,
        state=state,
        sender=login,
    )
    user = fill(_template("issue_comment")["comment"]["user"], _account("commenter", login, kind))
    body = {
        key: comment.get(key)
        for key in (
            "url",
            "pull_request_review_id",
            "id",
            "node_id",
            "diff_hunk",
            "path",
            "commit_id",
            "original_commit_id",
            "in_reply_to_id",
            "body",
            "created_at",
            "updated_at",
            "html_url",
            "pull_request_url",
            "_links",
            "line",
            "original_line",
            "side",
            "start_line",
            "start_side",
            "subject_type",
        )
    }
    if body["in_reply_to_id"] is None:
        del body["in_reply_to_id"]  # a comment that starts a thread carries no in_reply_to_id
    body.update(
        user=user,
        author_association=association,
        position=comment.get("position", comment.get("line")),
        original_position=comment.get("original_position", comment.get("line")),
        original_start_line=comment.get("original_start_line"),
        start_side=comment.get("start_side"),
        subject_type=comment.get("subject_type") or "line",
        reactions={
            "url": f"{body['url']}/reactions",
            "total_count": 0,
            **{k: 0 for k in ("+1", "-1", "laugh", "hooray", "confused", "heart", "rocket", "eyes")},
        },
    )
    sender = fill(_template("issue_comment")["sender"], _account("sender", login, kind))
    # The review comment event's pull request is the short form: no merge state, no counts.
    pull = {k: v for k, v in around["pull_request"].items() if k not in _LONG_FORM_ONLY}
    return {
        "action": action,
        "comment": body,
        "pull_request": pull,
        "repository": around["repository"],
        "sender": sender,
        "installation": around["installation"],
    }


def _check_values(
    *,
    head_sha: str,
    number: int | None,
    repo: str,
    repo_id: int,
    installation_id: int,
    app_id: int,
    sender: str,
    suite_id: int,
    head_ref: str,
    base_ref: str,
    base_sha: str | None,
) -> dict[str, Any]:
    return {
        "action": "rerequested",
        "head_sha": head_sha,
        "base_sha": base_sha or sha("base"),
        "head_ref": head_ref,
        "base_ref": base_ref,
        "number": number or 0,
        "pr_id": 500000 + (number or 0),
        "installation_id": installation_id,
        "app_id": app_id,
        "suite_id": suite_id,
        "suite_status": "completed",
        "suite_conclusion": "success",
        "author": sender,
        **_repository(repo, repo_id),
        **_account("sender", sender),
    }


def check_run_event(
    *,
    run_id: int = 9001,
    head_sha: str | None = None,
    number: int | None = 1,
    external_id: str = "",
    repo: str = "octo/widgets",
    repo_id: int = 1001,
    installation_id: int = 77,
    app_id: int = APP_ID,
    sender: str = "maintainer",
    suite_id: int = 8001,
    head_ref: str = "feature",
    base_ref: str = "main",
    base_sha: str | None = None,
) -> dict[str, Any]:
    """A ``check_run`` ``rerequested`` event (a Re-run click). ``number`` None: a fork's pull request, which GitHub
    does not list on the run."""
    values = _check_values(
        head_sha=head_sha or sha(f"{repo}{number}"),
        number=number,
        repo=repo,
        repo_id=repo_id,
        installation_id=installation_id,
        app_id=app_id,
        sender=sender,
        suite_id=suite_id,
        head_ref=head_ref,
        base_ref=base_ref,
        base_sha=base_sha,
    )
    payload = fill(_template("check_run"), {**values, "run_id": run_id, "external_id": external_id})
    if number is None:
        payload["check_run"]["pull_requests"] = payload["check_run"]["check_suite"]["pull_requests"] = []
    return payload


def check_suite_event(
    *,
    suite_id: int = 8001,
    head_sha: str | None = None,
    number: int | None = 1,
    repo: str = "octo/widgets",
    repo_id: int = 1001,
    installation_id: int = 77,
    app_id: int = APP_ID,
    sender: str = "maintainer",
    head_ref: str = "feature",
    base_ref: str = "main",
    base_sha: str | None = None,
) -> dict[str, Any]:
    """A ``check_suite`` ``rerequested`` event (Re-run all checks). ``number`` None: a fork's pull request."""
    values = _check_values(
        head_sha=head_sha or sha(f"{repo}{number}"),
        number=number,
        repo=repo,
        repo_id=repo_id,
        installation_id=installation_id,
        app_id=app_id,
        sender=sender,
        suite_id=suite_id,
        head_ref=head_ref,
        base_ref=base_ref,
        base_sha=base_sha,
    )
    payload = fill(_template("check_suite"), values)
    if number is None:
        payload["check_suite"]["pull_requests"] = []
    return payload


def repository_entry(repo: str, repo_id: int, *, private: bool = False) -> dict[str, Any]:
    """A repository as installation events list it."""
    return {"id": repo_id, "node_id": "R_kgDOAAAAAQ", "name": repo.split("/")[1], "full_name": repo, "private": private}


def _installation_values(action: str, installation_id: int, account: str, app_id: int, sender: str) -> dict[str, Any]:
    suspended = action == "suspend"
    return {
        "action": action,
        "installation_id": installation_id,
        "app_id": app_id,
        "suspended_by": fill(_template("installation")["sender"], _account("sender", sender)) if suspended else None,
        "suspended_at": "2026-12-01T10:30:00Z" if suspended else None,
        **_account("owner", account, "Organization"),
        **_account("sender", sender),
    }


def installation_event(
    action: str,
    *,
    installation_id: int = 77,
    account: str = ACCOUNT,
    repositories: list[dict[str, Any]] | None = None,
    app_id: int = APP_ID,
    sender: str = "octocat",
) -> dict[str, Any]:
    """An ``installation`` event (created, deleted, suspend, unsuspend, new_permissions_accepted)."""
    values = _installation_values(action, installation_id, account, app_id, sender)
    listed = repositories if repositories is not None else [repository_entry(f"{account}/widgets", 1001)]
    return fill(_template("installation"), {**values, "repositories": listed})


def installation_repositories_event(
    action: str,
    *,
    added: Sequence[dict[str, Any]] = (),
    removed: Sequence[dict[str, Any]] = (),
    installation_id: int = 77,
    account: str = ACCOUNT,
    app_id: int = APP_ID,
    sender: str = "octocat",
) -> dict[str, Any]:
    """An ``installation_repositories`` event: repositories ``added`` to or ``removed`` from the installation."""
    values = _installation_values(action, installation_id, account, app_id, sender)
    return fill(
        _template("installation_repositories"),
        {**values, "repositories_added": list(added), "repositories_removed": list(removed)},
    )


@cache
def _event_models(event: str) -> Any:
    """GitHub's schema of ``event``: a model per action, or one model for an event without actions (ping); None for a
    name GitHub sends no event under."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from githubkit_schemas.latest import webhooks

    return getattr(webhooks, f"{event}_action_types", None)


@cache
def _adapter(model: Any) -> TypeAdapter[Any]:
    return TypeAdapter(model)  # a model, or a union of them for some actions


def schema_problems(event: str, payload: Any) -> str | None:
    """Why ``payload`` is not a body GitHub sends for ``event`` (its action's schema), or None when it is one."""
    models = _event_models(event)
    if models is None:
        return f"GitHub sends no event named {event!r}"
    action = payload.get("action") if isinstance(payload, dict) else None
    model = models.get(action) if isinstance(models, dict) and isinstance(action, str) else models
    if isinstance(model, dict) or model is None:
        return f"GitHub sends no {event} event with action {action!r}"
    try:
        # Strict, as JSON: a number sent as a string ("1") is not taken for one, as pydantic's lax mode would.
        parsed = _adapter(model).validate_json(json.dumps(payload), strict=True)
    except ValidationError as exc:
        return str(exc)
    unknown = _unknown_fields(parsed, payload, event)
    return f"it carries fields the schema does not know: {', '.join(unknown)}" if unknown else None


def _unknown_fields(node: Any, raw: Any, path: str) -> list[str]:
    """Where a body holds fields its schema does not declare (the models drop them silently): a field GitHub does
    not send is one the app must not come to rely on."""
    if isinstance(node, BaseModel) and isinstance(raw, dict):
        known = {field.alias or name: name for name, field in type(node).model_fields.items()}
        found = [f"{path}.{key}" for key in raw if key not in known]
        for key, name in known.items():
            if key in raw:
                found += _unknown_fields(getattr(node, name), raw[key], f"{path}.{key}")
        return found
    if isinstance(node, list) and isinstance(raw, list):
        return [
            field
            for i, pair in enumerate(zip(node, raw, strict=False))
            for field in _unknown_fields(*pair, f"{path}[{i}]")
        ]
    return []


def validate(event: str, payload: Any) -> None:
    """Raise SchemaMismatch unless ``payload`` is what GitHub sends for ``event``."""
    problem = schema_problems(event, payload)
    if problem is not None:
        raise SchemaMismatch(f"the {event} body a test built is not GitHub's: {problem}")
