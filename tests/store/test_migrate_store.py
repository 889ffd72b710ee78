"""`reviewer-app migrate-store`: a stopped SQLite deployment's backlog moves to PostgreSQL, once, with its history."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest

from reviewer_app.cli.main import main
from reviewer_app.core.admission import Effect, Enqueue, Reply
from reviewer_app.core.queues import ANSWERS, REVIEWS
from reviewer_app.core.states import JobState
from reviewer_app.store.base import Delivery
from reviewer_app.store.migrate import MOVED_WHILE_RUNNING, MigrationError, migrate_store
from reviewer_app.store.postgres import PostgresStore
from reviewer_app.store.sqlite import SqliteStore
from tests.pg import create_schema, drop_schema, postgres_dsn
from tests.store.test_store_contract import NOW, spec

LATER = NOW + 1000


async def sqlite_backlog(path: Path) -> dict[str, int]:
    """A SQLite database with a job in every state; the ids by what happened to them."""
    store = SqliteStore(str(path))
    await store.open()
    n = 0

    async def admit(pr: int, head: int = 1) -> int:
        nonlocal n
        n += 1
        result = await store.admit(
            Delivery(f"m-{n}", "pull_request", "opened"), Enqueue(spec(pr=pr, head=head)), now=NOW, max_attempts=3
        )
        assert result.job_id is not None
        return result.job_id

    try:
        ids = {"queued": await admit(1), "running": await admit(2), "failed": await admit(3)}
        ids["cancelled"] = await admit(4)
        ids["succeeded"] = await admit(5)
        ids["superseded"] = await admit(6, head=1)
        ids["superseder"] = await admit(6, head=2)
        leases = {le.job_id: le for le in await store.claim(owner="old", limit=10, now=NOW, lease_seconds=60)}
        assert await store.retry_if_lease_held(leases[ids["queued"]], now=NOW, at=NOW + 5, error="flaky")
        assert await store.fail_if_lease_held(leases[ids["failed"]], now=NOW, error="PR deleted")
        assert await store.complete_if_lease_held(leases[ids["succeeded"]], now=NOW, outcome="reviewed")
        assert await store.retry_if_lease_held(leases[ids["superseder"]], now=NOW, at=NOW, error="x")
        assert await store.cancel_job(ids["cancelled"], now=NOW, reason="by operator")
        await store.set_setting("queue_paused", "0")
    finally:
        await store.close()
    return ids


async def open_target(dsn: str, schema: str) -> PostgresStore:
    store = PostgresStore(dsn, schema=schema)
    await store.open()
    return store


async def test_the_backlog_moves_and_keeps_its_ids_history_and_dedup(
    tmp_path: Path, pg_schema: tuple[str, str]
) -> None:
    dsn, schema = pg_schema
    ids = await sqlite_backlog(tmp_path / "reviewer.db")
    report = await migrate_store(f"sqlite:///{tmp_path / 'reviewer.db'}", dsn, schema=schema, now=LATER)
    assert report.jobs_by_state == {"cancelled": 1, "failed": 1, "queued": 3}
    assert report.handed_back == 1 and report.rows["deliveries"] == 7

    pg = await open_target(dsn, schema)
    try:
        moved = {j.id: j for j in await pg.list_jobs()}
        assert set(moved) == {ids[k] for k in ("queued", "running", "failed", "cancelled", "superseder")}
        assert moved[ids["failed"]].last_error == "PR deleted"
        assert moved[ids["running"]].state == JobState.QUEUED and moved[ids["running"]].lease_token is None
        [attempt] = await pg.attempts_of(ids["running"])
        assert (attempt.outcome, attempt.error, attempt.finished_at) == ("lease_expired", MOVED_WHILE_RUNNING, LATER)
        assert [a.outcome for a in await pg.attempts_of(ids["queued"])] == ["retry"]
        # A redelivery of a webhook SQLite already admitted is still a duplicate; new jobs get fresh ids.
        again = await pg.admit(
            Delivery("m-1", "pull_request", "opened"), Enqueue(spec(pr=9)), now=LATER, max_attempts=3
        )
        assert again.outcome == "duplicate-delivery" and again.job_id == ids["queued"]
        fresh = await pg.admit(
            Delivery("new", "pull_request", "opened"), Enqueue(spec(pr=9)), now=LATER, max_attempts=3
        )
        assert fresh.job_id is not None and fresh.job_id > max(ids.values())
        leases = await pg.claim(owner="pg", limit=10, now=LATER, lease_seconds=60)
        by_job = {le.job_id: le.attempt for le in leases}
        assert by_job == {ids["queued"]: 2, ids["running"]: 2, ids["superseder"]: 2, fresh.job_id: 1}
        assert await pg.get_setting("queue_paused") == "0"
    finally:
        await pg.close()
    with pytest.raises(MigrationError, match="already holds"):
        await migrate_store(f"sqlite:///{tmp_path / 'reviewer.db'}", dsn, schema=schema, now=LATER)


async def test_all_copies_finished_jobs_and_their_supersession(tmp_path: Path, pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    ids = await sqlite_backlog(tmp_path / "reviewer.db")
    report = await migrate_store(
        f"sqlite:///{tmp_path / 'reviewer.db'}", dsn, schema=schema, now=LATER, include_all=True
    )
    assert report.rows["jobs"] == len(ids)
    pg = await open_target(dsn, schema)
    try:
        old = await pg.get_job(ids["superseded"])
        assert old is not None and old.state == JobState.SUPERSEDED and old.superseded_by == ids["superseder"]
        assert (await pg.get_job(ids["succeeded"])).outcome == "reviewed"  # type: ignore[union-attr]
    finally:
        await pg.close()


async def test_ids_of_finished_jobs_left_behind_are_never_handed_out_again(
    tmp_path: Path, pg_schema: tuple[str, str]
) -> None:
    # Job ids are in review markers and check runs' external_id, effect ids in help replies' markers: the newest job
    # and the newest effect are finished, so they stay behind, and PostgreSQL must still count from above them.
    dsn, schema = pg_schema
    path = tmp_path / "reviewer.db"
    await sqlite_backlog(path)
    sqlite = SqliteStore(str(path))
    await sqlite.open()
    try:
        newest = await sqlite.admit(
            Delivery("m-last", "pull_request", "opened"), Enqueue(spec(pr=7)), now=NOW, max_attempts=3
        )
        leases = {le.job_id: le for le in await sqlite.claim(owner="old", limit=10, now=NOW, lease_seconds=60)}
        assert await sqlite.complete_if_lease_held(leases[newest.job_id], now=NOW, outcome="reviewed")
        await sqlite.admit(
            Delivery("m-help", "issue_comment", "created"),
            Reply("help", (Effect("comment", 7, "o/r", 7, "help text"),)),
            now=NOW,
            max_attempts=3,
        )
        [effect] = await sqlite.pending_effects()
        await sqlite.mark_effect(effect["id"], now=NOW, error=None, done=True)
    finally:
        await sqlite.close()
    await migrate_store(f"sqlite:///{path}", dsn, schema=schema, now=LATER)

    pg = await open_target(dsn, schema)
    try:
        assert await pg.get_job(newest.job_id) is None  # not copied
        fresh = await pg.admit(
            Delivery("new", "pull_request", "opened"), Enqueue(spec(pr=9)), now=LATER, max_attempts=3
        )
        assert fresh.job_id is not None and fresh.job_id > newest.job_id
        await pg.admit(
            Delivery("new-help", "issue_comment", "created"),
            Reply("help", (Effect("comment", 7, "o/r", 9, "help text"),)),
            now=LATER,
            max_attempts=3,
        )
        [new_effect] = await pg.pending_effects()
        assert new_effect["id"] > effect["id"]
    finally:
        await pg.close()


async def test_the_target_sequence_is_never_moved_back(tmp_path: Path, pg_schema: tuple[str, str]) -> None:
    # A target whose sequence already went further (jobs created and deleted, a rolled-back copy: sequences do not
    # roll back) may have handed those ids out already.
    dsn, schema = pg_schema
    await sqlite_backlog(tmp_path / "reviewer.db")
    await (await open_target(dsn, schema)).close()  # the tables exist
    conn = await asyncpg.connect(dsn, server_settings={"search_path": f'"{schema}"'})
    try:
        await conn.execute("SELECT setval(pg_get_serial_sequence('jobs', 'id'), 5000)")
    finally:
        await conn.close()
    await migrate_store(f"sqlite:///{tmp_path / 'reviewer.db'}", dsn, schema=schema, now=LATER)
    pg = await open_target(dsn, schema)
    try:
        fresh = await pg.admit(
            Delivery("new", "pull_request", "opened"), Enqueue(spec(pr=9)), now=LATER, max_attempts=3
        )
        assert fresh.job_id == 5001
    finally:
        await pg.close()


async def test_a_live_lease_stops_the_move_until_forced(tmp_path: Path, pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    await sqlite_backlog(tmp_path / "reviewer.db")
    with pytest.raises(MigrationError, match="live lease"):
        await migrate_store(f"sqlite:///{tmp_path / 'reviewer.db'}", dsn, schema=schema, now=NOW + 1)
    pg = await open_target(dsn, schema)
    try:
        assert await pg.list_jobs() == []  # nothing was written
    finally:
        await pg.close()
    report = await migrate_store(f"sqlite:///{tmp_path / 'reviewer.db'}", dsn, schema=schema, now=NOW + 1, force=True)
    assert report.handed_back == 1


def test_the_command_copies_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dsn = postgres_dsn()
    schema = asyncio.run(create_schema(dsn))
    try:
        asyncio.run(sqlite_backlog(tmp_path / "reviewer.db"))
        argv = [
            "migrate-store",
            "--from",
            f"sqlite:///{tmp_path / 'reviewer.db'}",
            "--to",
            dsn,
            "--schema",
            schema,
            "--force",
        ]
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "copied 5 job(s)" in out and "7 deliveries" in out
        assert main(argv) == 1
        assert "already holds 5 job(s)" in capsys.readouterr().err
        assert main(["migrate-store", "--from", "sqlite:///nowhere.db", "--to", dsn]) == 1
        assert "does not exist" in capsys.readouterr().err
        # URLs of the wrong kind are usage errors: exit 2, as for every command.
        assert main(["migrate-store", "--from", dsn, "--to", dsn]) == 2
        assert "is not a SQLite URL" in capsys.readouterr().err
        assert main(["migrate-store", "--from", f"sqlite:///{tmp_path / 'reviewer.db'}", "--to", "mysql://x/y"]) == 2
        assert "is not a PostgreSQL URL" in capsys.readouterr().err
    finally:
        asyncio.run(drop_schema(dsn, schema))


async def test_a_pruned_newest_job_id_is_never_handed_out_again_by_sqlite_nor_after_migration(
    tmp_path: Path, pg_schema: tuple[str, str]
) -> None:
    # Retention may delete the newest finished job; SQLite (AUTOINCREMENT since migration 0006) and the sequence set
    # by migrate-store both remember its id.
    import sqlite3

    dsn, schema = pg_schema
    path = tmp_path / "reviewer.db"
    sqlite = SqliteStore(str(path))
    await sqlite.open()
    try:
        gone = await sqlite.admit(
            Delivery("p-1", "pull_request", "opened"), Enqueue(spec(pr=1)), now=NOW, max_attempts=3
        )
    finally:
        await sqlite.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM jobs WHERE id = ?", (gone.job_id,))
    sqlite = SqliteStore(str(path))
    await sqlite.open()
    try:
        after = await sqlite.admit(
            Delivery("p-2", "pull_request", "opened"), Enqueue(spec(pr=2)), now=NOW, max_attempts=3
        )
        assert after.job_id is not None and gone.job_id is not None and after.job_id > gone.job_id
    finally:
        await sqlite.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM jobs WHERE id = ?", (after.job_id,))
    await migrate_store(f"sqlite:///{path}", dsn, schema=schema, now=LATER)
    pg = await open_target(dsn, schema)
    try:
        fresh = await pg.admit(
            Delivery("p-3", "pull_request", "opened"), Enqueue(spec(pr=3)), now=LATER, max_attempts=3
        )
        assert fresh.job_id is not None and fresh.job_id > after.job_id
    finally:
        await pg.close()


async def test_a_queued_answer_moves_into_the_answers_queue_and_reviews_stay_in_theirs(
    tmp_path: Path, pg_schema: tuple[str, str]
) -> None:
    # jobs.queue is generated from the trigger on both sides (migration 0016): the copy leaves it to PostgreSQL.
    dsn, schema = pg_schema
    store = SqliteStore(str(tmp_path / "reviewer.db"))
    await store.open()
    try:
        answer = spec(pr=2, head="", trigger="reply:77", priority=5)
        for n, s in enumerate((spec(pr=1), answer)):
            await store.admit(Delivery(f"q-{n}", "pull_request", "opened"), Enqueue(s), now=NOW, max_attempts=3)
    finally:
        await store.close()
    report = await migrate_store(f"sqlite:///{tmp_path / 'reviewer.db'}", dsn, schema=schema, now=LATER)
    assert report.rows["jobs"] == 2
    pg = await open_target(dsn, schema)
    try:
        [asked] = await pg.claim(owner="w", limit=5, now=LATER, lease_seconds=30, queue=ANSWERS)
        [reviewed] = await pg.claim(owner="w", limit=5, now=LATER, lease_seconds=30, queue=REVIEWS)
        assert (asked.job.trigger, reviewed.job.trigger) == ("reply:77", "auto")
    finally:
        await pg.close()
