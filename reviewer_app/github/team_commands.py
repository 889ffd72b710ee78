"""`/review learn`, `/review learn confirm` and `/review forget`, applied by the outbox once GitHub confirms the
commenter may write to the repository, and acknowledged in the pull request's conversation (one answer per command
comment). Anyone else's command, malformed or not, gets one reaction and no reply."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reviewer_app.core.commands import TeamRequest
from reviewer_app.core.learnings import (
    MAX_TEXT,
    PREVIEW_FINDINGS,
    Learning,
    LearningLimitReached,
    make_draft,
    preview_text,
    withheld_by,
)
from reviewer_app.core.markers import make_answer_marker, safe_for_github
from reviewer_app.store.base import Store

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 100


@dataclass(frozen=True)
class LearningLimits:
    """The settings a learning is held to: how many one repository keeps, and how long one may be."""

    per_repo: int = DEFAULT_LIMIT
    max_chars: int = MAX_TEXT


def quoted(learning: Learning) -> str:
    """A learning as the app shows it in a conversation: its id, kind, glob and sentence (made safe to publish)."""
    where = f", files `{learning.path_glob}`" if learning.path_glob else ""
    text = safe_for_github(learning.text, 400).replace("\n", " ")
    return f"learning {learning.id} ({learning.kind}{where}):\n\n> {text}"


async def apply_team_command(
    e: dict[str, Any],
    *,
    store: Store,
    permitted: Callable[[str], Awaitable[bool]],
    answer: Callable[[int, str], Awaitable[None]],
    react: Callable[[str], Awaitable[None]],
    limits: LearningLimits,
    now: float,
) -> None:
    """Apply one ``learn`` or ``forget`` effect: refused (a -1 on the command, nothing written) unless ``permitted``
    says the commenter has write access; otherwise the learning is kept or forgotten, the conversation gets the
    app's answer, and the command a +1. Every step is idempotent, so a retry after a lost answer changes nothing
    twice (the answer carries the command comment's marker: it is posted once)."""
    request = TeamRequest.from_json(e["content"])
    repo = str(request.repo_id)
    if not await permitted(request.login):
        log.info("outbox: %s by %s on %s refused (no write access)", e["kind"], request.login, e["repo_full_name"])
        await react("confused" if request.error is not None else "-1")
        return
    if request.error is not None:
        text = f"Nothing {'forgotten' if e['kind'] == 'forget' else 'learned'}: {request.error}."
    elif request.learn is not None:
        text = await _learn(request, store=store, repo=repo, limits=limits, now=now, slug=e["repo_full_name"])
    elif request.confirm is not None:
        text = await _confirm(request.confirm, store=store, repo=repo, login=request.login)
    else:
        text = await _forget(request, store=store, repo=repo)
    await answer(request.pr_number, f"{text}\n\n{make_answer_marker(e['target'])}")
    await react("+1")


async def _learn(
    request: TeamRequest, *, store: Store, repo: str, limits: LearningLimits, now: float, slug: str
) -> str:
    learn = request.learn
    assert learn is not None
    written = datetime.fromtimestamp(request.at if request.at is not None else now, UTC)
    try:
        draft = make_draft(
            repo=repo,
            text=learn.text,
            kind=learn.kind,
            path_glob=learn.path_glob,
            source_kind="command",
            source_url=request.comment_url,
            author=request.login,
            created_at=written,
            max_text=limits.max_chars,
        )
    except ValueError as exc:
        return f"Nothing learned: {exc}."
    try:
        learning = await store.add_learning(draft, limit=limits.per_repo)
    except LearningLimitReached:
        return (
            f"Nothing learned: this repository already keeps {limits.per_repo} learnings, its limit. Forget one first "
            f"(`/review forget ID`; `reviewer-app learnings list --repo {slug}` lists them)."
        )
    log.info("outbox: learning %s of %s taught by %s", learning.id, slug, request.login)
    return (
        f"Learned {quoted(learning)}\n\n{await preview(store, learning)}\n\nLater reviews of this repository follow "
        f"it. To undo: `/review forget {learning.id}`."
    )


async def preview(store: Store, learning: Learning) -> str:
    """What ``learning`` would have withheld of its repository's most recent findings (core/learnings.preview_text)."""
    recent = await store.recent_findings(int(learning.repo), limit=PREVIEW_FINDINGS)
    return preview_text(withheld_by(learning, recent), len(recent))


async def _confirm(learning_id: int, *, store: Store, repo: str, login: str) -> str:
    learning = await store.activate_learning(repo, learning_id)
    if learning is None:
        return (
            f"Learning {learning_id} is not a pending learning of this repository (confirmed already, forgotten, or "
            "never proposed): nothing changed."
        )
    log.info("outbox: learning %s confirmed by %s", learning.id, login)
    return (
        f"Confirmed {quoted(learning)}\n\nLater reviews of this repository follow it. "
        f"To undo: `/review forget {learning.id}`."
    )


async def _forget(request: TeamRequest, *, store: Store, repo: str) -> str:
    assert request.forget is not None
    learning = await store.get_learning(repo, request.forget)
    if learning is None or not await store.remove_learning(repo, request.forget):
        return (
            f"Learning {request.forget} is not among this repository's learnings (forgotten already, or never "
            "learned): nothing changed."
        )
    log.info("outbox: learning %s forgotten by %s", learning.id, request.login)
    return f"Forgot {quoted(learning)}\n\nLater reviews no longer use it."
