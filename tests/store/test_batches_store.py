"""The store's part of Message Batches, on SQLite and PostgreSQL: requests recorded with their job, a result recorded
once and waking its job, withdrawal when the job ended, batched tokens apart in the usage, and retention."""

from __future__ import annotations

from reviewer_app.core.states import JobState
from reviewer_app.store.base import Usage
from tests.store.test_store_contract import NOW, admit, spec

TOKENS = Usage(model="claude-sonnet-4-5", input_tokens=1000, output_tokens=200, cache_read_tokens=50)


async def deferred_job(store, pr: int = 1) -> int:
    """A job that sent a request to batch b-1 and was deferred far into the future, as the pipeline leaves it."""
    job_id = (await admit(store, spec(pr=pr))).job_id
    [lease] = await store.claim(owner="w", limit=1, now=NOW, lease_seconds=30)
    await store.record_batch_requests(
        job_id, batch_id="b-1", model="claude-sonnet-4-5", parts=[(f"job-{job_id}-k", "k")], now=NOW
    )
    assert await store.retry_if_lease_held(lease, now=NOW, at=NOW + 900, error="waiting", counts_attempt=False)
    return job_id


async def test_a_result_is_recorded_once_and_wakes_its_job(store) -> None:
    job_id = await deferred_job(store)
    [request] = await store.batch_requests_of(job_id)
    assert (request.state, request.batch_id, request.part_key, request.ended_at) == ("pending", "b-1", "k", None)
    assert await store.open_batches() == ["b-1"]
    assert await store.open_requests_of_batch("b-1") == [request.custom_id]

    woke = await store.settle_batch_request(
        request.custom_id, state="succeeded", result='{"id": "msg"}', error=None, usage=TOKENS, now=NOW + 5
    )
    assert woke == job_id
    job = await store.get_job(job_id)
    assert job.state is JobState.QUEUED and job.next_attempt_at == NOW + 5 and job.attempts == 0
    [request] = await store.batch_requests_of(job_id)
    assert (request.state, request.result, request.ended_at) == ("succeeded", '{"id": "msg"}', NOW + 5)
    assert (request.input_tokens, request.output_tokens, request.cache_read_tokens) == (1000, 200, 50)
    assert await store.open_batches() == []

    # A second report (another duty pass, another host) changes nothing.
    again = await store.settle_batch_request(
        request.custom_id, state="errored", result=None, error="late", usage=None, now=NOW + 9
    )
    assert again is None
    [request] = await store.batch_requests_of(job_id)
    assert request.state == "succeeded" and request.input_tokens == 1000
    assert (
        await store.settle_batch_request("job-999-x", state="succeeded", result="{}", error=None, usage=None, now=NOW)
        is None
    )


async def test_a_result_settled_while_its_job_decides_to_wait_leaves_the_job_due_at_once(store) -> None:
    # The poller settled the request while the attempt that sent it was still running: its wake-up found the job
    # running and woke nothing, then the attempt deferred the job far into the future (waiting for a batch that had
    # already answered), and the job sat queued until then (found by the model-based test on PostgreSQL).
    job_id = (await admit(store, spec(pr=1))).job_id
    [lease] = await store.claim(owner="w", limit=1, now=NOW, lease_seconds=30)
    name = f"job-{job_id}-k"
    await store.record_batch_requests(job_id, batch_id="b-1", model="claude-sonnet-4-5", parts=[(name, "k")], now=NOW)
    woke = await store.settle_batch_request(name, state="succeeded", result="{}", error=None, usage=None, now=NOW + 1)
    assert woke == job_id  # the request is settled, but the job it woke was running
    assert await store.retry_if_lease_held(lease, now=NOW + 2, at=NOW + 900, error="waiting", counts_attempt=False)
    job = await store.get_job(job_id)
    assert job.state is JobState.QUEUED and job.next_attempt_at == NOW + 2
    # A request settled before this attempt began (one this attempt has read) does not make the next wait a loop.
    [lease] = await store.claim(owner="w", limit=1, now=NOW + 3, lease_seconds=30)
    assert await store.retry_if_lease_held(lease, now=NOW + 4, at=NOW + 900, error="waiting", counts_attempt=False)
    assert (await store.get_job(job_id)).next_attempt_at == NOW + 900


async def test_requests_of_an_ended_job_are_withdrawn_and_their_batch_is_left_idle(store) -> None:
    kept = await deferred_job(store, pr=1)
    ended = await deferred_job(store, pr=2)  # same batch b-1
    assert await store.cancel_job(ended, now=NOW + 1, reason="cancelled by an operator")
    # b-1 still has the other job's request pending: nothing to cancel yet.
    assert await store.withdraw_requests_of_ended_jobs() == []
    [withdrawn] = await store.batch_requests_of(ended)
    assert withdrawn.state == "withdrawn"
    assert await store.cancel_job(kept, now=NOW + 2, reason="cancelled by an operator")
    assert await store.withdraw_requests_of_ended_jobs() == ["b-1"]
    assert await store.withdraw_requests_of_ended_jobs() == []  # once

    # The batch still reports on them (its tokens were paid), but a withdrawn request stays withdrawn and wakes no job.
    assert (
        await store.settle_batch_request(
            withdrawn.custom_id, state="succeeded", result="{}", error=None, usage=TOKENS, now=NOW + 3
        )
        == ended
    )
    [after] = await store.batch_requests_of(ended)
    assert (after.state, after.result, after.input_tokens) == ("withdrawn", None, 1000)
    assert (await store.get_job(ended)).state is JobState.CANCELLED


async def test_usage_shows_batched_tokens_apart_from_interactive_ones(store) -> None:
    job_id = await deferred_job(store)
    [request] = await store.batch_requests_of(job_id)
    await store.settle_batch_request(
        request.custom_id, state="succeeded", result="{}", error=None, usage=TOKENS, now=NOW
    )
    [lease] = await store.claim(owner="w", limit=1, now=NOW + 1, lease_seconds=30)
    interactive = Usage(model="claude-sonnet-4-5", input_tokens=300, output_tokens=30)
    assert await store.complete_if_lease_held(lease, now=NOW + 2, outcome="done", usage=interactive)

    rows = await store.usage_by_repo(since=NOW - 10)
    assert rows == [
        {
            "repo": "o/r",
            "kind": "reviews",
            "model": "claude-sonnet-4-5",
            "batched": True,
            "jobs": 1,
            "input_tokens": 1000,
            "output_tokens": 200,
            "cache_creation_tokens": 0,
            "cache_read_tokens": 50,
        },
        {
            "repo": "o/r",
            "kind": "reviews",
            "model": "claude-sonnet-4-5",
            "batched": False,
            "jobs": 1,
            "input_tokens": 300,
            "output_tokens": 30,
            "cache_creation_tokens": 0,
            "cache_read_tokens": 0,
        },
    ]
    assert await store.usage_by_repo(since=NOW + 10) == []


async def test_retention_prunes_a_jobs_batch_requests_with_it(store) -> None:
    job_id = await deferred_job(store)
    assert await store.cancel_job(job_id, now=NOW + 1, reason="cancelled by an operator")
    await admit(store, spec(pr=9))  # the newest job is never pruned on SQLite
    assert await store.prune(NOW + 100, 10) >= 1
    assert await store.get_job(job_id) is None
    assert await store.batch_requests_of(job_id) == []


async def test_migrate_store_moves_a_batched_jobs_request_to_postgresql(tmp_path, pg_schema) -> None:
    from reviewer_app.store.migrate import migrate_store
    from reviewer_app.store.postgres import PostgresStore
    from reviewer_app.store.sqlite import SqliteStore

    dsn, schema = pg_schema
    sqlite = SqliteStore(str(tmp_path / "reviewer.db"))
    await sqlite.open()
    try:
        job_id = await deferred_job(sqlite)
    finally:
        await sqlite.close()
    report = await migrate_store(f"sqlite:///{tmp_path / 'reviewer.db'}", dsn, schema=schema, now=NOW + 10)
    assert report.rows["batch requests"] == 1
    pg = PostgresStore(dsn, schema=schema)
    await pg.open()
    try:
        [request] = await pg.batch_requests_of(job_id)
        assert (request.state, request.batch_id) == ("pending", "b-1")
        assert await pg.open_batches() == ["b-1"]  # PostgreSQL's duty collects it
    finally:
        await pg.close()


async def test_settling_a_result_waits_for_a_worker_holding_its_job_row(pg_schema) -> None:
    # PostgreSQL, two hosts: the poller settling a request and the job's own attempt deferring itself must see each
    # other. Without the job row locked first, the poller's wake-up could find the job still running while the
    # attempt's check could not yet see the settled request, and the job waited until its far retry time (about one
    # run in 24 of the batch tests under load). Held here: the attempt's transaction has the job row; the settle waits.
    import asyncio

    import asyncpg

    from reviewer_app.store.postgres import PostgresStore

    dsn, schema = pg_schema
    store = PostgresStore(dsn, schema=schema, timeout_ms=5000)
    await store.open()
    worker = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    try:
        job_id = (await admit(store, spec(pr=1))).job_id
        await store.claim(owner="w", limit=1, now=NOW, lease_seconds=30)
        name = f"job-{job_id}-k"
        await store.record_batch_requests(
            job_id, batch_id="b-1", model="claude-sonnet-4-5", parts=[(name, "k")], now=NOW
        )
        tx = worker.transaction()
        await tx.start()
        await worker.execute("SELECT id FROM jobs WHERE id = $1 FOR UPDATE", job_id)
        settle = asyncio.create_task(
            store.settle_batch_request(name, state="succeeded", result="{}", error=None, usage=None, now=NOW + 1)
        )
        deadline = asyncio.get_running_loop().time() + 10
        waiting = 0
        while not settle.done() and asyncio.get_running_loop().time() < deadline:
            waiting = await worker.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
            )
            if waiting:
                break
            await asyncio.sleep(0.01)
        assert not settle.done() and waiting == 1
        # Still pending as far as the attempt can tell: it has not settled behind the worker's back.
        assert await worker.fetchval("SELECT ended_at FROM batch_requests WHERE custom_id = $1", name) is None
        await tx.rollback()
        assert await asyncio.wait_for(settle, 10) == job_id
    finally:
        await worker.close()
        await store.close()
