"""The store's drivers: no backend imports the other, and PostgreSQL commits concurrent admissions together."""

from __future__ import annotations

import ast
import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from reviewer_app.core.admission import Enqueue, JobSpec, pause_key
from reviewer_app.store import procedures as p
from reviewer_app.store import statements as s
from reviewer_app.store.base import AdmitResult, Delivery, StoreUnavailable
from reviewer_app.store.postgres import PostgresStore
from tests.helpers import sha

STORE = Path(__file__).resolve().parents[2] / "reviewer_app" / "store"
BACKENDS = {"sqlite": {"sqlite.py"}, "postgres": {"postgres.py", "postgres_wakeups.py", "migrate.py"}}


def imported_store_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("reviewer_app.store"):
            names.add(node.module.removeprefix("reviewer_app.store").lstrip("."))
            if node.module == "reviewer_app.store":
                names.update(a.name for a in node.names)
    return names


@pytest.mark.parametrize("engine", sorted(BACKENDS))
def test_no_backend_module_imports_the_other_backend(engine: str) -> None:
    (other,) = set(BACKENDS) - {engine}
    others = {f.removesuffix(".py") for f in BACKENDS[other]}
    for name in BACKENDS[engine]:
        assert not imported_store_modules(STORE / name) & others, f"{name} imports the {other} backend"


def test_the_shared_modules_import_no_backend() -> None:
    backends = {f.removesuffix(".py") for files in BACKENDS.values() for f in files}
    shared = [STORE / name for name in ("base.py", "records.py", "workers.py", "driven.py", "schema.py")]
    shared += sorted((STORE / "procedures").glob("*.py")) + sorted((STORE / "statements").glob("*.py"))
    for path in shared:
        assert not imported_store_modules(path) & backends, path.relative_to(STORE)


def test_a_shared_statement_is_renumbered_for_postgres_and_a_dialect_pair_is_taken_as_written() -> None:
    assert s.for_postgres("SELECT ? WHERE x = '?' AND y = ?") == "SELECT $1 WHERE x = '?' AND y = $2"
    assert s.for_sqlite(s.LOCK_PR_ADMISSION) is None  # one writer: nothing to lock
    assert s.for_postgres(s.RECORD_CLAIMED_ATTEMPTS) is None  # the claim statement writes them


def enqueue(n: int, *, installation: int = 7) -> tuple[Delivery, Enqueue]:
    spec = JobSpec(repo_id=1, repo_full_name="o/r", installation_id=installation, pr_number=n, head_sha=sha(n))
    return Delivery(f"pgw-{n}", "pull_request", "opened"), Enqueue(spec)


class CountingAdmissions(PostgresStore):
    """The real store, counting the admissions each of its transactions committed."""

    def __init__(self, dsn: str, schema: str, timeout_ms: int = 2000) -> None:
        super().__init__(dsn, schema=schema, timeout_ms=timeout_ms)
        self.transactions: list[int] = []  # admissions per committed transaction
        self.tried: list[int] = []  # admissions per transaction begun

    async def _run_admissions(self, batch):  # type: ignore[no-untyped-def]
        self.tried.append(len(batch))
        results = await super()._run_admissions(batch)
        self.transactions.append(len(batch))
        return results


@pytest.fixture
async def counting(pg_schema: tuple[str, str]) -> AsyncIterator[CountingAdmissions]:
    store = CountingAdmissions(*pg_schema)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def test_concurrent_admissions_share_transactions_and_each_gets_its_own_answer(
    counting: CountingAdmissions,
) -> None:
    results = await asyncio.gather(
        *(counting.admit(d, e, now=time.time(), max_attempts=3) for d, e in map(enqueue, range(200)))
    )
    assert [r.outcome for r in results] == ["enqueued"] * 200
    assert len({r.job_id for r in results}) == 200
    assert sum(counting.transactions) == 200
    assert len(counting.transactions) < 200  # group commit: fewer transactions than admissions


async def test_a_redelivery_in_the_same_batch_is_a_duplicate(counting: CountingAdmissions) -> None:
    d, e = enqueue(1)
    first, again = await asyncio.gather(*(counting.admit(d, e, now=time.time(), max_attempts=3) for _ in range(2)))
    assert sorted([first.outcome, again.outcome]) == ["duplicate-delivery", "enqueued"]
    assert len(await counting.list_jobs()) == 1


async def test_an_admission_that_fails_on_its_own_fails_alone(counting: CountingAdmissions) -> None:
    def broken() -> p.Procedure[AdmitResult]:
        yield p.Count(s.UPSERT_SETTING, ("half-written", "x"))
        raise RuntimeError("a bug in one admission")

    admissions = [counting.admit(d, e, now=time.time(), max_attempts=3) for d, e in map(enqueue, range(20))]
    outcomes = await asyncio.gather(counting._admit(broken, (0, 0, 0)), *admissions, return_exceptions=True)
    assert isinstance(outcomes[0], RuntimeError)
    assert [r.outcome for r in outcomes[1:]] == ["enqueued"] * 20  # type: ignore[union-attr]
    assert await counting.get_setting("half-written") is None  # its partial write was rolled back
    assert len(await counting.list_jobs()) == 20


async def test_an_admission_after_close_is_refused(pg_schema: tuple[str, str]) -> None:
    store = PostgresStore(pg_schema[0], schema=pg_schema[1])
    await store.open()
    await store.close()
    d, e = enqueue(1)
    with pytest.raises(StoreUnavailable):
        await store.admit(d, e, now=time.time(), max_attempts=3)


async def test_a_lock_held_past_the_timeout_fails_the_batch_once_not_each_admission_again(
    pg_schema: tuple[str, str],
) -> None:
    store = CountingAdmissions(*pg_schema, timeout_ms=200)
    await store.open()
    holder = await asyncpg.connect(pg_schema[0])
    try:
        # Another host's uninstall of installation 7 holds its lock (exclusively) past our lock timeout.
        await holder.execute("SELECT pg_advisory_lock(hashtextextended('reviewer-app:installation:' || 7::bigint, 0))")
        outcomes = await asyncio.gather(
            *(store.admit(d, e, now=time.time(), max_attempts=3) for d, e in map(enqueue, range(5))),
            return_exceptions=True,
        )
        assert all(isinstance(o, StoreUnavailable) for o in outcomes), outcomes
        assert sum(store.tried) == 5  # each admission was tried once: none of them alone again
        assert store.transactions == []
    finally:
        await holder.close()
        await store.close()


async def test_heads_of_one_pull_request_admitted_together_apply_in_arrival_order(store) -> None:
    heads = [
        JobSpec(repo_id=1, repo_full_name="o/r", installation_id=7, pr_number=1, head_sha=sha(h)) for h in (1, 2, 3)
    ]
    other = JobSpec(repo_id=1, repo_full_name="o/r", installation_id=7, pr_number=2, head_sha=sha(9))
    results = await asyncio.gather(
        *(
            store.admit(Delivery(f"h-{i}", "pull_request", "synchronize"), Enqueue(sp), now=time.time(), max_attempts=3)
            for i, sp in enumerate([*heads, other])
        )
    )
    assert [r.outcome for r in results] == ["enqueued"] * 4
    queued = {j.head_sha for j in await store.list_jobs(states=["queued"])}
    assert queued == {sha(3), sha(9)}  # each newer head superseded the one admitted before it


async def test_sqlite_writes_concurrent_finishes_as_two_statements_for_all(sqlite_store) -> None:
    """Twelve finishes arriving together: one UPDATE of the jobs and one of their attempts, not a pair per job."""
    for pr in range(1, 13):
        await sqlite_store.admit(
            Delivery(f"d{pr}", "pull_request", "opened"),
            Enqueue(JobSpec(1, "o/r", 7, pr, sha(pr), "auto", 10)),
            now=1.0,
            max_attempts=3,
        )
    leases = await sqlite_store.claim(owner="w", limit=20, now=1.0, lease_seconds=60)
    assert len(leases) == 12
    seen: list[str] = []
    sqlite_store._writer.set_trace_callback(seen.append)
    try:
        held = await asyncio.gather(*(sqlite_store.complete_if_lease_held(le, now=2.0, outcome="ok") for le in leases))
    finally:
        sqlite_store._writer.set_trace_callback(None)
    assert held == [True] * 12
    updates = [" ".join(q.split())[:37] for q in seen if q.lstrip().startswith("UPDATE")]
    assert updates == ["UPDATE jobs SET state = i.state, outc", "UPDATE attempts SET finished_at = i.a"]


async def test_independent_prechecks_of_a_batch_run_as_one_statement(pg_schema: tuple[str, str]) -> None:
    """Admissions of different pull requests, counting no day's jobs: their pre-checks go out together, and then
    their inserts."""
    store = PostgresStore(pg_schema[0], schema=pg_schema[1], min_size=1, max_size=1)
    await store.open()
    try:
        seen: list[str] = []
        async with store._pool.acquire() as conn:  # the pool's one connection: every admission runs on it
            conn.add_query_logger(lambda record: seen.append(record.query))
        results = await asyncio.gather(
            *(store.admit(d, e, now=time.time(), max_attempts=3) for d, e in map(enqueue, range(1, 9)))
        )
    finally:
        await store.close()
    assert [r.outcome for r in results] == ["enqueued"] * 8
    together = [q for q in seen if "WITH ORDINALITY AS i(delivery_id, installation, pause_key" in q]
    alone = [q for q in seen if q.lstrip().startswith("SELECT EXISTS (SELECT 1 FROM deliveries WHERE delivery_id = $1")]
    assert len(together) >= 1 and len(together) + len(alone) < 8
    inserted_together = [q for q in seen if "WITH ORDINALITY AS i(revision_key, repo_id" in q]
    inserted_alone = [q for q in seen if q.lstrip().startswith("INSERT INTO jobs") and "unnest" not in q]
    assert len(inserted_together) >= 1 and len(inserted_together) + len(inserted_alone) < 8


def test_the_batched_admission_reads_the_precheck_parameters_where_prepare_enqueue_puts_them() -> None:
    d, e = enqueue(3, installation=11)
    prepared = p.prepare_enqueue(e, d, now=100.0, max_attempts=3)
    pre = prepared.precheck
    assert (pre[p.PRECHECK_REPO], pre[p.PRECHECK_PR]) == (1, 3)
    assert pre[p.PRECHECK_COUNTS_DAY] is False and pre[p.PRECHECK_COUNTS_HOUR] is False
    together = tuple(pre[i] for i in p.PRECHECK_TOGETHER_COLUMNS)
    assert together == (d.delivery_id, 11, pause_key(1, 3), e.job.revision_key, True, 1, 3)
    assert prepared.insert[p.INSERT_REVISION_KEY] == e.job.revision_key
