"""PostgreSQL-only contract: many processes (pools) at once, cross-host wake-ups, migrations under a lock."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator

import asyncpg
import pytest

from reviewer_app.core.admission import CancelPR, Enqueue, InstallationChange
from reviewer_app.core.states import JobState
from reviewer_app.store.base import Delivery, Store, StoreUnavailable
from reviewer_app.store.postgres import PostgresStore
from reviewer_app.store.schema import load_migrations
from reviewer_app.store.sqlite import SqliteStore
from tests.pg import fresh_schema
from tests.store.test_store_contract import NOW, spec

DEADLINE = 10.0


def public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(fn) for name, fn in inspect.getmembers(cls, callable) if not name.startswith("_")}


def test_postgres_store_has_every_public_method_of_the_sqlite_store() -> None:
    sqlite, postgres = public_methods(SqliteStore), public_methods(PostgresStore)
    missing = sorted(set(sqlite) - set(postgres))
    assert not missing, f"PostgresStore lacks {missing}"
    for name, sig in sqlite.items():
        assert list(postgres[name].parameters) == list(sig.parameters), f"{name}: {postgres[name]} != {sig}"
        assert inspect.iscoroutinefunction(getattr(PostgresStore, name)) == inspect.iscoroutinefunction(
            getattr(SqliteStore, name)
        ), name
    assert (SqliteStore.engine, PostgresStore.engine) == ("sqlite", "postgres")
    protocol = {name for name in vars(Store) if not name.startswith("_")}
    assert not sorted(protocol - set(postgres)), "PostgresStore lacks part of the Store protocol"


def test_every_sqlite_migration_has_a_postgres_twin() -> None:
    assert [v for v, _, _ in load_migrations("postgres")] == [v for v, _, _ in load_migrations("sqlite")]


class Stores:
    """Several stores on one schema, each with its own pool: separate hosts as far as the database can tell."""

    def __init__(self, dsn: str, schema: str) -> None:
        self.dsn, self.schema = dsn, schema
        self.opened: list[PostgresStore] = []

    async def open(self, n: int = 1, **kwargs: object) -> list[PostgresStore]:
        stores = [PostgresStore(self.dsn, schema=self.schema, **kwargs) for _ in range(n)]  # type: ignore[arg-type]
        self.opened.extend(stores)
        await asyncio.gather(*(s.open() for s in stores))
        return stores


@pytest.fixture
async def hosts(pg_schema: tuple[str, str]) -> AsyncIterator[Stores]:
    stores = Stores(*pg_schema)
    try:
        yield stores
    finally:
        await asyncio.gather(*(s.close() for s in stores.opened))


def delivery(n: int | str) -> Delivery:
    return Delivery(f"pg-{n}", "pull_request", "synchronize")


async def test_many_processes_starting_at_once_migrate_once(hosts: Stores) -> None:
    stores = await hosts.open(8, min_size=1, max_size=2)
    assert [await s.migrations_pending() for s in stores] == [[]] * len(stores)
    conn = await asyncpg.connect(hosts.dsn, server_settings={"search_path": hosts.schema})
    try:
        versions = [r[0] for r in await conn.fetch("SELECT version FROM schema_migrations ORDER BY version")]
    finally:
        await conn.close()
    assert versions == [v for v, _, _ in load_migrations("postgres")]


async def test_ten_claimers_with_their_own_pools_never_double_claim(hosts: Stores) -> None:
    [admin, *claimers] = await hosts.open(11, min_size=1, max_size=3)
    for pr in range(60):
        await admin.admit(delivery(pr), Enqueue(spec(pr=pr)), now=NOW, max_attempts=3)
    rounds = await asyncio.gather(
        *(
            c.claim(owner=f"host{i}-slot{j}", limit=2, now=NOW, lease_seconds=30)
            for i, c in enumerate(claimers)
            for j in range(4)
        )
    )
    ids = [lease.job_id for leases in rounds for lease in leases]
    assert len(ids) == len(set(ids)) == 60
    tokens = {lease.token for leases in rounds for lease in leases}
    assert len(tokens) == 60
    for job_id in ids[:5]:
        [attempt] = await admin.attempts_of(job_id)
        assert attempt.finished_at is None


async def test_concurrent_deliveries_of_one_revision_make_one_job(hosts: Stores) -> None:
    stores = await hosts.open(6, min_size=1, max_size=2)
    results = await asyncio.gather(
        *(
            s.admit(delivery(f"rev-{i}-{k}"), Enqueue(spec(head=7)), now=NOW, max_attempts=3)
            for i, s in enumerate(stores)
            for k in range(3)
        )
    )
    outcomes = sorted(r.outcome for r in results)
    assert outcomes == ["duplicate-revision"] * 17 + ["enqueued"]
    assert len({r.job_id for r in results}) == 1
    assert len(await stores[0].list_jobs()) == 1


async def test_one_delivery_redelivered_to_every_host_at_once_is_admitted_once(hosts: Stores) -> None:
    stores = await hosts.open(6, min_size=1, max_size=2)
    results = await asyncio.gather(
        *(s.admit(delivery("same"), Enqueue(spec(head=8)), now=NOW, max_attempts=3) for s in stores)
    )
    assert sorted(r.outcome for r in results) == ["duplicate-delivery"] * 5 + ["enqueued"]
    assert len({r.job_id for r in results}) == 1


async def test_concurrent_heads_of_one_pr_leave_exactly_one_pending(hosts: Stores) -> None:
    stores = await hosts.open(5, min_size=1, max_size=2)
    results = await asyncio.gather(
        *(
            s.admit(delivery(f"head-{h}"), Enqueue(spec(pr=3, head=h)), now=NOW, max_attempts=3)
            for h, s in enumerate(stores * 2)
        )
    )
    assert all(r.outcome == "enqueued" for r in results)
    jobs = await stores[0].list_jobs(pr_number=3)
    assert [j.state for j in jobs].count(JobState.QUEUED) == 1
    superseded = {j.id: j.superseded_by for j in jobs if j.state == JobState.SUPERSEDED}
    assert len(superseded) == len(results) - 1 and all(superseded.values())


async def test_uninstall_racing_admissions_leaves_nothing_pending(hosts: Stores) -> None:
    stores = await hosts.open(4, min_size=1, max_size=2)
    gone = InstallationChange(installation_id=7, account="o", active=False, reason="installation deleted")
    admissions = [
        s.admit(delivery(f"inst-{pr}"), Enqueue(spec(pr=pr)), now=NOW, max_attempts=3)
        for pr, s in enumerate(stores * 5)
    ]
    await asyncio.gather(
        *admissions[:10], stores[0].admit(delivery("uninstall"), gone, now=NOW, max_attempts=3), *admissions[10:]
    )
    assert [j.id for j in await stores[1].list_jobs(states=["queued", "running"])] == []


async def test_a_notify_from_one_host_wakes_a_subscriber_on_another(hosts: Stores) -> None:
    listener, admitter, elsewhere = await hosts.open(3)
    woken = asyncio.Event()
    await listener.subscribe_wakeups(woken.set)
    await admitter.admit(delivery("wake"), Enqueue(spec()), now=NOW, max_attempts=3)
    await asyncio.wait_for(woken.wait(), timeout=DEADLINE)

    # Duplicates create no work and wake nobody; an operator retry makes work claimable again and does.
    woken.clear()
    await admitter.admit(delivery("wake"), Enqueue(spec()), now=NOW, max_attempts=3)
    [job] = await elsewhere.list_jobs()
    assert await elsewhere.cancel_job(job.id, now=NOW, reason="by operator")
    assert await elsewhere.retry_job(job.id, now=NOW)
    await asyncio.wait_for(woken.wait(), timeout=DEADLINE)


async def test_wakeups_stay_within_their_schema(hosts: Stores) -> None:
    [listener, admitter] = await hosts.open(2)
    calls: list[str] = []
    woken = asyncio.Event()

    def wake() -> None:
        calls.append("wake")
        woken.set()

    await listener.subscribe_wakeups(wake)
    async with fresh_schema(hosts.dsn) as (dsn, other_schema):
        other = PostgresStore(dsn, schema=other_schema)
        await other.open()
        try:
            await other.admit(delivery("other"), Enqueue(spec()), now=NOW, max_attempts=3)
        finally:
            await other.close()
    # Notifications arrive in commit order: once ours is seen, the other schema's was seen (and ignored) first.
    await admitter.admit(delivery("ours"), Enqueue(spec()), now=NOW, max_attempts=3)
    await asyncio.wait_for(woken.wait(), timeout=DEADLINE)
    assert calls == ["wake"]


async def test_the_listener_reconnects_when_its_connection_is_killed(hosts: Stores) -> None:
    listener, admitter = await hosts.open(2)
    woken = asyncio.Event()
    await listener.subscribe_wakeups(woken.set)
    wakeups = listener._wakeups
    assert wakeups is not None and wakeups.server_pid is not None
    old_pid = wakeups.server_pid
    conn = await asyncpg.connect(hosts.dsn)
    try:
        assert await conn.fetchval("SELECT pg_terminate_backend($1)", old_pid)
    finally:
        await conn.close()
    # A reconnect wakes the subscriber once (notifications may have been missed meanwhile) ...
    await asyncio.wait_for(woken.wait(), timeout=DEADLINE)
    assert wakeups.reconnects == 1 and wakeups.server_pid not in (None, old_pid)
    # ... and then notifications flow again.
    woken.clear()
    await admitter.admit(delivery("after-reconnect"), Enqueue(spec()), now=NOW, max_attempts=3)
    await asyncio.wait_for(woken.wait(), timeout=DEADLINE)


async def test_a_write_stuck_behind_a_lock_past_the_timeout_is_store_unavailable(hosts: Stores) -> None:
    [store] = await hosts.open(1, timeout_ms=200)
    blocker = await asyncpg.connect(hosts.dsn, server_settings={"search_path": hosts.schema})
    try:
        async with blocker.transaction():
            await blocker.execute("LOCK TABLE deliveries IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(StoreUnavailable):
                await store.admit(delivery("locked"), Enqueue(spec()), now=NOW, max_attempts=3)
    finally:
        await blocker.close()
    assert (await store.admit(delivery("locked"), Enqueue(spec()), now=NOW, max_attempts=3)).created


async def test_an_unreachable_server_is_store_unavailable() -> None:
    store = PostgresStore("postgresql://nobody:secret@127.0.0.1:1/none", timeout_ms=500)
    with pytest.raises(StoreUnavailable) as info:
        await store.open()
    assert "secret" not in str(info.value)
    with pytest.raises(StoreUnavailable):
        await store.admit(delivery("closed"), CancelPR(1, 1, "closed"), now=NOW, max_attempts=3)
    with pytest.raises(StoreUnavailable):
        await store.ping()


async def _terminate_backends_of(store: PostgresStore, dsn: str) -> int:
    """The server closes every pooled connection of ``store`` (a restart, a failover, an administrator), while they
    sit idle in its pool: asyncpg learns of it only at their next use."""
    holders = store._pool._holders  # type: ignore[union-attr]
    pids = [h._con.get_server_pid() for h in holders if h._con is not None and not h._con.is_closed()]
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid", pids)
    finally:
        await conn.close()
    return len(pids)


async def test_connections_the_server_dropped_cost_no_read_and_no_admission(hosts: Stores) -> None:
    # After pg_terminate_backend, each pooled connection failed its next use, some with asyncpg's InternalClientError
    # ("cannot switch to state ...; another operation is in progress"), which escaped as an unexpected error and
    # left the job stuck; a webhook then got 503 for every dead connection in the pool in turn.
    (store,) = await hosts.open(1, min_size=3, max_size=3)
    await asyncio.gather(*(store.list_jobs() for _ in range(6)))  # every pooled connection opened
    assert await _terminate_backends_of(store, hosts.dsn) == 3
    # A read is asked again on a fresh connection; an admission lost before its commit runs again.
    assert await store.list_jobs() == []
    admitted = await store.admit(delivery("after-drop"), Enqueue(spec(head=9)), now=NOW, max_attempts=3)
    assert admitted.outcome == "enqueued"
    assert [j.id for j in await store.list_jobs()] == [admitted.job_id]
    await _terminate_backends_of(store, hosts.dsn)
    results = await asyncio.gather(*(store.get_job(admitted.job_id) for _ in range(3)))
    assert all(job is not None for job in results)
