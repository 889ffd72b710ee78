"""/readyz follows the database, migrations and dispatcher; /metrics tells the queue's story in Prometheus text."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from reviewer_app.core.admission import Enqueue, JobSpec
from reviewer_app.core.retry import RetryPolicy
from reviewer_app.core.states import JobState
from reviewer_app.dispatch.context import JobContext
from reviewer_app.dispatch.dispatcher import Dispatcher
from reviewer_app.dispatch.rescuer import Rescuer
from reviewer_app.metrics import Metrics
from reviewer_app.store.base import Delivery
from reviewer_app.store.sqlite import SqliteStore
from reviewer_app.web.app import WEBHOOK_PATH, make_app
from reviewer_app.web.events import make_router
from reviewer_app.web.health import Probes
from reviewer_app.web.webhooks import Receiver
from tests.harness import harness
from tests.helpers import SECRET, encode, eventually, pr_payload, sha, webhook_headers


def receiver(store, metrics: Metrics | None = None) -> Receiver:
    return Receiver(
        store=store, router=make_router(), secret=SECRET, max_body_bytes=1 << 20, max_attempts=5, metrics=metrics
    )


async def admit(store, *, pr: int, now: float) -> int:
    spec = JobSpec(repo_id=1, repo_full_name="o/r", installation_id=7, pr_number=pr, head_sha=sha(pr))
    result = await store.admit(Delivery(f"d{pr}", "pull_request", "opened"), Enqueue(spec), now=now, max_attempts=5)
    return result.job_id


async def readyz(client) -> tuple[int, dict]:
    resp = await client.get("/readyz")
    return resp.status, await resp.json()


async def scrape(client, **headers: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics, keyed by (name, sorted labels)."""
    resp = await client.get("/metrics", headers=headers)
    assert resp.status == 200, await resp.text()
    assert resp.content_type == "text/plain"
    samples = {}
    for family in text_string_to_metric_families(await resp.text()):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


# -- /readyz ------------------------------------------------------------------------------------------------


async def test_readyz_turns_503_while_the_database_file_is_gone_and_200_when_it_is_back(aiohttp_client, tmp_path):
    # How to make SQLite "unreachable" for real: an open connection keeps answering even after its file is
    # unlinked or moved (the descriptor outlives the name), and as root no chmod stops us. What an operator does
    # see is the database volume unmounted or the directory moved away, after which every commit goes to a file
    # no restart will find. Renaming the database's directory does exactly that to the running store, and the
    # store's ping checks that its path still names the file it opened; renaming it back is the volume returning.
    data = tmp_path / "data"
    data.mkdir()
    store = SqliteStore(str(data / "reviewer.db"))
    await store.open()
    client = await aiohttp_client(make_app(receiver(store)))
    assert await readyz(client) == (200, {"status": "ready"})

    data.rename(tmp_path / "moved")
    status, body = await readyz(client)
    assert status == 503 and body["status"] == "unavailable"
    assert "database unavailable" in body["reason"] and "removed or replaced" in body["reason"]

    (tmp_path / "moved").rename(data)
    assert await readyz(client) == (200, {"status": "ready"})
    resp = await client.get("/healthz")
    assert resp.status == 200  # alive all along: only readiness follows the database
    await store.close()


async def test_readyz_is_503_once_the_store_is_closed(aiohttp_client, tmp_path):
    store = SqliteStore(str(tmp_path / "reviewer.db"))
    await store.open()
    client = await aiohttp_client(make_app(receiver(store)))
    await store.close()
    status, body = await readyz(client)
    assert status == 503 and "closed" in body["reason"]


async def test_readyz_is_503_while_a_migration_is_not_applied(aiohttp_client, tmp_path):
    path = tmp_path / "reviewer.db"
    store = SqliteStore(str(path))
    await store.open()
    client = await aiohttp_client(make_app(receiver(store)))
    conn = sqlite3.connect(path)
    with conn:
        (version, name), *_ = conn.execute("SELECT version, name FROM schema_migrations ORDER BY version DESC")
        conn.execute("DELETE FROM schema_migrations WHERE version = ?", (version,))
    status, body = await readyz(client)
    assert status == 503 and body["reason"] == f"migrations not applied: {name}"
    with conn:
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)", (version, name))
    conn.close()
    assert (await readyz(client))[0] == 200
    await store.close()


async def test_readyz_is_503_with_the_reason_when_this_process_can_never_review(aiohttp_client, sqlite_store):
    probes = Probes(sqlite_store, cannot_work="no review can run: ANTHROPIC_API_KEY (the model key) is not set")
    client = await aiohttp_client(make_app(receiver(sqlite_store), probes))
    assert await readyz(client) == (
        503,
        {"status": "unavailable", "reason": "no review can run: ANTHROPIC_API_KEY (the model key) is not set"},
    )
    assert (await client.get("/healthz")).status == 200  # alive: a restart would not help, a key would


async def test_readyz_waits_for_the_dispatcher_when_this_process_runs_workers(aiohttp_client, sqlite_store):
    async def runner(ctx: JobContext) -> str:
        return "done"

    d = Dispatcher(
        sqlite_store,
        runner,
        owner="w",
        concurrency=1,
        lease_seconds=5,
        renew_interval=1,
        scan_interval=0.05,
        retry_policy=RetryPolicy(),
        clock=time.time,
    )
    probes = Probes(sqlite_store, workers_running=lambda: d.running)
    client = await aiohttp_client(make_app(receiver(sqlite_store), probes))
    assert await readyz(client) == (503, {"status": "unavailable", "reason": "dispatcher is not running"})
    d.start()

    async def ready() -> bool:
        return (await readyz(client))[0] == 200

    await eventually(ready)
    await d.stop(1)
    assert (await readyz(client))[0] == 503


# -- /metrics -----------------------------------------------------------------------------------------------


async def test_metrics_show_the_oldest_pending_age_and_an_expired_lease_after_a_crash(aiohttp_client, sqlite_store):
    t0 = 1_800_000_000.0
    now = [t0]
    metrics = Metrics(sqlite_store, clock=lambda: now[0])
    client = await aiohttp_client(make_app(receiver(sqlite_store, metrics), Probes(sqlite_store, metrics=metrics)))
    crashed = await admit(sqlite_store, pr=1, now=t0)
    await admit(sqlite_store, pr=2, now=t0 + 5)
    # A worker claims with a short lease and dies without a word: nothing renews or finishes its attempt.
    [lease] = await sqlite_store.claim(owner="crashed-worker", limit=1, now=t0 + 1, lease_seconds=2)
    assert lease.job_id == crashed

    now[0] = t0 + 60
    m = await scrape(client)
    assert m[("reviewer_oldest_pending_job_age_seconds", ())] == 60
    assert m[("reviewer_expired_leases", ())] == 1
    assert m[("reviewer_jobs", (("state", "running"),))] == 1
    assert m[("reviewer_jobs", (("state", "queued"),))] == 1
    assert m[("reviewer_leases_rescued_total", ())] == 0

    rescued = await Rescuer(sqlite_store, clock=lambda: now[0], metrics=metrics).run_once()
    assert rescued == [crashed]
    m = await scrape(client)
    assert m[("reviewer_leases_rescued_total", ())] == 1
    assert m[("reviewer_expired_leases", ())] == 0
    assert m[("reviewer_jobs", (("state", "queued"),))] == 2
    assert m[("reviewer_oldest_pending_job_age_seconds", ())] == 60
    assert m[("reviewer_jobs_failed_total", ())] == 0
    assert m[("reviewer_database_up", ())] == 1


async def test_a_rescue_that_uses_up_the_last_attempt_counts_a_failed_job(aiohttp_client, sqlite_store):
    metrics = Metrics(sqlite_store, clock=lambda: 2000.0)
    spec = JobSpec(repo_id=1, repo_full_name="o/r", installation_id=7, pr_number=3, head_sha=sha(3))
    await sqlite_store.admit(Delivery("d", "pull_request", "opened"), Enqueue(spec), now=1000.0, max_attempts=1)
    await sqlite_store.claim(owner="crashed-worker", limit=1, now=1000.0, lease_seconds=1)
    await Rescuer(sqlite_store, clock=lambda: 2000.0, metrics=metrics).run_once()
    client = await aiohttp_client(make_app(receiver(sqlite_store), Probes(sqlite_store, metrics=metrics)))
    m = await scrape(client)
    assert m[("reviewer_jobs_failed_total", ())] == 1
    assert m[("reviewer_jobs", (("state", "failed"),))] == 1
    assert m[("reviewer_oldest_pending_job_age_seconds", ())] == 0


async def test_metrics_count_webhooks_by_event_and_outcome(aiohttp_client, sqlite_store):
    metrics = Metrics(sqlite_store)
    client = await aiohttp_client(make_app(receiver(sqlite_store, metrics), Probes(sqlite_store, metrics=metrics)))
    body = encode(pr_payload(head=sha(1)))
    for delivery in ("a", "a"):
        await client.post(WEBHOOK_PATH, data=body, headers=webhook_headers(body, delivery=delivery))
    await client.post(WEBHOOK_PATH, data=body, headers=webhook_headers(body, secret="wrong"))
    ping = encode({"zen": "hi", "hook_id": 1})
    await client.post(WEBHOOK_PATH, data=ping, headers=webhook_headers(ping, event="ping"))
    m = await scrape(client)
    count = "reviewer_webhooks_total"
    assert m[(count, (("event", "pull_request"), ("outcome", "enqueued")))] == 1
    assert m[(count, (("event", "pull_request"), ("outcome", "duplicate-delivery")))] == 1
    assert m[(count, (("event", "ping"), ("outcome", "ignored")))] == 1
    # The event header of a request that failed the signature check is not trusted, not even as a label.
    assert m[(count, (("event", "unverified"), ("outcome", "bad_signature")))] == 1


async def test_metrics_can_require_a_bearer_token(aiohttp_client, sqlite_store):
    metrics = Metrics(sqlite_store)
    probes = Probes(sqlite_store, metrics=metrics, metrics_token="scrape-me")
    client = await aiohttp_client(make_app(receiver(sqlite_store), probes))
    assert (await client.get("/metrics")).status == 401
    assert (await client.get("/metrics", headers={"Authorization": "Bearer nope"})).status == 401
    m = await scrape(client, Authorization="Bearer scrape-me")
    assert m[("reviewer_jobs", (("state", "queued"),))] == 0
    assert (await client.get("/readyz")).status == 200  # readiness stays open to the load balancer


async def test_metrics_still_answer_when_the_database_does_not(aiohttp_client, tmp_path):
    store = SqliteStore(str(tmp_path / "reviewer.db"))
    await store.open()
    metrics = Metrics(store)
    metrics.leases_rescued.inc()
    client = await aiohttp_client(make_app(receiver(store), Probes(store, metrics=metrics)))
    await store.close()
    m = await scrape(client)
    assert m[("reviewer_database_up", ())] == 0
    assert m[("reviewer_leases_rescued_total", ())] == 1  # the process's own counters are what an outage needs
    assert ("reviewer_jobs", (("state", "queued"),)) not in m


async def test_each_app_has_its_own_registry():
    a, b = Metrics(), Metrics()
    a.webhooks.labels("ping", "ignored").inc()
    labels = {"event": "ping", "outcome": "ignored"}
    assert a.registry.get_sample_value("reviewer_webhooks_total", labels) == 1
    assert b.registry.get_sample_value("reviewer_webhooks_total", labels) is None


async def test_a_reviewed_pr_shows_github_calls_tokens_run_time_and_queue_wait(tmp_path: Path):
    async with harness(tmp_path, REVIEWER_METRICS_TOKEN="tok") as h:
        _, job_id = await h.open_pr()
        await h.wait_state(job_id, JobState.SUCCEEDED)
        assert (await h.client.get("/readyz")).status == 200
        m = await scrape(h.client, Authorization="Bearer tok")
    statuses = {
        dict(labels)["status"]: v for (name, labels), v in m.items() if name == "reviewer_github_requests_total"
    }
    assert statuses.get("200", 0) > 0 and statuses.get("201", 0) > 0  # reads, and the token / check run / review
    tokens = {dict(labels)["kind"]: v for (name, labels), v in m.items() if name == "reviewer_model_tokens_total"}
    assert tokens["input"] > 0 and tokens["output"] > 0
    assert m[("reviewer_review_duration_seconds_count", (("result", "succeeded"),))] == 1
    assert m[("reviewer_queue_wait_seconds_count", ())] == 1
    assert m[("reviewer_jobs", (("state", "succeeded"),))] == 1


async def test_the_review_duration_counts_interrupted_runs_apart(sqlite_store):
    metrics = Metrics(sqlite_store)
    started = asyncio.Event()

    async def hangs(ctx: JobContext) -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    d = Dispatcher(
        sqlite_store,
        hangs,
        owner="w",
        concurrency=1,
        lease_seconds=5,
        renew_interval=1,
        scan_interval=0.05,
        retry_policy=RetryPolicy(),
        clock=time.time,
        metrics=metrics,
    )
    await admit(sqlite_store, pr=1, now=time.time())
    d.start()
    await asyncio.wait_for(started.wait(), 10)
    await d.stop(0)
    get = metrics.registry.get_sample_value
    assert get("reviewer_review_duration_seconds_count", {"result": "interrupted"}) == 1
    assert get("reviewer_review_duration_seconds_count", {"result": "succeeded"}) is None
    assert get("reviewer_queue_wait_seconds_count") == 1
