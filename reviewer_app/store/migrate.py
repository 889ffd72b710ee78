"""`reviewer-app migrate-store`: move a stopped SQLite deployment's backlog into PostgreSQL, in one transaction."""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiosqlite
import asyncpg

from reviewer_app.core.states import JobState
from reviewer_app.redaction import redact_url
from reviewer_app.settings.config import sqlite_path
from reviewer_app.store.base import StoreUnavailable
from reviewer_app.store.postgres import NOTIFY_WAKEUP, PostgresStore

# By default the backlog moves: what still has to run, and what an operator may still retry.
PENDING_STATES = (JobState.QUEUED, JobState.RUNNING, JobState.FAILED, JobState.CANCELLED)
MOVED_WHILE_RUNNING = "lease dropped when the jobs moved to PostgreSQL (the SQLite deployment was stopped)"


class WrongURL(ValueError):
    """--from or --to is not the kind of database URL it must be: a usage error (exit 2)."""


class MigrationError(Exception):
    """The copy cannot start or did not commit; the message says what to do. Nothing was written."""


@dataclass
class MigrationReport:
    jobs_by_state: dict[str, int] = field(default_factory=dict)
    handed_back: int = 0  # running on SQLite, queued (or failed, when no attempt is left) on PostgreSQL
    rows: dict[str, int] = field(default_factory=dict)  # per table, jobs included

    def summary(self) -> str:
        states = ", ".join(f"{n} {s}" for s, n in sorted(self.jobs_by_state.items())) or "none"
        others = ", ".join(f"{n} {t}" for t, n in self.rows.items() if t != "jobs")
        back = f"; {self.handed_back} running job(s) handed back to the queue" if self.handed_back else ""
        return f"copied {self.rows.get('jobs', 0)} job(s) ({states}); {others}{back}"


async def migrate_store(
    source: str,
    target: str,
    *,
    include_all: bool = False,
    schema: str | None = None,
    force: bool = False,
    now: float | None = None,
) -> MigrationReport:
    """Copy jobs (pending, failed and cancelled; every job with ``include_all``), their attempts and batch requests,
    deliveries, settings, installations, unsent outbox effects, findings (with their fates), review runs, learnings and finding feedback from a SQLite file into an empty
    PostgreSQL store, in one PostgreSQL transaction. The SQLite file is only read."""
    now = time.time() if now is None else now
    path = _source_path(source, target)
    store = PostgresStore(target, min_size=1, max_size=1, schema=schema)
    try:
        await store.open()  # creates the schema's tables (migrations), so the copy has somewhere to go
    except StoreUnavailable as exc:
        raise MigrationError(str(exc)) from exc
    finally:
        await store.close()
    async with aiosqlite.connect(f"file:{path}?mode=ro", uri=True) as src:
        src.row_factory = sqlite3.Row
        settings = {"search_path": f'"{schema}"'} if schema else None
        try:
            dst = await asyncpg.connect(target, server_settings=settings)
        except (OSError, asyncpg.PostgresError) as exc:
            raise MigrationError(f"cannot connect to {redact_url(target)}: {exc}") from exc
        try:
            async with dst.transaction():
                return await _copy(src, dst, include_all=include_all, force=force, now=now)
        finally:
            await dst.close()


def _source_path(source: str, target: str) -> str:
    path = sqlite_path(source)
    if path is None:
        raise WrongURL(f"--from {source!r} is not a SQLite URL: use sqlite:///path/to/reviewer.db")
    if not Path(path).is_file():
        raise MigrationError(f"--from names no file: {path!r} does not exist")
    if not target.startswith(("postgresql://", "postgres://")):
        raise WrongURL(f"--to {redact_url(target)!r} is not a PostgreSQL URL: use postgresql://user@host/db")
    return path


async def _copy(
    src: aiosqlite.Connection, dst: asyncpg.Connection, *, include_all: bool, force: bool, now: float
) -> MigrationReport:
    # Hosts already started on PostgreSQL must not write while the backlog arrives (nor take ids it brings).
    await dst.execute("LOCK TABLE jobs, attempts, deliveries, settings IN EXCLUSIVE MODE")
    existing = await dst.fetchval("SELECT COUNT(*) FROM jobs")
    if existing:
        raise MigrationError(f"the PostgreSQL database already holds {existing} job(s): migrate into an empty one")
    if not force:
        live = await _fetch(src, "SELECT id FROM jobs WHERE state = 'running' AND lease_expires_at > ?", (now,))
        if live:
            raise MigrationError(
                f"job {live[0]['id']} holds a live lease: stop every reviewer-app process on the SQLite database "
                "first (or pass --force when they are gone and only their leases remain)"
            )
    report = MigrationReport()
    where = "" if include_all else f" WHERE state IN ({', '.join(repr(s.value) for s in PENDING_STATES)})"
    jobs = [dict(r) for r in await _fetch(src, f"SELECT * FROM jobs{where} ORDER BY id")]
    ids = {j["id"] for j in jobs}
    handed_back = {j["id"] for j in jobs if j["state"] == JobState.RUNNING.value}
    for j in jobs:
        if j["id"] in handed_back:
            _hand_back(j, now)
    superseders = {j["id"]: j.pop("superseded_by") for j in jobs}
    for j in jobs:
        report.jobs_by_state[j["state"]] = report.jobs_by_state.get(j["state"], 0) + 1
    report.handed_back = len(handed_back)
    report.rows["jobs"] = await _insert(dst, "jobs", jobs)
    # A superseded job names a newer one, inserted after it: link them once both exist.
    links = [(by, job_id) for job_id, by in superseders.items() if by is not None and by in ids]
    if links:
        await dst.executemany("UPDATE jobs SET superseded_by = $1 WHERE id = $2", links)
    attempts = []
    for a in map(dict, await _fetch(src, "SELECT * FROM attempts ORDER BY id")):
        if a["job_id"] in ids:
            if a["job_id"] in handed_back and a["finished_at"] is None:
                a.update(finished_at=now, outcome="lease_expired", error=MOVED_WHILE_RUNNING)
            attempts.append(a)
    report.rows["attempts"] = await _insert(dst, "attempts", attempts)
    # A job waiting on a Message Batch keeps its request: the batch runs on, and PostgreSQL's duty collects it.
    batched = [r for r in await _table(src, "batch_requests") if r["job_id"] in ids]
    report.rows["batch requests"] = await _insert(dst, "batch_requests", batched)
    report.rows["deliveries"] = await _insert(dst, "deliveries", await _table(src, "deliveries"))
    report.rows["settings"] = await _insert(dst, "settings", await _table(src, "settings"))
    report.rows["installations"] = await _insert(dst, "installations", await _table(src, "installations"))
    unsent = "" if include_all else " WHERE sent_at IS NULL"
    report.rows["outbox effects"] = await _insert(dst, "outbox", await _table(src, "outbox", unsent))
    report.rows["findings"] = await _insert(dst, "findings", await _table(src, "findings"))  # memory: every PR's
    # The record of each published review, with the findings' fates the outcomes page reads (migration 0018).
    report.rows["review runs"] = await _insert(dst, "review_runs", await _table(src, "review_runs"))
    # What the teams taught the app, and their feedback on its findings: every repository's, like the memory.
    report.rows["learnings"] = await _insert(dst, "learnings", await _table(src, "learnings"))
    report.rows["finding feedback"] = await _insert(dst, "finding_feedback", await _table(src, "finding_feedback"))
    for table in ("jobs", "attempts", "outbox", "findings", "learnings", "finding_feedback"):
        await _advance_sequence(src, dst, table)
    await dst.execute(NOTIFY_WAKEUP)  # hosts already listening start on the backlog at once
    return report


async def _advance_sequence(src: aiosqlite.Connection, dst: asyncpg.Connection, table: str) -> None:
    """Start ``table``'s id sequence past every id the SQLite file used, copied or not, and never below where the
    target's sequence already is: job ids name reviews (markers) and check runs (``external_id``), effect ids name
    help replies, and none may ever repeat.

    Since migration 0006 the jobs table is AUTOINCREMENT: ``sqlite_sequence`` remembers the highest id it ever
    handed out, pruned rows included. Other tables (and files from before 0006) give a new row ``MAX(id) + 1``.
    """
    used = (await _fetch(src, f"SELECT COALESCE(MAX(id), 0) FROM {table}"))[0][0] if await _known(src, table) else 0
    if await _known(src, "sqlite_sequence"):
        remembered = await _fetch(src, "SELECT seq FROM sqlite_sequence WHERE name = ?", (table,))
        used = max([int(used), *(int(r[0]) for r in remembered)])
    sequence = await dst.fetchval("SELECT pg_get_serial_sequence($1, 'id')", table)
    # The value nextval() would return now; `is_called` is false only on a sequence never used (or set so).
    current = await dst.fetchval(f"SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM {sequence}")
    copied = await dst.fetchval(f"SELECT COALESCE(MAX(id), 0) FROM {table}")
    await dst.execute("SELECT setval($1::regclass, $2, false)", sequence, max(int(used) + 1, copied + 1, current))


def _hand_back(job: dict[str, Any], now: float) -> None:
    """A job running on the stopped SQLite deployment, as the rescuer would leave it."""
    if job["attempts"] >= job["max_attempts"]:
        job.update(state=JobState.FAILED.value, outcome=f"failed: {MOVED_WHILE_RUNNING}", finished_at=now)
    else:
        job.update(state=JobState.QUEUED.value, next_attempt_at=now)
    job.update(last_error=MOVED_WHILE_RUNNING, lease_token=None, lease_expires_at=None, updated_at=now)


async def _fetch(src: aiosqlite.Connection, query: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
    return list(await src.execute_fetchall(query, params))


async def _table(src: aiosqlite.Connection, table: str, where: str = "") -> list[dict[str, Any]]:
    """Every row of ``table`` (none when this SQLite file predates the table)."""
    return [dict(r) for r in await _fetch(src, f"SELECT * FROM {table}{where}")] if await _known(src, table) else []


async def _known(src: aiosqlite.Connection, table: str) -> bool:
    """Whether this SQLite file has ``table`` (an older file may predate it)."""
    return bool(await _fetch(src, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)))


async def _insert(dst: asyncpg.Connection, table: str, rows: list[dict[str, Any]]) -> int:
    """Copy ``rows`` into ``table`` (the columns both sides know and the target does not generate, each in its
    PostgreSQL type); a row whose key the
    target already holds (a delivery, a setting) keeps the target's version. The number of rows inserted."""
    if not rows:
        return 0
    # A generated column (jobs.queue, migration 0016) is the target's to compute: never copied.
    types = {
        r["column_name"]: r["data_type"]
        for r in await dst.fetch(
            "SELECT column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = $1 AND is_generated = 'NEVER'",
            table,
        )
    }
    columns = [c for c in rows[0] if c in types]
    names = ", ".join(columns)
    staging = f"migrate_{table}"
    # COPY is fast but cannot skip conflicts: stage the rows, then insert what the target does not have yet.
    await dst.execute(f"CREATE TEMP TABLE {staging} ON COMMIT DROP AS SELECT {names} FROM {table} WITH NO DATA")
    records = [tuple(_as(types[c], row[c]) for c in columns) for row in rows]
    await dst.copy_records_to_table(staging, records=records, columns=columns)
    status = await dst.execute(
        f"INSERT INTO {table} ({names}) SELECT {names} FROM {staging} ORDER BY 1 ON CONFLICT DO NOTHING"
    )
    return int(status.rsplit(" ", 1)[-1])


def _as(pg_type: str, value: Any) -> Any:
    if value is None:
        return None
    if pg_type in ("bigint", "integer", "smallint"):
        return int(value)
    if pg_type in ("double precision", "real"):
        return float(value)
    if pg_type == "text":
        return str(value)
    return value


# -- the command ---------------------------------------------------------------------------------------


def add_command(sub: Any) -> None:
    """Register `migrate-store` on the CLI's subparsers."""
    cmd = sub.add_parser(
        "migrate-store",
        help="copy a SQLite deployment's jobs and deliveries into PostgreSQL",
        description="Copy queued, running (handed back), failed and cancelled jobs, their attempts, deliveries, "
        "settings, installations, unsent outbox effects, findings and learnings from SQLite into an empty PostgreSQL database, in one "
        "transaction. Stop the SQLite deployment first; the SQLite file is only read.",
    )
    cmd.add_argument("--from", dest="source", required=True, metavar="sqlite:///PATH", help="the SQLite database")
    cmd.add_argument("--to", dest="target", required=True, metavar="postgresql://...", help="the PostgreSQL database")
    cmd.add_argument(
        "--all",
        dest="include_all",
        action="store_true",
        help="copy every job (succeeded and superseded too) and every outbox effect",
    )
    cmd.add_argument("--schema", help="PostgreSQL schema to use (created if missing; default: the search_path)")
    cmd.add_argument("--force", action="store_true", help="copy even though a running job's lease has not expired")


def main(args: argparse.Namespace) -> int:
    """Run `migrate-store`; 0 on success, 1 with a one-line message when nothing was copied, 2 for a URL of the wrong
    kind (a usage error)."""
    try:
        report = asyncio.run(
            migrate_store(args.source, args.target, include_all=args.include_all, schema=args.schema, force=args.force)
        )
    except WrongURL as exc:
        print(f"reviewer-app migrate-store: {exc}", file=sys.stderr)
        return 2
    except (MigrationError, ValueError) as exc:
        print(f"reviewer-app migrate-store: {exc}", file=sys.stderr)
        return 1
    except (OSError, sqlite3.Error, asyncpg.PostgresError) as exc:
        print(f"reviewer-app migrate-store: nothing was copied: {exc}", file=sys.stderr)
        return 1
    print(f"{report.summary()}; into {redact_url(args.target)}")
    print("next: point every host's DATABASE_URL at PostgreSQL and start them")
    return 0
