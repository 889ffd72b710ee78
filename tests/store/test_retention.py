"""Retention: only finished jobs (with their attempts) and deliveries older than the cutoff go, in small batches."""

from __future__ import annotations

import sqlite3
import time

import pytest

from reviewer_app.core.admission import Enqueue, Ignore, JobSpec
from reviewer_app.core.states import JobState
from reviewer_app.dispatch.cleaner import DAY, Cleaner
from reviewer_app.service import build_service
from reviewer_app.settings.config import ConfigError, load_config
from reviewer_app.store.base import Delivery
from tests.helpers import eventually, sha

NOW = 1_800_000_000.0
OLD = NOW - 40 * DAY
RECENT = NOW - 1 * DAY
_n = 0


async def admit(store, pr: int, at: float, *, head: int | None = None, max_attempts: int = 5) -> int:
    global _n
    _n += 1
    spec = JobSpec(repo_id=1, repo_full_name="o/r", installation_id=7, pr_number=pr, head_sha=sha(head or pr))
    r = await store.admit(
        Delivery(f"d{_n}", "pull_request", "opened"), Enqueue(spec), now=at, max_attempts=max_attempts
    )
    return r.job_id


async def run_to(store, job_id: int, at: float, state: JobState) -> None:
    """Claim ``job_id`` (the only claimable job) at ``at`` and finish it in ``state`` a minute later."""
    [lease] = await store.claim(owner="w", limit=1, now=at, lease_seconds=300)
    assert lease.job_id == job_id
    end = at + 60
    if state == JobState.SUCCEEDED:
        await store.complete_if_lease_held(lease, now=end, outcome="review published")
    elif state == JobState.FAILED:
        await store.fail_if_lease_held(lease, now=end, error="permanent")
    else:
        await store.cancel_if_lease_held(lease, now=end, outcome="closed")


def count(path: str, query: str, *params: object) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(query, params).fetchone()[0]
    finally:
        conn.close()


async def test_prune_removes_only_what_is_old_and_finished(sqlite_store) -> None:
    s = sqlite_store
    old_ok = await admit(s, 1, OLD)
    await run_to(s, old_ok, OLD, JobState.SUCCEEDED)
    old_failed = await admit(s, 2, OLD)
    await run_to(s, old_failed, OLD, JobState.FAILED)
    old_cancelled = await admit(s, 3, OLD)
    await run_to(s, old_cancelled, OLD, JobState.CANCELLED)
    recent_ok = await admit(s, 4, RECENT)
    await run_to(s, recent_ok, RECENT, JobState.SUCCEEDED)
    # Old but not finished: a queued job waiting out a paused queue, and a claim whose worker vanished.
    old_running = await admit(s, 5, OLD)
    await s.claim(owner="gone", limit=1, now=OLD, lease_seconds=60)
    old_queued = await admit(s, 6, OLD)
    await s.admit(Delivery("old-ping", "ping", None), Ignore("pong"), now=OLD, max_attempts=5)
    await s.admit(Delivery("new-ping", "ping", None), Ignore("pong"), now=RECENT, max_attempts=5)

    removed = await s.prune(NOW - 30 * DAY, 500)

    # Three old finished jobs, and the old deliveries: those of the five old jobs plus the old ping.
    assert removed == 3 + 6
    kept = {j.id for j in await s.list_jobs()}
    assert kept == {recent_ok, old_running, old_queued}
    for job_id in (old_ok, old_failed, old_cancelled):
        assert await s.get_job(job_id) is None and await s.attempts_of(job_id) == []
    assert len(await s.attempts_of(recent_ok)) == 1 and len(await s.attempts_of(old_running)) == 1
    assert count(s.path, "SELECT COUNT(*) FROM deliveries") == 2  # the recent job's and the recent ping
    assert count(s.path, "SELECT COUNT(*) FROM deliveries WHERE delivery_id = 'new-ping'") == 1
    assert await s.prune(NOW - 30 * DAY, 500) == 0


async def test_a_kept_job_may_name_a_pruned_one_as_its_superseder(sqlite_store) -> None:
    s = sqlite_store
    older = await admit(s, 1, OLD, head=1)
    newer = await admit(s, 1, OLD + 10, head=2)
    assert (await s.get_job(older)).superseded_by == newer
    await run_to(s, newer, OLD + 20, JobState.SUCCEEDED)
    await admit(s, 9, RECENT)  # the newest job always stays; see the next test
    # The superseded job finished later than its superseder (say, a clock step): only the superseder is old.
    conn = sqlite3.connect(s.path)
    with conn:
        conn.execute("UPDATE jobs SET finished_at = ? WHERE id = ?", (RECENT, older))
    conn.close()
    assert await s.prune(NOW - 30 * DAY, 500) == 1 + 2  # the superseder, and the deliveries of both old jobs
    kept = await s.get_job(older)
    assert kept.state == JobState.SUPERSEDED and kept.superseded_by is None
    assert f"job {newer}" in kept.outcome  # the story stays in the outcome text


async def test_the_newest_job_stays_so_no_job_id_is_ever_reused(sqlite_store) -> None:
    s = sqlite_store
    first = await admit(s, 1, OLD)
    await run_to(s, first, OLD, JobState.SUCCEEDED)
    last = await admit(s, 2, OLD + 1)
    await run_to(s, last, OLD + 1, JobState.SUCCEEDED)
    assert await s.prune(NOW - 30 * DAY, 500) == 1 + 2
    assert [j.id for j in await s.list_jobs()] == [last]
    assert await admit(s, 3, NOW) == last + 1  # SQLite would hand out max(id) + 1 = 1 again on an empty table


async def test_retention_shorter_than_githubs_redelivery_window_is_refused() -> None:
    env = {"GITHUB_WEBHOOK_SECRET": "x"}
    with pytest.raises(ConfigError, match="REVIEWER_RETENTION_DAYS must be 0"):
        load_config({**env, "REVIEWER_RETENTION_DAYS": "1"})
    assert load_config({**env, "REVIEWER_RETENTION_DAYS": "0"}).retention_days == 0
    assert load_config(env).retention_days == 30


async def test_the_cleaner_prunes_in_small_batches_until_nothing_old_is_left(sqlite_store) -> None:
    s = sqlite_store
    for pr in range(1, 8):
        job_id = await admit(s, pr, OLD + pr)
        await run_to(s, job_id, OLD + pr, JobState.SUCCEEDED)
    recent = await admit(s, 100, RECENT)
    await run_to(s, recent, RECENT, JobState.SUCCEEDED)

    calls: list[int] = []
    prune = s.prune

    async def counting_prune(before: float, batch: int) -> int:
        calls.append(n := await prune(before, batch))
        return n

    s.prune = counting_prune
    cleaner = Cleaner(s, retention_seconds=30 * DAY, clock=lambda: NOW, batch=3)
    assert await cleaner.run_once() == 7 + 7
    assert len(calls) >= 3 and all(n <= 2 * 3 for n in calls)  # a batch of jobs and one of deliveries per transaction
    assert [j.id for j in await s.list_jobs()] == [recent]
    assert await cleaner.run_once() == 0


async def test_the_service_runs_the_cleaner_with_the_configured_retention(tmp_path) -> None:
    env = {"DATABASE_URL": f"sqlite:///{tmp_path}/r.db", "GITHUB_WEBHOOK_SECRET": "x", "REVIEWER_RUNNER": "noop"}
    svc = await build_service(load_config({**env, "REVIEWER_RETENTION_DAYS": "7"}))
    try:
        assert svc.cleaner is not None and svc.cleaner.retention_seconds == 7 * DAY
        old = await admit(svc.store, 1, time.time() - 8 * DAY)
        await run_to(svc.store, old, time.time() - 8 * DAY, JobState.SUCCEEDED)
        await admit(svc.store, 2, time.time())
        svc.start_background()

        async def pruned() -> bool:
            return await svc.store.get_job(old) is None

        await eventually(pruned)  # the duty prunes once at start, then every hour
    finally:
        await svc.stop()
    svc = await build_service(load_config({**env, "REVIEWER_RETENTION_DAYS": "0"}))
    await svc.stop()
    assert svc.cleaner is None
