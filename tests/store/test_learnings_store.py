"""Learnings and finding feedback (migrations 0015, 0017) on both stores: kept once, bounded per repository, read,
forgotten, counted when applied, pending until confirmed, and moved by migrate-store."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from reviewer_app.core.admission import Enqueue, JobSpec
from reviewer_app.core.job_records import JobDetails
from reviewer_app.core.learnings import LearningLimitReached, make_draft
from reviewer_app.store.base import Delivery
from reviewer_app.store.migrate import migrate_store
from reviewer_app.store.postgres import PostgresStore
from reviewer_app.store.schema import load_migrations
from reviewer_app.store.sqlite import SqliteStore

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
DRAFT = make_draft(
    repo="7",
    text="Do not flag missing input validation in internal helpers.",
    path_glob="src/internal/**",
    source_kind="command",
    source_url="https://github.com/o/r/pull/3#issuecomment-5001",
    author="alice",
    created_at=T0,
)


async def test_a_learning_is_kept_once_and_reads_back_whole(store) -> None:
    first = await store.add_learning(DRAFT, limit=10)
    again = await store.add_learning(replace(DRAFT, author="bob", kind="prefer"), limit=10)  # same repo, glob, text

    assert again == first
    assert first.id > 0
    assert (first.repo, first.path_glob, first.text, first.kind) == ("7", "src/internal/**", DRAFT.text, "do-not-flag")
    assert (first.source_kind, first.source_url, first.author, first.created_at) == (
        "command",
        DRAFT.source_url,
        "alice",
        T0,
    )
    assert (first.times_applied, first.last_applied) == (0, None)
    assert await store.list_learnings("7") == [first]
    assert await store.get_learning("7", first.id) == first


async def test_no_glob_and_another_glob_are_other_learnings(store) -> None:
    a = await store.add_learning(DRAFT, limit=10)
    b = await store.add_learning(replace(DRAFT, path_glob=None), limit=10)
    c = await store.add_learning(replace(DRAFT, path_glob="lib/**"), limit=10)

    assert len({a.id, b.id, c.id}) == 3
    assert b.path_glob is None
    assert [x.id for x in await store.list_learnings("7")] == [a.id, b.id, c.id]


async def test_the_limit_is_per_repository_and_an_existing_learning_passes_it(store) -> None:
    kept = await store.add_learning(DRAFT, limit=1)
    with pytest.raises(LearningLimitReached):
        await store.add_learning(replace(DRAFT, text="Prefer early returns."), limit=1)
    assert await store.add_learning(DRAFT, limit=1) == kept  # the same learning again is no new one
    other_repo = await store.add_learning(replace(DRAFT, repo="8"), limit=1)
    assert other_repo.repo == "8"
    assert [x.id for x in await store.list_learnings("7")] == [kept.id]


async def test_concurrent_adds_never_pass_the_limit(store) -> None:
    drafts = [replace(DRAFT, text=f"Rule number {n} of the team.") for n in range(6)]
    results = await asyncio.gather(*(store.add_learning(d, limit=3) for d in drafts), return_exceptions=True)

    assert sum(1 for r in results if isinstance(r, LearningLimitReached)) == 3
    assert len(await store.list_learnings("7")) == 3


async def test_a_learning_is_read_and_removed_only_through_its_own_repository(store) -> None:
    kept = await store.add_learning(DRAFT, limit=10)

    assert await store.get_learning("8", kept.id) is None
    assert await store.remove_learning("8", kept.id) is False
    assert await store.remove_learning("7", kept.id) is True
    assert await store.remove_learning("7", kept.id) is False
    assert await store.get_learning("7", kept.id) is None
    assert await store.list_learnings("7") == []


async def test_a_pending_learning_is_activated_once_and_its_acknowledgement_is_kept(store) -> None:
    url = "https://github.com/o/r/pull/3#discussion_r77"
    pending = await store.add_learning(replace(DRAFT, status="pending", source_kind="reply", source_url=url), limit=10)
    active = await store.add_learning(replace(DRAFT, text="Prefer early returns.", kind="prefer"), limit=10)
    assert (pending.status, pending.active, active.status) == ("pending", False, "active")
    assert await store.pending_learnings_with_ack("7", limit=5) == []  # not acknowledged yet

    await store.set_learning_ack("7", url, 9001)
    await store.set_learning_ack("8", url, 9002)  # another repository's: nothing
    [acked] = await store.pending_learnings_with_ack("7", limit=5)
    assert (acked.id, acked.ack_comment_id) == (pending.id, 9001)

    assert await store.activate_learning("8", pending.id) is None  # only through its own repository
    confirmed = await store.activate_learning("7", pending.id)
    assert confirmed is not None and confirmed.status == "active" and confirmed.ack_comment_id == 9001
    assert await store.activate_learning("7", pending.id) is None  # active already
    assert await store.activate_learning("7", active.id) is None
    assert await store.pending_learnings_with_ack("7", limit=5) == []
    assert [x.status for x in await store.list_learnings("7")] == ["active", "active"]


async def test_applied_learnings_count_and_keep_the_latest_time(store) -> None:
    a = await store.add_learning(DRAFT, limit=10)
    b = await store.add_learning(replace(DRAFT, text="Prefer early returns."), limit=10)
    later, earlier = datetime(2026, 12, 3, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC)

    await store.mark_learnings_applied([a.id, b.id], later)
    await store.mark_learnings_applied([a.id], earlier)  # a late writer never moves last_applied back
    await store.mark_learnings_applied([], later)

    got = {x.id: x for x in await store.list_learnings("7")}
    assert (got[a.id].times_applied, got[a.id].last_applied) == (2, later)
    assert (got[b.id].times_applied, got[b.id].last_applied) == (1, later)


async def test_feedback_is_counted_once_per_person_and_signal(store) -> None:
    at = T0
    for author, signal in [("alice", "-1"), ("alice", "-1"), ("bob", "-1"), ("carol", "+1"), ("alice", "+1")]:
        await store.record_finding_feedback("7", "key-1", signal, author, "https://github.com/o/r/pull/3", at)
    await store.record_finding_feedback("7", "key-2", "+1", "bob", None, at)
    await store.record_finding_feedback("8", "key-1", "-1", "bob", None, at)

    assert await store.finding_feedback_counts("7") == {"key-1": (2, 2), "key-2": (1, 0)}
    assert await store.finding_feedback_counts("9") == {}
    with pytest.raises(ValueError):
        await store.record_finding_feedback("7", "key-1", "heart", "bob", None, at)
    with pytest.raises(ValueError):
        await store.record_finding_feedback("octo/widgets", "key-1", "-1", "bob", None, at)


async def test_learnings_and_feedback_move_with_migrate_store(tmp_path, pg_schema) -> None:
    sqlite = SqliteStore(str(tmp_path / "reviewer.db"), busy_timeout_ms=2000)
    await sqlite.open()
    try:
        kept = await sqlite.add_learning(DRAFT, limit=10)
        await sqlite.add_learning(replace(DRAFT, path_glob=None, kind="always-check"), limit=10)
        await sqlite.mark_learnings_applied([kept.id], T0)
        await sqlite.add_learning(replace(DRAFT, text="Do not flag globals.", status="pending"), limit=10)
        await sqlite.record_finding_feedback("7", "key-1", "-1", "alice", None, T0)
        before = await sqlite.list_learnings("7")
    finally:
        await sqlite.close()
    dsn, schema = pg_schema

    report = await migrate_store(f"sqlite:///{tmp_path / 'reviewer.db'}", dsn, schema=schema, now=200.0)

    assert (report.rows["learnings"], report.rows["finding feedback"]) == (3, 1)
    assert [x.status for x in before] == ["active", "active", "pending"]  # the status moves too (migration 0017)
    pg = PostgresStore(dsn, schema=schema, timeout_ms=2000)
    await pg.open()
    try:
        assert await pg.list_learnings("7") == before
        assert await pg.finding_feedback_counts("7") == {"key-1": (0, 1)}
        new = await pg.add_learning(replace(DRAFT, text="Prefer early returns."), limit=10)
        assert new.id > max(x.id for x in before)  # new ids start past the copied ones
    finally:
        await pg.close()


async def test_repositories_with_learnings_or_feedback_are_named_by_their_newest_job(store) -> None:
    spec = JobSpec(
        repo_id=7,
        repo_full_name="Octo/Widgets",
        installation_id=1,
        pr_number=3,
        head_sha="a" * 40,
        details=JobDetails(),
    )
    await store.admit(Delivery("d-1", "pull_request", "opened"), Enqueue(spec), now=1.0, max_attempts=5)
    await store.add_learning(DRAFT, limit=10)
    await store.record_finding_feedback("9", "key-1", "-1", "bob", None, T0)  # feedback only, no job names it

    assert await store.learning_repos() == [("7", "Octo/Widgets"), ("9", None)]
    assert await store.repo_id_of_name("octo/widgets") == 7
    assert await store.repo_id_of_name("octo/other") is None


async def test_migration_0017_keeps_old_learnings_active_and_anchors_a_resolved_top_level_file(tmp_path) -> None:
    # A database as it stood before 0017: a resolved thread on the top-level config.py kept the glob "config.py",
    # which matches every config.py (point 11 of issue 39).
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at REAL)")
    for version, name, script in load_migrations("sqlite"):
        if version < 17:
            for statement in script.split(";\n"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)", (version, name))
    insert = "INSERT INTO learnings (repo, path_glob, text, kind, source_kind, author, created_at) VALUES (?, ?, ?, ?, ?, ?, 0)"
    conn.execute(insert, ("7", "config.py", "Do not flag Debug mode is left on.", "do-not-flag", "resolved", "al"))
    conn.execute(insert, ("7", "src/app.py", "Do not flag unclosed files.", "do-not-flag", "resolved", "al"))
    conn.execute(insert, ("7", "*.sql", "Do not flag long migrations.", "do-not-flag", "command", "al"))
    conn.commit()
    conn.close()

    store = SqliteStore(str(path), busy_timeout_ms=2000)
    await store.open()
    try:
        learnings = await store.list_learnings("7")
    finally:
        await store.close()
    assert [(x.path_glob, x.status) for x in learnings] == [
        ("/config.py", "active"),
        ("src/app.py", "active"),
        ("*.sql", "active"),  # a glob someone wrote stays as written
    ]
