"""The admin commands against a database holding jobs in every state, as text for people and JSON for scripts."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from reviewer_app.cli.main import main
from reviewer_app.core.admission import Enqueue, JobSpec
from reviewer_app.core.job_records import JobDetails
from reviewer_app.core.states import JobState
from reviewer_app.store.base import Delivery, Usage
from reviewer_app.store.sqlite import SqliteStore
from tests.helpers import sha

REPO = "octo/widgets"


@dataclass
class Jobs:
    queued: int
    expired: int  # running, its worker gone and its lease expired
    unreconciled: int  # running, publication intended, no review id
    succeeded: int
    failed: int
    superseded: int
    newer: int  # the job that superseded `superseded` (queued)
    cancelled: int


async def _fill(path: Path) -> Jobs:
    store = SqliteStore(str(path))
    await store.open()
    now = time.time()
    n = 0

    async def admit(pr: int, head: int, at: float, repo: str = REPO, max_attempts: int = 5) -> int:
        nonlocal n
        n += 1
        spec = JobSpec(
            repo_id=hash(repo) % 10_000,
            repo_full_name=repo,
            installation_id=7,
            pr_number=pr,
            head_sha=sha(head),
            details=JobDetails(delivery_id=f"delivery-{n}"),
        )
        result = await store.admit(
            Delivery(f"delivery-{n}", "pull_request", "opened"), Enqueue(spec), now=at, max_attempts=max_attempts
        )
        return result.job_id

    async def claim(job_id: int, at: float, lease: float, owner: str):
        # Everything else is claimed already, so the claim takes exactly this job.
        [le] = await store.claim(owner=owner, limit=1, now=at, lease_seconds=lease)
        assert le.job_id == job_id
        return le

    succeeded = await admit(1, 1, now - 7200)
    le = await claim(succeeded, now - 7100, 300, "worker-a")
    await store.save_progress_if_lease_held(
        le, now=now - 7050, check_run_id=4242, review_id=9191, publish_intent_at=now - 7050
    )
    usage = Usage(model="claude-test", input_tokens=1200, output_tokens=300, cache_read_tokens=50)
    await store.complete_if_lease_held(le, now=now - 7000, outcome="review published", usage=usage)

    failed = await admit(2, 2, now - 6000, max_attempts=2)
    le = await claim(failed, now - 5900, 300, "worker-a")
    await store.retry_if_lease_held(le, now=now - 5800, at=now - 5800, error="GitHub answered 502; will retry")
    le = await claim(failed, now - 5700, 300, "worker-b")
    await store.fail_if_lease_held(le, now=now - 5600, error="GitHub answered 502; attempts exhausted")

    # Each claim below finds exactly one queued job: the one it means.
    expired = await admit(5, 5, now - 3600)
    await claim(expired, now - 3500, 10, "worker-crashed")  # and the worker dies: nothing renews the lease

    unreconciled = await admit(6, 6, now - 2000, repo="octo/gadgets")
    le = await claim(unreconciled, now - 1990, 3600, "worker-c")
    await store.save_progress_if_lease_held(le, now=now - 100, publish_intent_at=now - 100)

    superseded = await admit(3, 31, now - 1500)
    newer = await admit(3, 32, now - 1000)
    assert (await store.get_job(superseded)).state == JobState.SUPERSEDED

    cancelled = await admit(4, 4, now - 900)
    assert await store.cancel_job(cancelled, now=now - 800, reason="pull request closed")

    queued = await admit(7, 7, now - 60)
    await store.close()
    return Jobs(queued, expired, unreconciled, succeeded, failed, superseded, newer, cancelled)


@pytest.fixture
def db(tmp_path, monkeypatch) -> tuple[Path, Jobs]:
    path = tmp_path / "reviewer.db"
    jobs = asyncio.run(_fill(path))
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{path}")
    # Admin commands do not need the webhook secret: make sure none is around.
    for name in (
        "GITHUB_WEBHOOK_SECRET",
        "REVIEWER_INSECURE_NO_SIGNATURE",
        "GITHUB_APP_ID",
        "GITHUB_PRIVATE_KEY",
        "GITHUB_PRIVATE_KEY_PATH",
        "GITHUB_API_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    return path, jobs


# main() installs its own log handler: the test runner's is put back after each test (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("keep_logging")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv: str):
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def state_of(path: Path, job_id: int) -> JobState:
    async def read() -> JobState:
        store = SqliteStore(str(path))
        await store.open()
        try:
            return (await store.get_job(job_id)).state
        finally:
            await store.close()

    return asyncio.run(read())


def test_status_answers_the_four_questions_on_one_screen(db, capsys) -> None:
    _, jobs = db
    code, out, err = run(capsys, "status")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "queue:  running"
    assert lines[1] == "jobs:   queued 2, running 2, succeeded 1, failed 1, superseded 1, cancelled 1"
    assert f"oldest pending job: 1h 0m old (job {jobs.expired}, running)" in lines
    assert "expired claims: 1" in lines
    assert any(f"job {jobs.expired}  {REPO}#5" in line and "held by worker-crashed" in line for line in lines)
    assert "exhausted retries (failed): 1" in lines
    assert any(f"job {jobs.failed}  {REPO}#2" in line and "attempts exhausted" in line for line in lines)
    assert "publications awaiting reconciliation: 1" in lines
    assert any(f"job {jobs.unreconciled}  octo/gadgets#6" in line for line in lines)
    assert len(lines) < 28


def test_status_as_json(db, capsys) -> None:
    _, jobs = db
    s = run_json(capsys, "status")
    assert s["paused"] is False
    assert s["jobs_by_state"] == {
        "queued": 2,
        "running": 2,
        "succeeded": 1,
        "failed": 1,
        "superseded": 1,
        "cancelled": 1,
    }
    assert 3590 < s["oldest_pending"]["age_seconds"] < 3700 and s["oldest_pending"]["job"]["id"] == jobs.expired
    assert s["expired_claims"]["count"] == 1
    [claim] = s["expired_claims"]["jobs"]
    assert claim["id"] == jobs.expired and claim["lease_owner"] == "worker-crashed"
    assert [j["id"] for j in s["exhausted_retries"]["newest"]] == [jobs.failed]
    assert [j["id"] for j in s["awaiting_reconciliation"]["jobs"]] == [jobs.unreconciled]
    assert s["awaiting_reconciliation"]["count"] == 1


def test_jobs_list_filters_by_state_repo_and_pr(db, capsys) -> None:
    _, jobs = db
    everything = run_json(capsys, "jobs", "list")
    assert len(everything) == 8 and [j["id"] for j in everything] == sorted((j["id"] for j in everything), reverse=True)
    assert [j["id"] for j in run_json(capsys, "jobs", "list", "--state", "failed")] == [jobs.failed]
    two_states = run_json(capsys, "jobs", "list", "--state", "succeeded", "--state", "cancelled")
    assert {j["id"] for j in two_states} == {jobs.succeeded, jobs.cancelled}
    assert [j["id"] for j in run_json(capsys, "jobs", "list", "--repo", "octo/gadgets")] == [jobs.unreconciled]
    assert [j["id"] for j in run_json(capsys, "jobs", "list", "--pr", "3")] == [jobs.newer, jobs.superseded]
    assert len(run_json(capsys, "jobs", "list", "--limit", "3")) == 3

    code, out, _ = run(capsys, "jobs", "list", "--pr", "3")
    assert code == 0
    header, first, second = out.splitlines()
    assert header.split()[:3] == ["ID", "STATE", "PULL"]
    assert first.split()[:3] == [str(jobs.newer), "queued", f"{REPO}#3"]
    assert second.split()[:3] == [str(jobs.superseded), "superseded", f"{REPO}#3"]
    assert "superseded by job" in second


def test_jobs_show_has_every_attempt_and_the_links(db, capsys) -> None:
    _, jobs = db
    code, out, _ = run(capsys, "jobs", "show", str(jobs.failed))
    assert code == 0
    assert out.splitlines()[0] == f"job {jobs.failed}  failed"
    assert f"https://github.com/{REPO}/pull/2" in out
    assert "#1 " in out and "#2 " in out and "lease holder worker-a" in out and "lease holder worker-b" in out
    assert "error: GitHub answered 502; will retry" in out and "error: GitHub answered 502; attempts exhausted" in out

    code, out, _ = run(capsys, "jobs", "show", str(jobs.succeeded))
    assert f"4242  https://github.com/{REPO}/runs/4242" in out
    assert f"9191  https://github.com/{REPO}/pull/1#pullrequestreview-9191" in out
    assert "tokens: input 1200, output 300, cache write 0, cache read 50 (claude-test)" in out
    assert "delivery-1" in out

    job = run_json(capsys, "jobs", "show", str(jobs.succeeded))
    assert job["links"] == {
        "pull_request": f"https://github.com/{REPO}/pull/1",
        "check_run": f"https://github.com/{REPO}/runs/4242",
        "review": f"https://github.com/{REPO}/pull/1#pullrequestreview-9191",
    }
    [attempt] = job["attempt_history"]
    assert attempt["lease_owner"] == "worker-a" and attempt["outcome"] == "succeeded"
    assert attempt["tokens"] == {"input": 1200, "output": 300, "cache_creation": 0, "cache_read": 50}


def test_links_follow_a_github_enterprise_server(db, capsys, monkeypatch) -> None:
    _, jobs = db
    monkeypatch.setenv("GITHUB_API_URL", "https://ghe.example.com/api/v3")
    job = run_json(capsys, "jobs", "show", str(jobs.succeeded))
    assert job["links"]["pull_request"] == f"https://ghe.example.com/{REPO}/pull/1"


def test_retry_gives_a_failed_job_fresh_attempts_and_refuses_a_succeeded_one(db, capsys) -> None:
    path, jobs = db
    code, out, _ = run(capsys, "jobs", "retry", str(jobs.failed))
    assert code == 0 and out.strip() == f"job {jobs.failed} is queued again with fresh attempts (2)"
    job = run_json(capsys, "jobs", "show", str(jobs.failed))
    assert job["state"] == "queued" and job["attempts"] == 0 and len(job["attempt_history"]) == 2

    code, out, err = run(capsys, "jobs", "retry", str(jobs.succeeded))
    assert code == 1 and out == ""
    assert (
        err.strip() == f"reviewer-app: job {jobs.succeeded} is succeeded: only cancelled or failed jobs can be retried"
    )
    assert state_of(path, jobs.succeeded) == JobState.SUCCEEDED


def test_cancel_and_retry_a_cancelled_job(db, capsys) -> None:
    path, jobs = db
    job = run_json(capsys, "jobs", "cancel", str(jobs.queued))
    assert job["state"] == "cancelled" and job["outcome"] == "cancelled by an operator"
    code, out, _ = run(capsys, "jobs", "cancel", str(jobs.unreconciled), "--reason", "stuck")
    assert code == 0 and "its worker stops" in out
    assert state_of(path, jobs.unreconciled) == JobState.CANCELLED
    code, _, err = run(capsys, "jobs", "cancel", str(jobs.succeeded))
    assert code == 1 and "only queued or running jobs can be cancelled" in err
    assert run_json(capsys, "jobs", "retry", str(jobs.queued))["state"] == "queued"


def test_unknown_job_is_exit_1_with_one_line(db, capsys) -> None:
    for command in ("show", "retry", "cancel"):
        code, out, err = run(capsys, "jobs", command, "99999")
        assert (code, out, err) == (1, "", "reviewer-app: no job 99999\n")


def test_queue_pause_and_resume(db, capsys) -> None:
    code, out, _ = run(capsys, "queue", "pause")
    assert code == 0 and out.startswith("queue paused")
    assert run(capsys, "status")[1].splitlines()[0].startswith("queue:  PAUSED")
    assert run_json(capsys, "status")["paused"] is True
    assert run_json(capsys, "queue", "resume") == {"paused": False}
    assert run(capsys, "status")[1].splitlines()[0] == "queue:  running"


def test_a_missing_database_is_not_created(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path}/nothing-here.db")
    monkeypatch.delenv("GITHUB_WEBHOOK_SECRET", raising=False)
    code, _, err = run(capsys, "status")
    assert code == 1 and "no database at" in err
    assert not (tmp_path / "nothing-here.db").exists()


def test_only_admin_commands_go_without_the_webhook_secret(db, capsys, monkeypatch) -> None:
    assert run(capsys, "status")[0] == 0
    monkeypatch.setenv("GITHUB_APP_ID", "42")  # an App: now serve needs its secret, and `config` says so
    code, out, err = run(capsys, "config")
    assert code == 2 and "GITHUB_WEBHOOK_SECRET is not set" in err
    assert "GITHUB_WEBHOOK_SECRET=  # missing" in out and "GITHUB_APP_ID=42" in out


def parse_error(capsys, *argv: str) -> str:
    """What the command line says about a wrong invocation (argparse exits 2)."""
    with pytest.raises(SystemExit) as exit_:
        main(list(argv))
    assert exit_.value.code == 2
    return capsys.readouterr().err


def test_version(capsys) -> None:
    from reviewer_app.dispatch.registry import app_version

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out == f"reviewer-app {app_version()}\n"


def test_a_missing_command_or_subcommand_says_what_to_choose(capsys) -> None:
    err = parse_error(capsys)
    assert (
        "say which command to run: review, serve, worker, config, status, jobs, queue, usage, learnings, outcomes, backup"
        in err
    )
    err = parse_error(capsys, "jobs")
    assert "reviewer-app jobs: error: say what to do: list, show ID, retry ID or cancel ID" in err
    assert "jobs_command" not in err and "required" not in err
    err = parse_error(capsys, "queue")
    assert "reviewer-app queue: error: say what to do: pause or resume" in err and "queue_command" not in err
    err = parse_error(capsys, "learnings")
    assert "reviewer-app learnings: error: say what to do: list, show ID, add SENTENCE or remove ID" in err


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (("usage", "--days", "-1"), "argument --days: '-1' is not a number above 0"),
        (("usage", "--days", "0"), "'0' is not a number above 0"),
        (("usage", "--days", "a week"), "'a week' is not a number"),
        (("jobs", "show", "seven"), "argument ID: 'seven' is not a whole number"),
        (("jobs", "list", "--limit", "0"), "'0' is not a whole number of at least 1"),
        (("serve", "--port", "99999"), "'99999' is not a whole number from 0 to 65535"),
    ],
)
def test_arguments_are_checked_in_words(capsys, argv: tuple[str, ...], fragment: str) -> None:
    err = parse_error(capsys, *argv)
    assert fragment in err and "invalid int value" not in err and "a int" not in err


def test_in_setup_mode_the_admin_commands_say_no_app_is_configured_yet(db, capsys, monkeypatch) -> None:
    """Issue 42: with no App yet, the commands spoke of the database; the database is fine, no App is there."""
    from reviewer_app import __version__

    for argv in (("status",), ("jobs", "list", "--repo", "nobody/here"), ("usage", "--days", "0.0000001")):
        code, out, err = run(capsys, *argv)
        assert code == 0, err
        assert out.rstrip().endswith(
            "`reviewer-app serve` shows the setup page that registers one; until then no "
            "webhook arrives and no job is queued."
        )
    status = run_json(capsys, "status")
    assert status["app_configured"] is False and status["version"] == __version__
    assert f"version: reviewer-app {__version__}" in run(capsys, "status")[1]
    monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", "s3cret")  # an App's secret: no longer setup mode
    assert "setup page" not in run(capsys, "status")[1]
    assert run_json(capsys, "status")["app_configured"] is True


def test_a_database_not_created_yet_is_said_so(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path}/later.db")
    monkeypatch.delenv("GITHUB_WEBHOOK_SECRET", raising=False)
    code, _, err = run(capsys, "jobs", "list")
    assert code == 1 and "yet: `reviewer-app serve` creates it when it starts" in err


def test_what_others_wrote_reaches_the_terminal_without_its_escapes(db, capsys) -> None:
    # A job's error may quote what GitHub or a pull request said (a file name, a message): printed, it is text only.
    path, jobs = db
    trapped = "file \x1b]8;;https://evil.example/\x07src/a.py\x1b]8;;\x07 refused\x1b[2K\x1b[1A\x9b31m\x85."
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE jobs SET last_error = ? WHERE id = ?", (trapped, jobs.failed))
    for argv in (("jobs", "show", str(jobs.failed)), ("jobs", "list"), ("jobs", "show", str(jobs.failed), "--json")):
        code, out, err = run(capsys, *argv)
        assert code == 0, err
        assert "file src/a.py refused." in out or argv[1] != "show" or "--json" in argv
        assert not any(ord(c) < 0x20 and c not in "\n\t" or 0x7F <= ord(c) <= 0x9F for c in out + err), argv
