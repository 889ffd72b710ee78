"""`reviewer-app backup DEST`: a consistent copy of the SQLite job database while the service runs, by SQLite's
online backup API, checked before it is kept. It needs no `sqlite3` program (the Docker image has none). The copy is readable by its owner only (0600), like the database."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

from reviewer_app.settings.config import Config


class BackupError(Exception):
    """The backup cannot be made; one line for the operator."""


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmd = sub.add_parser(
        "backup",
        help="copy the SQLite job database to a file while the service runs (PostgreSQL: use pg_dump)",
        description="Copy the job database named by DATABASE_URL to DEST with SQLite's online backup (a consistent "
        "snapshot; the service keeps running and writing), check the copy's integrity, and only then give it its "
        "name. DEST must not exist yet.",
    )
    cmd.add_argument("dest", metavar="DEST", help="the backup file to write, e.g. /data/backups/reviewer-2026-12-04.db")
    cmd.add_argument("--json", action="store_true", help="print JSON for scripts")


def backup_sqlite(source: str, dest: str) -> dict[str, Any]:
    """Copy ``source`` to ``dest`` (which must not exist): written next to it under a temporary name, checked with
    ``PRAGMA integrity_check``, then renamed, so ``dest`` is a whole, checked database or absent."""
    src_path, dest_path = Path(source), Path(dest)
    if not src_path.is_file():
        raise BackupError(f"no database at {source!r}: check DATABASE_URL")
    if dest_path.exists():
        raise BackupError(f"{dest!r} exists already: name a new file")
    if not dest_path.parent.is_dir():
        raise BackupError(f"the directory {str(dest_path.parent)!r} does not exist: create it first")
    partial = dest_path.with_name(dest_path.name + ".partial")
    partial.unlink(missing_ok=True)
    try:
        # The copy holds what the database holds (review text, learnings, lease tokens): it is created 0600, owner
        # only, whatever the umask says, before SQLite writes a byte into it (SQLite keeps an existing file's mode).
        os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.chmod(partial, 0o600)
        # mode=rw: never create a database where none was; the backup reads under a shared lock, and in WAL mode
        # the service's writers go on meanwhile.
        with contextlib.closing(sqlite3.connect(f"file:{src_path}?mode=rw", uri=True, timeout=30)) as src:
            with contextlib.closing(sqlite3.connect(partial)) as out:
                src.backup(out)
                out.execute("PRAGMA journal_mode=DELETE")  # one self-contained file; the app turns WAL on again
                check = out.execute("PRAGMA integrity_check").fetchone()[0]
                jobs = out.execute("SELECT count(*) FROM jobs").fetchone()[0]
        if check != "ok":
            raise BackupError(f"the copy failed its integrity check ({check}); the source may be damaged")
        os.replace(partial, dest_path)
    except sqlite3.Error as exc:
        raise BackupError(f"cannot back up {source!r} to {dest!r}: {exc}") from None
    except OSError as exc:
        raise BackupError(f"cannot write {dest!r}: {exc.strerror}") from None
    finally:
        partial.unlink(missing_ok=True)
    return {
        "source": source,
        "backup": str(dest_path),
        "bytes": dest_path.stat().st_size,
        "jobs": jobs,
        "integrity": check,
    }


def run(cfg: Config, args: argparse.Namespace) -> int:
    """0 when the backup is written and checked; 1 with one line on stderr when not; 2 for a database it cannot copy
    (PostgreSQL: a usage error)."""
    path = cfg.sqlite_path
    if path is None:
        print(
            "reviewer-app: backup copies a SQLite database; for PostgreSQL use pg_dump (see docs/postgres.md)",
            file=sys.stderr,
        )
        return 2
    try:
        result = backup_sqlite(path, args.dest)
    except BackupError as exc:
        print(f"reviewer-app: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"backed up {result['source']} to {result['backup']}: {result['jobs']} jobs, {result['bytes']:,} bytes, "
            f"integrity check {result['integrity']}"
        )
    return 0
