"""The findings table (migration 0009) on both stores: kept once, read while open, linked to threads, resolved,
and moved by migrate-store."""

from __future__ import annotations

from dataclasses import replace

from reviewer_app.store.base import Finding
from reviewer_app.store.migrate import migrate_store
from reviewer_app.store.postgres import PostgresStore
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
    before=("return 1", "def f2():"),
    after=("def f3():", ""),
    severity="warning",
    title="f2 returns a constant",
    body_digest="d1",
)


async def test_findings_are_kept_once_and_read_back_while_open(store) -> None:
    other = replace(FINDING, line=6, body_digest="d2")
    elsewhere = replace(FINDING, pr_number=4)
    await store.record_findings([FINDING, other, elsewhere], now=100.0)
    await store.record_findings([FINDING], now=200.0)  # the same review recorded again: nothing new

    found = await store.open_findings(7, 3)

    assert [(f.line, f.body_digest) for f in found] == [(4, "d1"), (6, "d2")]
    first = found[0]
    assert replace(first, id=None) == FINDING  # every field round-trips, the neighbourhood's empty line too
    assert first.id is not None


async def test_links_fill_in_what_was_unknown_and_never_overwrite(store) -> None:
    await store.record_findings([FINDING], now=100.0)
    (stored,) = await store.open_findings(7, 3)
    assert stored.id is not None

    await store.link_findings([(stored.id, 5001, None)])
    await store.link_findings([(stored.id, 9999, "PRRT_5001")])

    (linked,) = await store.open_findings(7, 3)
    assert (linked.comment_id, linked.thread_id) == (5001, "PRRT_5001")


async def test_resolved_findings_leave_the_open_list_and_are_counted(store) -> None:
    await store.record_findings([FINDING, replace(FINDING, line=6, body_digest="d2")], now=100.0)
    first, second = await store.open_findings(7, 3)
    assert first.id is not None

    await store.resolve_findings([first.id], now=150.0)
    await store.resolve_findings([first.id], now=160.0)  # again: still one

    assert [f.id for f in await store.open_findings(7, 3)] == [second.id]
    assert await store.resolved_findings(7, 3) == 1
    assert await store.resolved_findings(7, 4) == 0


async def test_findings_move_with_migrate_store(tmp_path, pg_schema) -> None:
    sqlite = SqliteStore(str(tmp_path / "reviewer.db"), busy_timeout_ms=2000)
    await sqlite.open()
    try:
        await sqlite.record_findings([FINDING, replace(FINDING, line=6, body_digest="d2")], now=100.0)
        first, _ = await sqlite.open_findings(7, 3)
        assert first.id is not None
        await sqlite.resolve_findings([first.id], now=150.0)
    finally:
        await sqlite.close()
    dsn, schema = pg_schema

    report = await migrate_store(f"sqlite:///{tmp_path / 'reviewer.db'}", dsn, schema=schema, now=200.0)

    assert report.rows["findings"] == 2
    pg = PostgresStore(dsn, schema=schema, timeout_ms=2000)
    await pg.open()
    try:
        assert [f.line for f in await pg.open_findings(7, 3)] == [6]
        assert await pg.resolved_findings(7, 3) == 1
        await pg.record_findings([replace(FINDING, job_id=12)], now=300.0)  # new ids start past the copied ones
        assert len(await pg.open_findings(7, 3)) == 2
    finally:
        await pg.close()
