"""A store with jobs in every state, made through the store's own procedures, for the dashboard's tests and its
screenshots; and a bulk fill of many jobs (plain INSERTs) for its benchmark."""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime

from reviewer_app.core.admission import CancelPR, Enqueue, JobSpec
from reviewer_app.core.learnings import finding_key, make_draft
from reviewer_app.core.states import JobState
from reviewer_app.store.base import Delivery, Finding, Usage, WorkerInfo
from tests.helpers import sha

EVIL_REPO = "evil/<script>alert(1)</script>"
MODEL = "claude-sonnet-4-5"


@dataclass
class Seeded:
    ids: dict[str, list[int]] = field(default_factory=dict)  # job ids by state
    old: set[int] = field(default_factory=set)  # finished over a day before the seed's `now`
    reviewed: int = 0  # the succeeded job with a check run, a review and token usage
    learnings: dict[str, list[int]] = field(default_factory=dict)  # learning ids by repository name
    check_run_id: int = 4242
    review_id: int = 9191


_n = 0


def repo_id(repo: str) -> int:
    return zlib.crc32(repo.encode()) % 10**6


async def _admit(store, repo: str, pr: int, head: str, at: float) -> int:
    global _n
    _n += 1
    spec = JobSpec(repo_id=repo_id(repo), repo_full_name=repo, installation_id=7, pr_number=pr, head_sha=head)
    r = await store.admit(Delivery(f"seed-{_n}", "pull_request", "opened"), Enqueue(spec), now=at, max_attempts=3)
    assert r.job_id is not None, r
    return r.job_id


async def seed(store, now: float) -> Seeded:
    """Jobs in every state over the last days, with usage on the finished ones; two registered processes, one of
    them gone while it holds a running job."""
    out = Seeded()

    def add(state: JobState, job_id: int, *, finished: float | None = None) -> None:
        out.ids.setdefault(state.value, []).append(job_id)
        if finished is not None and finished < now - 86400:
            out.old.add(job_id)

    repos = ["octo/widgets", "octo/gadgets", EVIL_REPO]
    pr = 0
    for day in range(5, 0, -1):
        for repo in repos:
            pr += 1
            at = now - day * 86400 + 3600  # day 1 finished 23 hours ago, day 2 47 hours ago...
            job_id = await _admit(store, repo, pr, sha(pr), at)
            [lease] = await store.claim(owner="worker-old", limit=1, now=at, lease_seconds=60)
            assert lease.job_id == job_id
            usage = Usage(MODEL, 10_000 * day, 1_000 * day, 500, 2_000)
            if day == 2 and repo == EVIL_REPO:
                await store.fail_if_lease_held(
                    lease, now=at + 30, error="<b>model refused</b>: budget exceeded", usage=usage
                )
                add(JobState.FAILED, job_id, finished=at + 30)
                continue
            await store.save_progress_if_lease_held(lease, now=at + 5, check_run_id=out.check_run_id + pr)
            await store.record_published_review(job_id, out.review_id + pr)
            await store.complete_if_lease_held(lease, now=at + 60, outcome="review published", usage=usage)
            add(JobState.SUCCEEDED, job_id, finished=at + 60)
            if not out.reviewed:
                out.reviewed = job_id
    # A failure within the last day, with an error that is untrusted text.
    pr += 1
    failed = await _admit(store, EVIL_REPO, pr, sha(pr), now - 3600)
    [lease] = await store.claim(owner="worker-old", limit=1, now=now - 3600, lease_seconds=60)
    await store.fail_if_lease_held(lease, now=now - 3500, error="<img src=x onerror=alert(1)> permanent")
    add(JobState.FAILED, failed)
    # Running: one held by a live worker, one by a worker gone without a word.
    for owner in ("worker-live", "worker-gone"):
        pr += 1
        job_id = await _admit(store, "octo/gadgets", pr, sha(pr), now - 120)
        [lease] = await store.claim(owner=owner, limit=1, now=now - 100, lease_seconds=300)
        assert lease.job_id == job_id
        add(JobState.RUNNING, job_id)
    # Superseded: a push replaces a queued head.
    pr += 1
    old = await _admit(store, "octo/widgets", pr, sha(f"{pr}a"), now - 600)
    add(JobState.QUEUED, await _admit(store, "octo/widgets", pr, sha(f"{pr}b"), now - 500))
    add(JobState.SUPERSEDED, old)
    # Cancelled: the pull request closed.
    pr += 1
    closed = await _admit(store, "octo/gadgets", pr, sha(pr), now - 400)
    await store.admit(
        Delivery(f"seed-close-{pr}", "pull_request", "closed"),
        CancelPR(repo_id("octo/gadgets"), pr, "pull request closed"),
        now=now - 390,
        max_attempts=3,
    )
    add(JobState.CANCELLED, closed)
    await store.register_worker(
        WorkerInfo("worker-live", "host-a", 101, "worker", "0.1.0", 4, 60.0, now - 3600, now - 5, 1)
    )
    await store.register_worker(
        WorkerInfo("worker-gone", "host-b", 202, "worker", "0.1.0", 4, 60.0, now - 7200, now - 600, 1)
    )
    await store.register_worker(
        WorkerInfo("web-c", "host-c", 303, "serve --no-worker", "0.1.0", 0, 60.0, now - 7200, now - 2, 0)
    )
    # Queued: two waiting their turn (the older is the oldest pending job after the running ones).
    for _ in range(2):
        pr += 1
        add(JobState.QUEUED, await _admit(store, "octo/widgets", pr, sha(pr), now - 60))
    await _teach(store, now, out)
    return out


TITLE = "f2 returns a constant <b>2</b>"  # a finding people gave -1, twice
LEARNINGS = (  # (repository, sentence, path glob, kind, source link)
    ("octo/widgets", "Do not flag missing docstrings on private helpers.", None, "do-not-flag", "#issuecomment-7001"),
    ("octo/widgets", "Prefer pathlib over os.path.", "src/**", "prefer", None),
    (
        EVIL_REPO,
        "Do not flag <img src=x onerror=alert(2)> in templates.",
        "*.html",
        "do-not-flag",
        "#issuecomment-7002",
    ),
)


async def _teach(store, now: float, out: Seeded) -> None:
    """Learnings of two repositories (one with untrusted text), one applied twice; 👍/👎 on two findings."""
    at = datetime.fromtimestamp(now - 7200, UTC)
    for repo, text, glob, kind, link in LEARNINGS:
        url = f"https://github.com/{repo}/pull/1{link}" if link else None
        draft = make_draft(
            repo=repo_id(repo),
            text=text,
            path_glob=glob,
            kind=kind,
            source_kind="command",
            source_url=url,
            author="alice",
            created_at=at,
        )
        learning = await store.add_learning(draft, limit=100)
        out.learnings.setdefault(repo, []).append(learning.id)
    first = out.learnings["octo/widgets"][0]
    for _ in range(2):
        await store.mark_learnings_applied([first], datetime.fromtimestamp(now - 600, UTC))
    widgets = str(repo_id("octo/widgets"))
    posted = Finding(int(widgets), 1, 1, None, sha(1), "src/widget.py", 4, "return 2", (), (), "warning", TITLE, "d1")
    await store.record_findings([posted], now=now - 7000)
    disliked = finding_key(posted.path, posted.line_text, posted.body_digest)
    for author, signal, key in (("alice", "-1", disliked), ("bob", "-1", disliked), ("carol", "+1", "e" * 32)):
        await store.record_finding_feedback(widgets, key, signal, author, None, at)


def queue_counts(seeded: Seeded) -> dict[str, int]:
    """What the queue page counts: pending jobs, and finished jobs of the last day."""
    return {state: sum(1 for i in ids if i not in seeded.old) for state, ids in seeded.ids.items()}


# -- the benchmark's bulk fill ----------------------------------------------------------------------------------

_COLUMNS = (
    "revision_key, repo_id, repo_full_name, installation_id, pr_number, head_sha, trigger, priority, state, details,"
    " attempts, max_attempts, next_attempt_at, lease_owner, lease_token, lease_expires_at, last_error, outcome,"
    " created_at, started_at, finished_at, updated_at"
)
_ATTEMPT_COLUMNS = (
    "job_id, attempt, lease_owner, lease_token, started_at, finished_at, outcome, error, model,"
    " input_tokens, output_tokens, cache_creation_tokens, cache_read_tokens"
)
STATE_MIX = (
    ("succeeded", 0.70),
    ("superseded", 0.12),
    ("cancelled", 0.08),
    ("failed", 0.04),
    ("queued", 0.05),
)
RUNNING = 32  # the newest jobs: as many as the slots of four workers


def bulk_rows(n: int, now: float, *, repos: int = 50, days: int = 90, seed: int = 19) -> tuple[list, list]:
    """``n`` jobs spread over ``days`` and ``repos`` repositories in a realistic mix of states, with one attempt per
    claimed job (id i+1 for row i): rows for the jobs and attempts tables, in their column order above."""
    rng = random.Random(seed)
    states = [s for s, _ in STATE_MIX]
    weights = [w for _, w in STATE_MIX]
    jobs, attempts = [], []
    for i in range(n):
        created = now - days * 86400 * (1 - i / n)
        state = "running" if i >= n - RUNNING else rng.choices(states, weights)[0]
        repo = f"org{i % repos}/repo{i % repos}"
        pr = 1 + (i // repos) % 500
        claimed = state not in ("queued",)
        finished = created + 90 if state not in ("queued", "running") else None
        owner = f"worker-h{i % 4}" if state == "running" else None
        jobs.append(
            (
                f"{i % repos}:{pr}:{i:040x}:auto",
                i % repos,
                repo,
                7,
                pr,
                f"{i:040x}",
                "auto",
                10,
                state,
                "{}",
                1 if claimed else 0,
                3,
                created,
                owner,
                f"tok{i}" if owner else None,
                now + 60 if owner else None,
                "model refused: permanent" if state == "failed" else None,
                "review published" if state == "succeeded" else None,
                created,
                created + 2 if claimed else None,
                finished,
                finished or created,
            )
        )
        if claimed:
            attempts.append(
                (
                    i + 1,
                    1,
                    owner or "worker-h0",
                    f"att{i}",
                    created + 2,
                    finished,
                    state if finished else None,
                    None,
                    MODEL,
                    rng.randint(5_000, 60_000),
                    rng.randint(500, 4_000),
                    rng.randint(0, 2_000),
                    rng.randint(0, 20_000),
                )
            )
    return jobs, attempts


def insert_sql(table: str, placeholder: str) -> str:
    cols = _COLUMNS if table == "jobs" else _ATTEMPT_COLUMNS
    count = cols.count(",") + 1
    marks = ", ".join(placeholder.format(i + 1) for i in range(count))
    return f"INSERT INTO {table} ({cols}) VALUES ({marks})"
