"""`reviewer-app learnings list|show|add|remove --repo`: a repository's learnings on the database, named by the full
name the app's jobs record (or the numeric id), as text for people and JSON for scripts."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reviewer_app.cli.main import main
from reviewer_app.core.admission import Enqueue, JobSpec
from reviewer_app.core.job_records import JobDetails
from reviewer_app.core.learnings import make_draft
from reviewer_app.store.base import Delivery
from reviewer_app.store.sqlite import SqliteStore
from tests.helpers import sha

REPO, REPO_ID = "octo/widgets", 4_000_000_001  # an id past 2**31, as GitHub's are


async def _fill(path: Path) -> None:
    """One job of the repository (so its name is known) and one learning taught with a command."""
    store = SqliteStore(str(path))
    await store.open()
    try:
        spec = JobSpec(
            repo_id=REPO_ID,
            repo_full_name=REPO,
            installation_id=7,
            pr_number=3,
            head_sha=sha(1),
            details=JobDetails(delivery_id="d-1"),
        )
        await store.admit(Delivery("d-1", "pull_request", "opened"), Enqueue(spec), now=1.0, max_attempts=5)
        draft = make_draft(
            repo=REPO_ID,
            text="Do not flag missing docstrings.",
            source_kind="command",
            source_url="https://github.com/octo/widgets/pull/3#issuecomment-5001",
            author="alice",
            created_at=datetime(2026, 12, 1, 9, 30, tzinfo=UTC),
        )
        await store.add_learning(draft, limit=100)
    finally:
        await store.close()


@pytest.fixture
def db(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "reviewer.db"
    asyncio.run(_fill(path))
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{path}")
    for name in ("GITHUB_WEBHOOK_SECRET", "REVIEWER_INSECURE_NO_SIGNATURE", "GITHUB_APP_ID"):
        monkeypatch.delenv(name, raising=False)  # a database command needs no webhook secret
    return path


# main() installs its own log handler: the test runner's is put back after each test (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("keep_logging")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_and_show_name_each_learning_and_its_source(db, capsys) -> None:
    code, out, _ = run(capsys, "learnings", "list", "--repo", REPO)
    assert code == 0
    assert "do-not-flag" in out and "(all)" in out and "Do not flag missing docstrings." in out

    code, out, _ = run(capsys, "learnings", "show", "1", "--repo", "Octo/Widgets")  # names compare as GitHub's do
    assert code == 0
    assert "source:   /review learn by alice, 2026-12-01 09:30 UTC" in out
    assert "link:     https://github.com/octo/widgets/pull/3#issuecomment-5001" in out
    assert "applied:  0 time(s), last never" in out


async def _propose(path: Path) -> None:
    store = SqliteStore(str(path))
    await store.open()
    try:
        proposed = make_draft(
            repo=REPO_ID,
            text="Do not flag unclosed files in scripts.",
            path_glob="scripts/run.py",
            source_kind="reply",
            author="bob",
            created_at=datetime(2026, 12, 1, 9, 40, tzinfo=UTC),
            status="pending",
        )
        await store.add_learning(proposed, limit=100)
    finally:
        await store.close()


def test_a_pending_learning_is_listed_as_pending(db, capsys) -> None:
    asyncio.run(_propose(db))
    code, out, _ = run(capsys, "learnings", "list", "--repo", REPO)
    assert code == 0
    [active] = [line for line in out.splitlines() if "missing docstrings" in line]
    [pending] = [line for line in out.splitlines() if "unclosed files" in line]
    assert " active " in active and " pending " in pending and "scripts/run.py" in pending
    code, out, _ = run(capsys, "learnings", "list", "--repo", REPO, "--json")
    assert [x["status"] for x in json.loads(out)] == ["active", "pending"]


def test_add_then_remove_through_the_cli(db, capsys) -> None:
    code, out, err = run(
        capsys,
        "learnings",
        "add",
        "--repo",
        REPO,
        "--path",
        "src/**",
        "--kind",
        "prefer",
        "Prefer",
        "pathlib.",
        "--json",
    )
    assert code == 0, err
    added = json.loads(out)
    assert (added["repo"], added["path_glob"], added["kind"], added["text"]) == (
        str(REPO_ID),
        "src/**",
        "prefer",
        "Prefer pathlib.",
    )
    assert (added["source_kind"], added["author"]) == ("cli", "operator")

    code, out, _ = run(capsys, "learnings", "remove", str(added["id"]), "--repo", str(REPO_ID))
    assert code == 0 and f"learning {added['id']} removed" in out
    code, out, _ = run(capsys, "learnings", "list", "--repo", REPO, "--json")
    assert [x["id"] for x in json.loads(out)] == [1]


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (("show", "9", "--repo", REPO), "no learning 9 in octo/widgets"),
        (("add", "--repo", "other/repo", "Prefer", "early", "returns."), "has not reviewed other/repo yet"),
        (("remove", "3", "--repo", "other/repo"), "no learning 3 in other/repo"),
        (("add", "--repo", REPO, "--path", "../x", "Do", "not", "flag", "it."), "nothing added: the path"),
    ],
)
def test_what_cannot_be_done_is_exit_1_with_one_line(db, capsys, argv, fragment) -> None:
    code, out, err = run(capsys, "learnings", *argv)
    assert code == 1 and out == ""
    assert fragment in err and err.count("\n") == 1


def test_a_repository_not_reviewed_yet_has_no_learnings_and_that_is_no_error(db, capsys) -> None:
    """Issue 42: `learnings list --repo owner/name` failed (exit 1) before the repository's first review."""
    code, out, err = run(capsys, "learnings", "list", "--repo", "other/repo")
    assert (code, out, err) == (0, "other/repo has no learnings\n", "")


@pytest.mark.parametrize("repo", ["nonsense", "a/b/c", "/name", "owner/"])
def test_a_repo_that_is_no_repository_is_a_usage_error(db, capsys, repo: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["learnings", "list", "--repo", repo])
    assert exit_.value.code == 2
    assert "neither owner/name nor a repository id" in capsys.readouterr().err


def test_the_limit_holds_for_the_cli_too(db, capsys, monkeypatch) -> None:
    monkeypatch.setenv("REVIEWER_LEARNINGS_PER_REPO", "1")
    code, _, err = run(capsys, "learnings", "add", "--repo", REPO, "Prefer", "early", "returns.")
    assert code == 1 and "nothing added: the repository holds 1 learnings" in err


def test_before_a_first_review_owner_name_is_looked_up_on_github(db, capsys, monkeypatch) -> None:
    """Issue 42: before the app's first review of a repository, its learnings could be named only by the numeric id.
    With the App configured, the command asks GitHub (the fake) for the id, with a token that may read metadata only
    of that one repository, and the learning is kept under it, where the repository's reviews look."""
    from tests.fakes.anthropic import FakeAnthropic
    from tests.fakes.github import FakeGitHub
    from tests.fakes.threads import FakesThread
    from tests.github.test_fake_schema import disagreements

    github = FakeGitHub()
    inst = github.add_installation()
    repo = github.add_repo("octo/newcomer", inst.id, repo_id=3_000_000_001)  # past 2**31, as GitHub's ids get
    with FakesThread(github, FakeAnthropic()) as fakes:
        monkeypatch.setenv("GITHUB_APP_ID", str(github.app_id))
        monkeypatch.setenv("GITHUB_PRIVATE_KEY", github.private_key)
        monkeypatch.setenv("GITHUB_API_URL", fakes.github_url)
        code, out, err = run(capsys, "learnings", "add", "--repo", "octo/newcomer", "Prefer", "early", "returns.")
        assert code == 0, err
        assert "in octo/newcomer: Prefer early returns." in out
        assert fakes.call(lambda: github.token_requests[-1]) == {
            "permissions": {"metadata": "read"},
            "repositories": ["newcomer"],
        }
        learnings = asyncio.run(_learnings_of(db, str(repo.id)))
        assert [x.text for x in learnings] == ["Prefer early returns."]
        code, out, _ = run(capsys, "learnings", "list", "--repo", "octo/newcomer")
        assert code == 0 and "Prefer early returns." in out
        code, _, err = run(capsys, "learnings", "add", "--repo", "octo/elsewhere", "Anything.")
        assert code == 1 and "the App is not installed on octo/elsewhere" in err
        # The fake's repository is GitHub's full-repository schema, and what the app asked of it is held to it.
        problems, seen = disagreements(fakes.call(lambda: list(github.requests)))
        assert problems == [] and ("GET", "/repos/{owner}/{repo}") in seen


async def _learnings_of(path: Path, repo_id: str) -> list:
    store = SqliteStore(str(path))
    await store.open()
    try:
        return await store.list_learnings(repo_id)
    finally:
        await store.close()
