"""The drain's statements on SQLite read what they need through an index, whatever other indexes the schema holds;
the claimed rows are read without a lookup per column.

SQLite plans without statistics (the store never runs ANALYZE), so a new index can change a hot statement's plan:
migration 0011's index on (state, id) made the claim search it for state = 'queued' and sort the whole backlog to
take the next few (0.66x the drain's throughput, docs/benchmarks.md). These tests read the plans SQLite chooses.
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3

import pytest

from reviewer_app.store import statements as s
from reviewer_app.store.base import JOB_FIELDS, Job
from reviewer_app.store.sqlite import SqliteStore


def plan(path: str, stmt: s.Statement) -> list[str]:
    query = s.for_sqlite(stmt)
    assert query is not None
    conn = sqlite3.connect(path)
    try:
        numbered = [int(n) for n in re.findall(r"\?(\d+)", query)]
        n = max(numbered) if numbered else query.count("?")
        return [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {query}", [None] * n)]
    finally:
        conn.close()


@pytest.fixture
async def db(sqlite_store: SqliteStore) -> str:
    return sqlite_store.path


def test_the_claim_walks_jobs_claimable_in_order_without_sorting_the_backlog(db: str) -> None:
    steps = plan(db, s.CLAIM_QUEUED)
    assert any("USING INDEX jobs_claimable" in st for st in steps), steps
    assert not any("TEMP B-TREE" in st for st in steps), steps


def test_the_claim_keeps_its_plan_beside_an_index_on_state(db: str) -> None:
    """An index that starts with the state (an operator's, or a later migration's) does not take the claim."""
    conn = sqlite3.connect(db)
    conn.execute("CREATE INDEX operators_own ON jobs (state, id)")
    conn.close()
    steps = plan(db, s.CLAIM_QUEUED)
    assert any("USING INDEX jobs_claimable" in st for st in steps), steps
    assert not any("operators_own" in st or "TEMP B-TREE" in st for st in steps), steps


def test_no_index_on_the_jobs_table_moves_on_every_state_change_for_the_dashboard_alone(db: str) -> None:
    """Migration 0013: the dashboard's and the metrics' reads go through the indexes the drain keeps anyway."""
    conn = sqlite3.connect(db)
    try:
        indexes = {r[0]: r[1] for r in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'")}
    finally:
        conn.close()
    assert "jobs_claimable" in indexes
    assert "jobs_by_state" not in indexes and "jobs_pending_created" not in indexes
    assert "WHERE state = 'queued'" in indexes["jobs_queued_created"]
    assert "(publish_intent_at)" in indexes["jobs_awaiting_reconciliation"]


@pytest.mark.parametrize("name", ["OLDEST_PENDING", "AWAITING_RECONCILIATION", "EXPIRED_LEASES", "FAILED_SINCE"])
def test_each_read_of_a_metrics_scrape_or_the_queue_page_goes_through_an_index(db: str, name: str) -> None:
    steps = plan(db, getattr(s, name))
    if name == "OLDEST_PENDING":
        assert any("jobs_queued_created" in st for st in steps), steps
    assert not [st for st in steps if st.startswith("SCAN")], (name, steps)
    assert any("USING INDEX" in st for st in steps), (name, steps)


def test_the_jobs_per_queue_are_counted_from_the_partial_indexes_of_pending_jobs_alone(db: str) -> None:
    """Migration 0016: every scrape counts each queue's queued and running jobs; it reads the indexes that hold only
    pending rows (jobs_claimable leads with the queue), never the table's history."""
    steps = plan(db, s.PENDING_BY_QUEUE)
    scans = [st for st in steps if st.startswith(("SCAN", "SEARCH"))]
    assert scans == ["SCAN jobs USING INDEX jobs_claimable", "SCAN jobs USING INDEX jobs_running"], steps


@pytest.mark.parametrize(
    "name",
    [
        "FINISH_IF_LEASE_HELD",
        "FINISH_ATTEMPT",
        "REQUEUE_IF_LEASE_HELD",
        "RENEW_IF_LEASE_HELD",
        "RENEW_MANY_IF_LEASE_HELD",
        "ADD_ATTEMPT_USAGE",
        "FINISH_JOBS_FROM_JSON",
        "CLOSE_ATTEMPTS_FROM_JSON",
    ],
)
def test_each_fenced_write_of_the_drain_finds_its_row_by_key(db: str, name: str) -> None:
    steps = plan(db, getattr(s, name))
    scans = [st for st in steps if st.startswith("SCAN") and "json_each" not in st]
    assert not scans, (name, steps)
    assert any(st.startswith("SEARCH") for st in steps), (name, steps)


async def test_a_claimed_row_is_read_in_field_order_and_a_row_of_other_order_by_name(db: str) -> None:
    """statements.JOB_COLUMNS is the Job's field order (the claim's rows are taken as they come); a row with the
    columns in another order, or lacking those later migrations added, reads the same job."""
    assert tuple(c.strip() for c in s.JOB_COLUMNS.split(",")) == JOB_FIELDS
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        conn.execute(
            "INSERT INTO jobs (revision_key, repo_id, repo_full_name, installation_id, pr_number, head_sha, trigger,"
            " priority, state, details, attempts, max_attempts, next_attempt_at, created_at, updated_at,"
            " cancel_reason) VALUES ('k', 1, 'o/r', 7, 3, 'abc', 'auto', 10, 'cancelled', '{\"title\": \"t\"}',"
            " 0, 3, 1.0, 1.0, 1.0, 'pr_closed')"
        )
        in_order = Job.from_row(conn.execute(f"SELECT {s.JOB_COLUMNS} FROM jobs").fetchone())
        reversed_columns = ", ".join(reversed(JOB_FIELDS))
        by_name = Job.from_row(conn.execute(f"SELECT {reversed_columns} FROM jobs").fetchone())
        older = ", ".join(n for n in JOB_FIELDS if n not in ("check_run_claim", "cancel_reason", "pokes"))
        without_later_columns = Job.from_row(conn.execute(f"SELECT {older} FROM jobs").fetchone())
    finally:
        conn.close()
    assert in_order == by_name == Job(**{n: getattr(in_order, n) for n in JOB_FIELDS})  # as __init__ makes it
    with pytest.raises(dataclasses.FrozenInstanceError):
        in_order.state = "queued"  # type: ignore[misc]
    assert (in_order.state, in_order.details.title, in_order.cancel_reason) == ("cancelled", "t", "pr_closed")
    assert (without_later_columns.cancel_reason, without_later_columns.pokes) == (None, 0)
    assert without_later_columns.details == in_order.details


@pytest.mark.parametrize(("state", "index"), [("running", "jobs_running")])
def test_the_list_of_one_pending_state_reads_its_partial_index(db: str, state: str, index: str) -> None:
    """The dashboard's running jobs (and a state filter) read the state's partial index, not the whole history."""
    found = s.list_jobs_query(states=[state], repo=None, pr_number=None, before_id=None)
    assert found is not None
    steps = plan(db, found[0])
    assert any(f"USING INDEX {index}" in st for st in steps), steps
    assert s.for_postgres(found[0]) is not None and "INDEXED BY" not in s.for_postgres(found[0])
    assert s.list_jobs_query(states=["no-such-state"], repo=None, pr_number=None, before_id=None) is None
