"""Fates and review records (migration 0018) on both stores: settled by core/outcomes.py's table, the close's fate
written with the close, read back with the dimensions of the review, counted, and moved by migrate-store."""

from __future__ import annotations

from dataclasses import replace

import reviewer_app.store.postgres as postgres_module
import reviewer_app.store.sqlite as sqlite_module
from reviewer_app.core.admission import CancelPR, Enqueue, JobSpec
from reviewer_app.core.job_records import JobDetails
from reviewer_app.core.outcomes import Event, Fate
from reviewer_app.metrics import Metrics
from reviewer_app.store.base import Delivery, FateEvent, Finding, ReviewRun
from reviewer_app.store.migrate import migrate_store
from reviewer_app.store.postgres import PostgresStore
from reviewer_app.store.schema import load_migrations
from reviewer_app.store.sqlite import SqliteStore

FINDING = Finding(
    repo_id=7,
    pr_number=3,
    job_id=11,
    review_id=901,
    head_sha="a" * 40,
    path="src/widget.py",
    line=4,
    line_text="return 2",
    before=("return 1",),
    after=("",),
    severity="warning",
    title="f2 returns a constant",
    body_digest="d1",
    comment_id=5001,
)
RUN = ReviewRun(
    job_id=11,
    repo_id=7,
    repo_full_name="octo/widgets",
    pr_number=3,
    review_id=901,
    head_sha="a" * 40,
    model="claude-sonnet-4-5",
    verify_model="claude-haiku-4-5",
    prompt_version="abc123def456",
    settings={"min_confidence": 65, "verify": True},
    experiment="conf-65",
    variant="b",
    learnings=2,
    findings=2,
    usage=({"model": "claude-sonnet-4-5", "input_tokens": 1000, "output_tokens": 200},),
    created_at=100.0,
)


async def _two(store) -> tuple[int, int]:
    await store.record_findings([FINDING, replace(FINDING, line=6, body_digest="d2", comment_id=5002)], now=100.0)
    first, second = await store.open_findings(7, 3)
    assert first.id is not None and second.id is not None
    return first.id, second.id


def _fates(rows: list[dict]) -> dict[int, tuple[str, float | None, str | None]]:
    return {r["id"]: (r["fate"], r["fate_at"], r["fate_source"]) for r in rows}


async def test_a_new_finding_is_open_and_events_settle_it_by_the_table(store) -> None:
    first, second = await _two(store)
    assert {r["fate"] for r in await store.outcome_findings(since=0.0)} == {"open"}

    changed = await store.settle_findings(
        [FateEvent(first, Event.CHANGED, 200.0, "push abc"), FateEvent(second, Event.DISMISSED, 210.0, "👎 by ann")]
    )
    assert sorted(changed) == sorted([(first, "fixed"), (second, "dismissed")])
    # A later dismissal of the fixed one changes nothing; an earlier one (read late) replaces the fix.
    assert await store.settle_findings([FateEvent(first, Event.DISMISSED, 300.0, "late")]) == []
    assert await store.settle_findings([FateEvent(first, Event.DISMISSED, 150.0, "👎 by bob")]) == [
        (first, "dismissed")
    ]
    fates = _fates(await store.outcome_findings(since=0.0))
    assert fates[first] == ("dismissed", 150.0, "👎 by bob")
    assert fates[second] == ("dismissed", 210.0, "👎 by ann")


async def test_the_merge_gives_the_open_findings_their_fate_in_the_close_s_commit(store) -> None:
    first, second = await _two(store)
    await store.settle_findings([FateEvent(first, Event.CHANGED, 200.0, "push abc")])

    close = CancelPR(7, 3, "pull request closed", closed_at=500.0, merged=True)
    result = await store.admit(Delivery("close-1", "pull_request", "closed"), close, now=600.0, max_attempts=5)

    assert result.outcome == "cancelled"
    fates = _fates(await store.outcome_findings(since=0.0))
    assert fates[first][0] == "fixed"  # the team acted before the merge: that stands
    assert fates[second] == ("open_at_merge", 500.0, "merged")


async def test_a_close_without_merge_is_open_at_close_and_other_pulls_are_untouched(store) -> None:
    await _two(store)
    await store.record_findings([replace(FINDING, pr_number=4, job_id=12)], now=100.0)

    close = CancelPR(7, 3, "pull request closed", closed_at=None, merged=False)
    await store.admit(Delivery("close-2", "pull_request", "closed"), close, now=600.0, max_attempts=5)

    rows = await store.outcome_findings(since=0.0)
    assert sorted((r["pr_number"], r["fate"]) for r in rows) == [
        (3, "open_at_close"),
        (3, "open_at_close"),
        (4, "open"),
    ]
    assert {r["fate_at"] for r in rows if r["pr_number"] == 3} == {600.0}  # no time in the event: the admission's


async def test_a_reopen_after_the_close_makes_its_findings_open_again_and_an_older_one_does_not(store) -> None:
    first, second = await _two(store)
    await store.settle_findings([FateEvent(first, Event.CHANGED, 200.0, "push abc")])
    close = CancelPR(7, 3, "pull request closed", closed_at=500.0, merged=False)
    await store.admit(Delivery("close-3", "pull_request", "closed"), close, now=600.0, max_attempts=5)

    def reopen(delivery: str, at: float) -> Enqueue:
        spec = JobSpec(
            repo_id=7,
            repo_full_name="octo/widgets",
            installation_id=77,
            pr_number=3,
            head_sha="b" * 40,
            details=JobDetails(action="reopened", delivery_id=delivery),
            event_at=at,
        )
        return Enqueue(spec)

    # Delivered late: a reopen older than the close changes nothing.
    await store.admit(
        Delivery("reopen-0", "pull_request", "reopened"), reopen("reopen-0", 400.0), now=700.0, max_attempts=5
    )
    assert _fates(await store.outcome_findings(since=0.0))[second] == ("open_at_close", 500.0, "closed")

    await store.admit(
        Delivery("reopen-1", "pull_request", "reopened"), reopen("reopen-1", 800.0), now=900.0, max_attempts=5
    )
    fates = _fates(await store.outcome_findings(since=0.0))
    assert fates[second] == ("open", None, None)
    assert fates[first] == ("fixed", 200.0, "push abc")  # what the team did stands


async def test_a_finding_is_found_by_its_comment(store) -> None:
    _, second = await _two(store)
    assert await store.settle_finding_of_comment(7, 5002, Event.DISMISSED, at=300.0, source="reply by ann") == [
        (second, "dismissed")
    ]
    assert await store.settle_finding_of_comment(7, 999, Event.DISMISSED, at=300.0, source="x") == []
    assert await store.settle_finding_of_comment(8, 5002, Event.DISMISSED, at=300.0, source="x") == []


async def test_a_review_run_is_kept_once_and_its_dimensions_join_its_findings(store) -> None:
    await _two(store)
    await store.record_review_run(RUN)
    await store.record_review_run(replace(RUN, model="another"))  # a retry: the first record stands

    (run,) = await store.review_runs(since=0.0)
    assert run == RUN
    rows = await store.outcome_findings(since=0.0)
    assert {(r["repo"], r["model"], r["prompt_version"], r["variant"], r["learnings"]) for r in rows} == {
        ("octo/widgets", "claude-sonnet-4-5", "abc123def456", "b", 2)
    }
    assert await store.review_runs(since=101.0) == []
    assert await store.review_runs(since=0.0, repo_id=8) == []
    assert await store.outcome_findings(since=0.0, repo_id=8) == []
    assert len(await store.outcome_findings(since=0.0, repo_id=7)) == 2
    assert await store.outcome_findings(since=100.5) == []


async def test_fates_are_counted_for_the_metrics(store) -> None:
    first, _ = await _two(store)
    await store.settle_findings([FateEvent(first, Event.CHANGED, 200.0, "push")])
    assert await store.fate_counts() == {Fate.OPEN.value: 1, Fate.FIXED.value: 1}


async def test_fates_and_review_runs_move_with_migrate_store(tmp_path, pg_schema) -> None:
    sqlite = SqliteStore(str(tmp_path / "reviewer.db"), busy_timeout_ms=2000)
    await sqlite.open()
    try:
        first, _ = await _two(sqlite)
        await sqlite.settle_findings([FateEvent(first, Event.DISMISSED, 200.0, "👎 by ann")])
        await sqlite.record_review_run(RUN)
    finally:
        await sqlite.close()
    dsn, schema = pg_schema

    report = await migrate_store(f"sqlite:///{tmp_path / 'reviewer.db'}", dsn, schema=schema, now=300.0)

    assert report.rows["review runs"] == 1
    pg = PostgresStore(dsn, schema=schema, timeout_ms=2000)
    await pg.open()
    try:
        assert _fates(await pg.outcome_findings(since=0.0))[first] == ("dismissed", 200.0, "👎 by ann")
        assert await pg.review_runs(since=0.0) == [RUN]
    finally:
        await pg.close()


async def test_the_metrics_show_the_findings_by_fate(store) -> None:
    first, _ = await _two(store)
    await store.settle_findings([FateEvent(first, Event.DISMISSED, 200.0, "👎 by ann")])

    text = (await Metrics(store).render()).decode()

    assert 'reviewer_findings_by_fate{fate="dismissed"} 1.0' in text
    assert 'reviewer_findings_by_fate{fate="open"} 1.0' in text
    assert 'reviewer_findings_by_fate{fate="fixed"} 0.0' in text


async def test_a_migration_numbered_below_0018_that_arrives_later_still_applies(
    tmp_path, pg_schema, monkeypatch
) -> None:
    """A migration numbered below the newest that arrives later (0017, the pending learnings, merged after 0018 was
    applied somewhere) is applied when it arrives: by number, each once."""
    dsn, schema = pg_schema
    stores = [
        lambda: SqliteStore(str(tmp_path / "reviewer.db"), busy_timeout_ms=2000),
        lambda: PostgresStore(dsn, schema=schema, timeout_ms=2000),
    ]
    for module in (sqlite_module, postgres_module):
        monkeypatch.setattr(
            module, "load_migrations", lambda engine: [m for m in load_migrations(engine) if m[0] != 17]
        )
    for make in stores:
        first = make()
        await first.open()
        await first.close()
    monkeypatch.undo()
    for make in stores:
        store = make()
        await store.open()
        try:
            assert await store.migrations_pending() == []
            await store._rows("SELECT status FROM learnings")  # 0017's column is there now
            await store.record_findings([FINDING], now=1.0)  # and 0018's
            assert [r["fate"] for r in await store.outcome_findings(since=0.0)] == ["open"]
        finally:
            await store.close()
