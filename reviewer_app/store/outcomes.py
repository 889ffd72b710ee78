"""The store's part of outcomes (issue 41): settle the fates of published findings (core/outcomes.py decides, this
writes), record each published review, and read them back for the outcomes page, CLI and metrics."""

from __future__ import annotations

import abc
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reviewer_app.core.outcomes import Event, Fate, Settled, settle
from reviewer_app.store import statements as s
from reviewer_app.store.procedures import Count, Procedure, Row, changes


@dataclass(frozen=True)
class FateEvent:
    """Something that happened to a finding (by its id), at GitHub's time ``at``, and what it was, in words."""

    finding_id: int
    event: Event
    at: float
    source: str = ""


@dataclass(frozen=True)
class ReviewRun:
    """What a published review was made with and what it published: the dimensions its findings' rate is read by."""

    job_id: int
    repo_id: int
    repo_full_name: str
    pr_number: int
    review_id: int | None
    head_sha: str
    model: str
    verify_model: str
    prompt_version: str
    settings: Mapping[str, Any]
    experiment: str | None
    variant: str | None
    learnings: int  # of the repository's learnings, how many the review used
    findings: int  # inline findings it published
    usage: Sequence[Mapping[str, Any]] = field(default_factory=tuple)  # per model: the four token counts
    created_at: float = 0.0


def _settle_all(events: Sequence[FateEvent]) -> Procedure[list[tuple[int, str]]]:
    changed: list[tuple[int, str]] = []
    for e in events:
        row = yield Row(s.SELECT_FATE_FOR_UPDATE, (e.finding_id,))
        if row is None:
            continue
        current = Settled(Fate(row["fate"]), row["fate_at"])
        new = settle(current, e.event, e.at, e.source)
        if new is None:
            continue
        params = (new.fate.value, new.at, new.source, e.finding_id, current.fate.value)
        if (yield Count(s.SET_FATE_IF_UNCHANGED, params)) == 1:
            changed.append((e.finding_id, new.fate.value))
    return changed


def _by_comment(
    repo_id: int, comment_id: int, event: Event, at: float, source: str
) -> Procedure[list[tuple[int, str]]]:
    row = yield Row(s.SELECT_FINDING_OF_COMMENT, (repo_id, comment_id))
    if row is None:
        return []
    return (yield from _settle_all([FateEvent(int(row["id"]), event, at, source)]))


class OutcomesStore(abc.ABC):
    """Fates and review records over a driver's ``_run`` and ``_rows`` (see driven.py)."""

    @abc.abstractmethod
    async def _run(self, procedure: Any, *, one_statement: bool = False) -> Any: ...

    @abc.abstractmethod
    async def _rows(self, stmt: s.Statement, params: Sequence[Any] = ()) -> list[Any]: ...

    async def settle_findings(self, events: Sequence[FateEvent]) -> list[tuple[int, str]]:
        """Apply each event to its finding's fate (core/outcomes.settle), in one transaction; (finding id, new fate)
        of those it changed."""
        if not events:
            return []
        return await self._run(lambda: _settle_all(events))

    async def settle_finding_of_comment(
        self, repo_id: int, comment_id: int, event: Event, *, at: float, source: str
    ) -> list[tuple[int, str]]:
        """``settle_findings`` for the finding the app's review comment ``comment_id`` published, if it is known."""
        return await self._run(lambda: _by_comment(repo_id, comment_id, event, at, source))

    async def settle_open_at_close(self, repo_id: int, pr_number: int, fate: Fate, *, at: float, source: str) -> int:
        """The pull request was merged or closed: its findings still open get ``fate``; how many."""
        params = (fate.value, at, source, repo_id, pr_number)
        return await self._run(lambda: changes(s.SETTLE_OPEN_FINDINGS_AT_CLOSE, params), one_statement=True)

    async def record_review_run(self, run: ReviewRun) -> None:
        """Keep what a published review was made with (once per job)."""
        params = (
            run.job_id,
            run.repo_id,
            run.repo_full_name,
            run.pr_number,
            run.review_id,
            run.head_sha,
            run.model,
            run.verify_model,
            run.prompt_version,
            json.dumps(dict(run.settings), sort_keys=True),
            run.experiment,
            run.variant,
            run.learnings,
            run.findings,
            json.dumps([dict(u) for u in run.usage]),
            run.created_at,
        )
        await self._run(lambda: changes(s.INSERT_REVIEW_RUN_IF_NEW, params), one_statement=True)

    async def outcome_findings(self, *, since: float, repo_id: int | None = None) -> list[dict[str, Any]]:
        """Every finding published since ``since`` (of one repository, or all), with its fate and the dimensions of
        the review that published it (None where the review was published before reviews were recorded)."""
        if repo_id is None:
            rows = await self._rows(s.OUTCOME_FINDINGS, (since,))
        else:
            rows = await self._rows(s.OUTCOME_FINDINGS_OF_REPO, (since, repo_id))
        return [dict(r) for r in rows]

    async def review_runs(self, *, since: float, repo_id: int | None = None) -> list[ReviewRun]:
        """The reviews published since ``since``, oldest first."""
        if repo_id is None:
            rows = await self._rows(s.REVIEW_RUNS_SINCE, (since,))
        else:
            rows = await self._rows(s.REVIEW_RUNS_OF_REPO_SINCE, (since, repo_id))
        return [_run_of(r) for r in rows]

    async def job_usage(self, job_id: int) -> list[dict[str, Any]]:
        """The tokens the job's attempts paid for, per model (review and verification apart): ``model`` and the four
        token counts."""
        rows = await self._rows(s.JOB_USAGE, (job_id, job_id))
        keys = ("model", "input_tokens", "output_tokens", "cache_creation_tokens", "cache_read_tokens")
        return [{k: (str(r[i]) if i == 0 else int(r[i] or 0)) for i, k in enumerate(keys)} for r in rows]

    async def fate_counts(self) -> dict[str, int]:
        """How many findings have each fate, over the whole store."""
        return {str(r[0]): int(r[1]) for r in await self._rows(s.FATE_COUNTS)}


def _run_of(row: Any) -> ReviewRun:
    return ReviewRun(
        job_id=int(row["job_id"]),
        repo_id=int(row["repo_id"]),
        repo_full_name=row["repo_full_name"],
        pr_number=int(row["pr_number"]),
        review_id=row["review_id"],
        head_sha=row["head_sha"],
        model=row["model"],
        verify_model=row["verify_model"],
        prompt_version=row["prompt_version"],
        settings=json.loads(row["settings"]),
        experiment=row["experiment"],
        variant=row["variant"],
        learnings=int(row["learnings"]),
        findings=int(row["findings"]),
        usage=tuple(json.loads(row["usage"])),
        created_at=float(row["created_at"]),
    )
