"""The store's learnings and finding feedback (issue 29), written once over the driver like every Store method."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from reviewer_app.core.learnings import Learning, LearningDraft, LearningLimitReached
from reviewer_app.store import statements as s
from reviewer_app.store.procedures import Procedure, Row, changes, many
from reviewer_app.store.records import Finding


def _when(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(float(value), UTC)


def learning_of(row: Any) -> Learning:
    return Learning(
        id=int(row["id"]),
        repo=str(row["repo"]),
        path_glob=row["path_glob"] or None,
        text=row["text"],
        kind=row["kind"],
        source_kind=row["source_kind"],
        source_url=row["source_url"],
        author=row["author"],
        created_at=_when(row["created_at"]) or datetime.fromtimestamp(0, UTC),
        times_applied=int(row["times_applied"]),
        last_applied=_when(row["last_applied"]),
        status=row["status"],
        ack_comment_id=None if row["ack_comment_id"] is None else int(row["ack_comment_id"]),
    )


def _add(draft: LearningDraft, limit: int) -> Procedure[Any]:
    """The learning kept for the draft's (repo, glob, text), added unless the repository is at its limit (None)."""
    glob = draft.path_glob or ""
    yield Row(s.LOCK_REPO_LEARNINGS, (draft.repo,))
    existing = yield Row(s.SELECT_LEARNING_BY_TEXT, (draft.repo, glob, draft.text))
    if existing is not None:
        return existing
    count = yield Row(s.COUNT_LEARNINGS_OF_REPO, (draft.repo,))
    if int(count[0]) >= limit:
        return None
    params = (
        draft.repo,
        glob,
        draft.text,
        draft.kind,
        draft.source_kind,
        draft.source_url,
        draft.author,
        draft.created_at.timestamp(),
        draft.status,
    )
    return (yield Row(s.INSERT_LEARNING_IF_NEW, params))


def _one_row(stmt: s.Statement, params: Sequence[Any]) -> Procedure[Any]:
    return (yield Row(stmt, params))


class LearningsStore(abc.ABC):
    """Learnings and feedback over a driver's ``_run`` and ``_rows`` (see driven.py)."""

    @abc.abstractmethod
    async def _run(self, procedure: Any, *, one_statement: bool = False) -> Any: ...

    @abc.abstractmethod
    async def _rows(self, stmt: s.Statement, params: Sequence[Any] = ()) -> list[Any]: ...

    async def add_learning(self, draft: LearningDraft, *, limit: int) -> Learning:
        """Keep the learning once per (repo, path glob, text): the one kept already is returned as it is. Raises
        LearningLimitReached when the repository already holds ``limit`` learnings."""
        row = await self._run(lambda: _add(draft, limit))
        if row is None:
            raise LearningLimitReached(
                f"the repository holds {limit} learnings, its limit: forget one (`/review forget ID`) first"
            )
        return learning_of(row)

    async def list_learnings(self, repo: str) -> list[Learning]:
        """The repository's learnings, oldest first."""
        return [learning_of(r) for r in await self._rows(s.SELECT_LEARNINGS_OF_REPO, (str(repo),))]

    async def get_learning(self, repo: str, learning_id: int) -> Learning | None:
        rows = await self._rows(s.SELECT_LEARNING, (str(repo), learning_id))
        return learning_of(rows[0]) if rows else None

    async def remove_learning(self, repo: str, learning_id: int) -> bool:
        """Forget one learning of the repository; whether it was there."""
        return await self._run(lambda: changes(s.DELETE_LEARNING, (str(repo), learning_id)), one_statement=True) == 1

    async def activate_learning(self, repo: str, learning_id: int) -> Learning | None:
        """A pending learning of the repository confirmed: active from now on. None when there is no pending learning
        of that id (already active, forgotten, or never proposed)."""
        row = await self._run(lambda: _one_row(s.ACTIVATE_LEARNING_IF_PENDING, (str(repo), learning_id)))
        return learning_of(row) if row is not None else None

    async def set_learning_ack(self, repo: str, source_url: str, comment_id: int) -> None:
        """The app's comment acknowledging the pending learning proposed by the comment at ``source_url``."""
        params = (comment_id, str(repo), source_url)
        await self._run(lambda: changes(s.SET_LEARNING_ACK, params), one_statement=True)

    async def pending_learnings_with_ack(self, repo: str, *, limit: int) -> list[Learning]:
        """The repository's newest pending learnings whose acknowledgement a 👍 may confirm."""
        return [learning_of(r) for r in await self._rows(s.PENDING_LEARNINGS_WITH_ACK, (str(repo), limit))]

    async def mark_learnings_applied(self, ids: Sequence[int], at: datetime) -> None:
        """A review used these learnings at ``at``: count it, and keep the latest time."""
        stamp = at.timestamp()
        rows = [(stamp, stamp, i) for i in ids]
        if rows:
            await self._run(lambda: many(s.MARK_LEARNING_APPLIED, rows))

    async def learning_repos(self) -> list[tuple[str, str | None]]:
        """(repo id, full name its newest job records, or None) of every repository with learnings or feedback."""
        return [(str(r[0]), r[1]) for r in await self._rows(s.LEARNING_REPOS)]

    async def repo_id_of_name(self, full_name: str) -> int | None:
        """The id of the repository ``owner/name`` as its newest job records it; None when no job names it."""
        rows = await self._rows(s.REPO_ID_OF_NAME, (full_name,))
        return int(rows[0][0]) if rows else None

    async def record_finding_feedback(
        self, repo: str, finding_key: str, signal: str, author: str, source_url: str | None, at: datetime
    ) -> None:
        """A person's +1 or -1 on a finding's content; the same person's same signal again adds nothing."""
        if signal not in ("+1", "-1"):
            raise ValueError(f"signal {signal!r} is neither +1 nor -1")
        if not str(repo).isdigit():
            raise ValueError("feedback is kept by the repository's GitHub id in decimal (core/learnings.py)")
        params = (str(repo), finding_key, signal, author, source_url, at.timestamp())
        await self._run(lambda: changes(s.INSERT_FEEDBACK_IF_NEW, params), one_statement=True)

    async def finding_feedback_counts(self, repo: str) -> dict[str, tuple[int, int]]:
        """(ups, downs) per finding key of the repository."""
        return {r[0]: (int(r[1]), int(r[2])) for r in await self._rows(s.FEEDBACK_COUNTS, (str(repo),))}

    async def recent_findings(self, repo_id: int, *, limit: int) -> list[Finding]:
        """The repository's newest findings (any pull request, open or resolved), newest first."""
        return [Finding.from_row(r) for r in await self._rows(s.RECENT_FINDINGS_OF_REPO, (repo_id, limit))]
