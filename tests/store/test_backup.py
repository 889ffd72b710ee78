"""`reviewer-app backup`: a checked copy of the SQLite database while the service writes, with no sqlite3 program."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from reviewer_app.cli.main import main
from reviewer_app.core.admission import Enqueue, JobSpec
from reviewer_app.store.base import Delivery
from reviewer_app.store.sqlite import SqliteStore
from tests.helpers import sha

# main() installs its own log handler: the test runner's is put back after each test (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("keep_logging")


async def _fill(path: Path, jobs: int) -> None:
    store = SqliteStore(str(path))
    await store.open()
    try:
        for n in range(1, jobs + 1):
            spec = JobSpec(repo_id=1, repo_full_name="o/r", installation_id=7, pr_number=n, head_sha=sha(n))
            await store.admit(Delivery(f"d{n}", "pull_request", "opened"), Enqueue(spec), now=1000.0, max_attempts=5)
    finally:
        await store.close()


@pytest.fixture
def db(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "reviewer.db"
    asyncio.run(_fill(path, 3))
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{path}")
    monkeypatch.setenv("REVIEWER_ENV_FILE", str(tmp_path / ".env"))
    for name in ("GITHUB_WEBHOOK_SECRET", "GITHUB_APP_ID", "GITHUB_PRIVATE_KEY", "GITHUB_PRIVATE_KEY_PATH"):
        monkeypatch.delenv(name, raising=False)
    return path


def test_a_backup_taken_while_a_write_is_open_holds_what_was_committed(db: Path, tmp_path: Path, capsys) -> None:
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # the service in the middle of a write transaction
    writer.execute("UPDATE jobs SET priority = 99")
    dest = tmp_path / "backups" / "reviewer-1.db"
    dest.parent.mkdir()
    try:
        code = main(["backup", str(dest)])
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    out = capsys.readouterr().out
    assert code == 0 and f"to {dest}: 3 jobs" in out and "integrity check ok" in out
    with sqlite3.connect(dest) as copy:
        assert copy.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        count, top = copy.execute("SELECT count(*), max(priority) FROM jobs").fetchone()
        assert count == 3 and top != 99  # what was committed, not the write still open
    assert sorted(p.name for p in dest.parent.iterdir()) == ["reviewer-1.db"]  # no partial file left


def test_a_backup_never_overwrites_and_never_creates_a_database(db: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    existing = tmp_path / "kept.db"
    existing.write_bytes(b"an older backup")
    assert main(["backup", str(existing)]) == 1
    assert "exists already" in capsys.readouterr().err and existing.read_bytes() == b"an older backup"
    assert main(["backup", str(tmp_path / "no" / "dir" / "x.db")]) == 1
    err = capsys.readouterr().err
    assert "the directory" in err and "does not exist: create it first" in err
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path}/nothing.db")
    assert main(["backup", str(tmp_path / "x.db")]) == 1
    assert "no database at" in capsys.readouterr().err and not (tmp_path / "nothing.db").exists()
    monkeypatch.setenv("DATABASE_URL", "postgresql://app@db.example/reviews")
    assert main(["backup", str(tmp_path / "x.db")]) == 2  # the wrong command for this database: a usage error
    assert "use pg_dump" in capsys.readouterr().err


def test_the_backup_command_runs_as_the_image_runs_it(db: Path, tmp_path: Path) -> None:
    """As `docker exec` runs it: the real command, no webhook secret, the database named by DATABASE_URL."""
    result = subprocess.run(
        [sys.executable, "-m", "reviewer_app.cli.main", "backup", "--json", str(tmp_path / "copy.db")],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "DATABASE_URL": f"sqlite:///{db}", "REVIEWER_ENV_FILE": str(tmp_path / ".e")},
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert '"jobs": 3' in result.stdout and '"integrity": "ok"' in result.stdout


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_the_backup_is_readable_by_its_owner_only_whatever_the_umask(db: Path, tmp_path: Path, umask: int) -> None:
    dest = tmp_path / f"copy-{umask:o}.db"
    before = os.umask(umask)
    try:
        assert main(["backup", str(dest)]) == 0
    finally:
        os.umask(before)
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
