"""Separate roles as separate processes: receivers (`serve --no-worker`) and workers (`reviewer-app worker`).

The big test runs the real review pipeline against the fakes (served from a thread of this process) with two
receivers and three workers on one PostgreSQL schema: 500 webhook posts over 40 pull requests, with the same
delivery posted to both receivers at once, old deliveries resent, and pushes that supersede each other, while one
worker is killed with SIGKILL halfway. Then every job must be finished, no job may have run in two workers at
once, and nothing may have been published twice.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reviewer_app.core.markers import parse_markers
from tests.e2e.test_postgres_hosts import query
from tests.fakes.anthropic import DEFAULT_MODEL_ANSWER, FakeAnthropic
from tests.fakes.github import FakeGitHub
from tests.fakes.threads import FakesThread
from tests.harness import REPO, SOURCE
from tests.helpers import SECRET, encode, pr_payload, sha, webhook_headers
from tests.payloads import stamp
from tests.pg import create_schema, drop_schema, postgres_dsn
from tests.serve_process import ServeProcess, fakes_env, free_port, wait_until

PRS = 40
PUSHES = 6  # synchronize events per PR after its `opened`: 7 revisions per PR, 280 in all
PAIRS = 100  # new deliveries posted to both receivers at the same moment
RESENDS = 120  # earlier deliveries sent again later (GitHub's redelivery, or a retry after a timeout)
POSTS = PRS * (1 + PUSHES) + PAIRS + RESENDS  # 500
RUNNING_OF = "SELECT pr_number, head_sha FROM jobs WHERE state = 'running' AND lease_owner LIKE $1"


@pytest.fixture
def database() -> Iterator[str]:
    """A DATABASE_URL whose search_path selects a fresh schema (skipped, or failed on CI, without a server)."""
    dsn = postgres_dsn()
    schema = asyncio.run(create_schema(dsn))
    try:
        yield f"{dsn}{'&' if '?' in dsn else '?'}search_path={schema}"
    finally:
        asyncio.run(drop_schema(dsn, schema))


@dataclass
class Post:
    """One webhook POST: which delivery, to which receiver, and what it answered."""

    delivery: str
    pr: int
    head: str
    receiver: int
    status: int = 0
    answer: dict[str, Any] | None = None


@dataclass
class Step:
    """One PR's next event: a new revision (``push``: advance the fake PR's head first), or a resend."""

    pr: int
    kind: str  # "open", "push" or "resend"
    pair: bool = False  # post the new delivery to both receivers at once


def plan(rng: random.Random) -> list[list[Step]]:
    """Each PR's events in order: opened, then pushes, with resends of earlier deliveries in between."""
    per_pr: list[list[Step]] = [[Step(n, "open")] + [Step(n, "push") for _ in range(PUSHES)] for n in range(1, PRS + 1)]
    for step in rng.sample([s for steps in per_pr for s in steps], PAIRS):
        step.pair = True
    for _ in range(RESENDS):
        steps = per_pr[rng.randrange(PRS)]
        steps.insert(rng.randint(1, len(steps)), Step(steps[0].pr, "resend"))
    return per_pr


def app_env(url: str, fakes: FakesThread, github: FakeGitHub) -> dict[str, str]:
    return fakes_env(
        url,
        fakes,
        github,
        REVIEWER_LEASE_SECONDS="2",
        REVIEWER_SCAN_SECONDS="0.2",
        REVIEWER_CHECK_SYNC_SECONDS="0.5",
        REVIEWER_RETRY_BASE_SECONDS="0.1",
        REVIEWER_RETRY_MAX_SECONDS="0.5",
        REVIEWER_GITHUB_RETRY_SECONDS="0.01",
        REVIEWER_MODEL_TIMEOUT_SECONDS="10",
        REVIEWER_SHUTDOWN_GRACE_SECONDS="5",
        REVIEWER_DEBOUNCE_SECONDS="0",
        REVIEWER_SWEEP_SECONDS="0",
        REVIEWER_RECOVERY_SECONDS="0",
        REVIEWER_MAX_REVIEWS_PER_DAY="100000",
        REVIEWER_DB_POOL_SIZE="4",
    )


def start_all(procs: list[ServeProcess]) -> None:
    with ThreadPoolExecutor(len(procs)) as pool:
        list(pool.map(lambda p: p.start(timeout=60), procs))


def stop_all(procs: list[ServeProcess]) -> list[int]:
    """SIGTERM to every process at once; their exit statuses."""
    for p in procs:
        assert p.proc is not None
        p.proc.terminate()
    return [p.proc.wait(30) for p in procs if p.proc is not None]


def owner_of(proc: ServeProcess) -> str:
    assert proc.proc is not None
    return f"-{proc.proc.pid}-"  # new_owner_id(): worker-HOST-PID-RANDOM


def get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0  # not answering yet (a loaded machine): the caller's deadline decides


def test_two_receivers_three_workers_one_killed_review_everything_once(database: str, tmp_path: Path) -> None:
    url = database
    rng = random.Random(20261201)
    github, anthropic = FakeGitHub(), FakeAnthropic()
    inst = github.add_installation()
    github.add_repo(REPO, inst.id)
    heads: dict[int, list[str]] = {}
    for n in range(1, PRS + 1):
        heads[n] = [github.add_pull(REPO, n, sha(f"pr{n}-0"), files=[SOURCE]).head_sha]
    # Every model call takes a moment, so jobs are in flight when the worker is killed.
    anthropic.script_tool_answer(DEFAULT_MODEL_ANSWER, delay=0.2, times=4 * POSTS)

    with FakesThread(github, anthropic) as fakes:
        env = app_env(url, fakes, github)
        receivers = [ServeProcess(env, tmp_path / f"receiver{i}.log", args=("--no-worker",)) for i in range(2)]
        workers = [ServeProcess(env, tmp_path / f"worker{i}.log", command="worker") for i in range(3)]
        doomed, survivors = workers[0], workers[1:]
        procs = [*receivers, *workers]
        try:
            start_all(procs)
            # A worker's port serves health and readiness only: no webhook route. Ready once its dispatcher runs.
            wait_until(lambda: get(workers[1].url + "/readyz") == 200)
            assert workers[1].post("/api/github/webhooks", b"{}", {})[0] == 404

            posts, sent, killed_jobs = post_everything(plan(rng), receivers, workers, fakes, github, heads, url)
            pending = "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')"
            wait_until(lambda: query(url, pending)[0][0] == 0, timeout=60)
            # Graceful stops: SIGTERM, exit status 0.
            assert stop_all([*receivers, *survivors]) == [0] * 4
            assert doomed.proc is not None and doomed.proc.returncode == -signal.SIGKILL
        finally:
            for p in procs:
                p.kill()
        reviews = {n: fakes.call(github.reviews_for, REPO, n) for n in heads}

    assert len(posts) == POSTS
    jobs = {r["id"]: r for r in query(url, "SELECT id, pr_number, head_sha, state, review_id FROM jobs")}
    attempts: dict[int, list[Any]] = defaultdict(list)
    for a in query(
        url, "SELECT job_id, attempt, lease_owner, started_at, finished_at, outcome FROM attempts ORDER BY job_id, id"
    ):
        attempts[a["job_id"]].append(a)

    # Admission: every post was accepted after a commit; one job per revision, whichever receiver and however often.
    assert {p.status for p in posts} == {202}, Counter(p.status for p in posts)
    by_delivery: dict[str, list[Post]] = defaultdict(list)
    for p in posts:
        by_delivery[p.delivery].append(p)
    assert len(by_delivery) == sent == PRS * (1 + PUSHES)
    for delivery, answers in by_delivery.items():
        assert len({a.answer["job_id"] for a in answers}) == 1, (delivery, answers)  # type: ignore[index]
        outcomes = sorted(a.answer["outcome"] for a in answers)  # type: ignore[index]
        # A worker that found its head moved on hands the new head over (admits it) first: that head's own webhook
        # is then a duplicate revision, or, for a head older than the handed-over one, recorded superseded.
        assert outcomes[:-1] == ["duplicate-delivery"] * (len(answers) - 1), (delivery, outcomes)
        assert outcomes[-1] in ("enqueued", "duplicate-revision", "superseded"), (delivery, outcomes)
    handovers = query(url, "SELECT count(*) FROM deliveries WHERE delivery_id LIKE 'handover:%'")[0][0]
    assert query(url, "SELECT count(*) FROM deliveries")[0][0] == sent + handovers
    assert sent <= len(jobs) <= sent + handovers
    jobs_of: dict[tuple[int, str], list[Any]] = defaultdict(list)
    for j in jobs.values():
        jobs_of[(j["pr_number"], j["head_sha"])].append(j)
    assert set(jobs_of) == {(n, h) for n, hs in heads.items() for h in hs}
    # One job per head except where a handover and the head's own late webhook both recorded one (the late one
    # superseded at once): never two that could both review.
    assert all(sum(j["state"] == "succeeded" for j in js) <= 1 for js in jobs_of.values()), jobs_of
    job_of = {key: next((j for j in js if j["state"] == "succeeded"), js[0]) for key, js in jobs_of.items()}

    # Every job finished; each PR's newest head was reviewed, older heads were reviewed or superseded.
    assert Counter(j["state"] for j in jobs.values()).keys() <= {"succeeded", "superseded"}, Counter(
        j["state"] for j in jobs.values()
    )
    for n, hs in heads.items():
        assert job_of[(n, hs[-1])]["state"] == "succeeded", (n, job_of[(n, hs[-1])])

    # No job ran in two workers at once:
    # - a job's attempts follow each other: each one was closed (finished_at) before the next was claimed; and
    # - an attempt cut short by the rescuer ("lease_expired") belongs to the killed worker, which was dead before
    #   its lease expired. Any live worker always kept its lease until it wrote its own outcome, so no stale
    #   attempt of a live worker went on running beside a newer one (a fenced write would have refused it, but the
    #   work would have been done twice).
    killed = owner_of(doomed)
    expired = [a for rows in attempts.values() for a in rows if a["outcome"] == "lease_expired"]
    assert all(killed in a["lease_owner"] for a in expired), [a["lease_owner"] for a in expired]
    # The jobs it held were rescued after their lease expired and then reviewed by a surviving worker.
    assert killed_jobs
    for key in killed_jobs:
        rows = attempts[job_of[key]["id"]]
        assert [a["outcome"] for a in rows][-2:] == ["lease_expired", "succeeded"], (key, rows)
        assert killed in rows[-2]["lease_owner"] and killed not in rows[-1]["lease_owner"], (key, rows)
    for job_id, rows in attempts.items():
        assert [a["attempt"] for a in rows] == sorted(a["attempt"] for a in rows), (job_id, rows)
        assert all(a["finished_at"] is not None for a in rows), (job_id, rows)
        for earlier, later in zip(rows, rows[1:], strict=False):
            assert earlier["finished_at"] <= later["started_at"], (job_id, rows)
            assert earlier["outcome"] in ("lease_expired", "retry", "deferred"), (job_id, rows)
        outcomes = [a["outcome"] for a in rows]
        assert outcomes.count("succeeded") == (1 if jobs[job_id]["state"] == "succeeded" else 0), (job_id, rows)
        assert "lease_lost" not in outcomes, (job_id, rows)
    assert all(j["state"] != "succeeded" or attempts[j["id"]] for j in jobs.values())

    # Nothing published twice: at most one review of the bot per (PR, head), exactly one for each head whose job
    # succeeded, and it is the one the job recorded, carrying the job's marker.
    for n, hs in heads.items():
        bot = [r for r in reviews[n] if r["user"]["login"] == f"{github.app_slug}[bot]"]
        per_head = Counter(r["commit_id"] for r in bot)
        assert max(per_head.values(), default=0) <= 1, (n, per_head)
        for h in hs:
            job = job_of[(n, h)]
            published = [r for r in bot if r["commit_id"] == h]
            if job["state"] == "succeeded":
                assert len(published) == 1 and published[0]["id"] == job["review_id"], (n, h, published, job)
                assert [(m.job_id, m.head_sha) for m in parse_markers(published[0]["body"])] == [(job["id"], h)]


def post_everything(
    per_pr: list[list[Step]],
    receivers: list[ServeProcess],
    workers: list[ServeProcess],
    fakes: FakesThread,
    github: FakeGitHub,
    heads: dict[int, list[str]],
    url: str,
) -> tuple[list[Post], int, list[tuple[int, str]]]:
    """Post the PRs' events in rounds (each PR's k-th event in round k, all PRs of a round concurrently, each PR's
    events in order); SIGKILL the first worker halfway, while it runs a job no later event supersedes.

    Returns the posts, the number of distinct deliveries, and the (PR, head) of the jobs the killed worker held."""
    posts: list[Post] = []
    bodies: dict[str, bytes] = {}
    sent_by_pr: dict[int, list[Post]] = defaultdict(list)
    rounds = max(len(steps) for steps in per_pr)
    prs_pool, posts_pool = ThreadPoolExecutor(PRS), ThreadPoolExecutor(PRS)

    def new_delivery(step: Step, k: int) -> list[Post]:
        n = step.pr
        if step.kind == "push":
            head = sha(f"pr{n}-{len(heads[n])}")
            fakes.call(github.advance_head, REPO, n, head)  # GitHub's state moves before it sends the webhook
            heads[n].append(head)
        head = heads[n][-1]
        payload = pr_payload(
            action="opened" if step.kind == "open" else "synchronize",
            number=n,
            head=head,
            repo_id=github.repos[REPO].id,
            repo=REPO,
            installation_id=github.repos[REPO].installation_id,
            updated_at=stamp(60 * len(heads[n])),
        )
        delivery = f"d-{n}-{len(heads[n])}"
        bodies[delivery] = encode(payload)
        targets = [0, 1] if step.pair else [(n + k) % 2]
        return [Post(delivery, n, head, r) for r in targets]

    def send(post: Post) -> Post:
        body = bodies[post.delivery]
        post.status, raw = receivers[post.receiver].post(
            "/api/github/webhooks", body, webhook_headers(body, delivery=post.delivery)
        )
        post.answer = json.loads(raw) if post.status in (200, 202) else {"error": raw.decode(errors="replace")}
        return post

    def run_pr_step(steps: list[Step], k: int) -> list[Post]:
        step = steps[k]
        if step.kind == "resend":
            earlier = sent_by_pr[step.pr][random.Random(k * 1000 + step.pr).randrange(len(sent_by_pr[step.pr]))]
            batch = [Post(earlier.delivery, step.pr, earlier.head, 1 - earlier.receiver)]
        else:
            batch = new_delivery(step, k)
        done = list(posts_pool.map(send, batch))  # a pair goes to both receivers at the same moment
        sent_by_pr[step.pr].append(done[0])
        return done

    def held_final_heads(k: int) -> list[tuple[int, str]]:
        """The jobs the first worker runs now whose head no later event of the plan replaces: only the rescuer can
        take them from a killed worker (a supersede by admission would settle the others without it)."""
        final = {steps[0].pr for steps in per_pr if all(s.kind == "resend" for s in steps[k + 1 :])}
        rows = query(url, RUNNING_OF, f"%{owner_of(workers[0])}%")
        return [(n, h) for n, h in rows if n in final and h == heads[n][-1]]

    def try_kill(k: int) -> bool:
        """SIGKILL the first worker if it holds such a job. It is frozen (SIGSTOP) while we look, so a job seen
        running cannot finish between the look and the kill."""
        proc = workers[0].proc
        assert proc is not None
        if not held_final_heads(k):
            return False
        proc.send_signal(signal.SIGSTOP)
        held = held_final_heads(k)
        if not held:
            proc.send_signal(signal.SIGCONT)
            return False
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        killed.extend(held)
        return True

    killed: list[tuple[int, str]] = []
    try:
        for k in range(rounds):
            active = [steps for steps in per_pr if k < len(steps)]
            for batch in prs_pool.map(lambda steps, k=k: run_pr_step(steps, k), active):
                posts.extend(batch)
            if not killed and len(posts) >= POSTS // 2:
                try_kill(k)
        if not killed:  # nothing suitable held halfway: kill it while it works off the backlog
            wait_until(lambda: try_kill(rounds))
    finally:
        prs_pool.shutdown()
        posts_pool.shutdown()
    return posts, len(bodies), killed


def test_a_worker_without_a_port_runs_jobs_a_receiver_admits_and_stops_on_sigterm(tmp_path: Path) -> None:
    """`reviewer-app worker` (no --port) beside `serve --no-worker` on one SQLite file: it opens no port at all."""
    db = str(tmp_path / "reviewer.db")
    env = {
        "DATABASE_URL": f"sqlite:///{db}",
        "GITHUB_WEBHOOK_SECRET": SECRET,
        "REVIEWER_RUNNER": "noop",
        "REVIEWER_SCAN_SECONDS": "0.2",
    }
    receiver = ServeProcess(env, tmp_path / "receiver.log", args=("--no-worker",)).start()
    # The worker gets PORT in its environment like every process here, and must ignore it.
    worker = ServeProcess(
        {k: v for k, v in env.items() if k != "GITHUB_WEBHOOK_SECRET"},
        tmp_path / "worker.log",
        command="worker",
        health=False,
    ).start()
    try:
        body = encode(pr_payload(head=sha(1)))
        status, answer = receiver.post("/api/github/webhooks", body, webhook_headers(body))
        assert status == 202
        job_id = json.loads(answer)["job_id"]

        def job() -> sqlite3.Row:
            with sqlite3.connect(db) as conn:
                conn.row_factory = sqlite3.Row
                return conn.execute("SELECT state, lease_owner FROM jobs WHERE id = ?", (job_id,)).fetchone()

        wait_until(lambda: job()["state"] == "succeeded")
        assert owner_of(worker) in job()["lease_owner"]
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(worker.url + "/healthz", timeout=2)
        assert worker.terminate() == 0
        assert "stopped" in (tmp_path / "worker.log").read_text()
    finally:
        receiver.kill()
        worker.kill()


def test_a_worker_with_nothing_to_run_exits_with_status_2(tmp_path: Path) -> None:
    """No GitHub App and the review runner: a worker would idle forever; it says why and exits instead."""
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'reviewer.db'}",
        "REVIEWER_ENV_FILE": str(tmp_path / ".env"),
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        [sys.executable, "-m", "reviewer_app.cli.main", "worker", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "nothing to run" in done.stderr


def test_a_host_stopped_while_its_review_post_is_in_flight_is_not_doubled_by_another(
    database: str, tmp_path: Path
) -> None:
    # A deploy: host A's grace runs out while its review POST is on its way (the fake holds it until the test lets it
    # go); host B shares the PostgreSQL store. A hands the job back only once its write has finished, and renews its
    # lease all the while, so B cannot rescue the job meanwhile; then B finds the review by its marker and publishes
    # nothing. Before: A stopped renewing when its slot was freed, the lease ran out during the wait, B rescued the
    # job, found no review yet, and posted a second. The order is forced by the held POST, not by timing.
    from tests.payloads import pull_request_event

    github, anthropic = FakeGitHub(), FakeAnthropic()
    inst = github.add_installation()
    repo = github.add_repo(REPO, inst.id)
    pull = github.add_pull(REPO, 1, files=[SOURCE])
    lease = 2.0  # app_env's REVIEWER_LEASE_SECONDS
    with FakesThread(github, anthropic) as fakes:
        held = fakes.call(github.inject, "POST", r"/pulls/1/reviews$", "hang")  # A's POST only: held until released
        env = {**app_env(database, fakes, github), "REVIEWER_SHUTDOWN_GRACE_SECONDS": "0.2"}
        first = ServeProcess(env, tmp_path / "first.log").start()
        second: ServeProcess | None = None
        try:
            payload = pull_request_event(
                number=1,
                head=pull.head_sha,
                base_sha=pull.base_sha,
                repo=REPO,
                repo_id=repo.id,
                installation_id=inst.id,
            )
            body = json.dumps(payload).encode()
            status, answer = first.post("/api/github/webhooks", body, webhook_headers(body))
            assert status == 202
            job_id = json.loads(answer)["job_id"]
            wait_until(lambda: held.hits > 0)  # the POST is in flight
            second = ServeProcess(env, tmp_path / "second.log", command="worker").start()
            assert first.proc is not None
            lease_of = "SELECT state, lease_owner, lease_expires_at FROM jobs WHERE id = $1"
            expiry = query(database, lease_of, job_id)[0]["lease_expires_at"]
            first.proc.terminate()

            # A's grace runs out, its runner is cancelled, and it waits for the held POST: two leases and more after
            # the expiry it had when it was told to stop, the job is still A's, renewed, never rescued by B.
            def renewed_or_gone() -> Any:
                r = query(database, lease_of, job_id)[0]
                return (r["state"] != "running" or r["lease_expires_at"] > expiry + 2 * lease) and r

            row = wait_until(renewed_or_gone, timeout=60)
            assert row["state"] == "running" and owner_of(first) in row["lease_owner"], dict(row)
            fakes.call(github.release_hangs)
            assert first.proc.wait(30) == 0
            state = "SELECT state, outcome FROM jobs WHERE id = $1"
            done = wait_until(lambda: (r := query(database, state, job_id)[0])[0] not in ("queued", "running") and r)
            assert done[0] == "succeeded", dict(done)
        finally:
            first.kill()
            if second is not None:
                second.kill()
        reviews = fakes.call(github.reviews_for, REPO, 1)
    assert len(reviews) == 1, [r["id"] for r in reviews]
    assert len(anthropic.message_requests) == 1
