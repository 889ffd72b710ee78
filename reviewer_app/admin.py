"""Admin commands over the job database: status, jobs list/show/retry/cancel, queue pause/resume."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from reviewer_app.config import Config
from reviewer_app.core.pricing import DEFAULT_PRICES, Price, cost
from reviewer_app.core.states import JobEvent, JobState, sources_of
from reviewer_app.store.base import Attempt, Job, Store, StoreUnavailable, WorkerStatus
from reviewer_app.store.factory import make_store

COMMANDS = ("status", "jobs", "queue", "usage")
PENDING_SCAN = 1000  # pending jobs read to name expired claims and unreconciled publications
FAILED_SHOWN = 10


class AdminError(Exception):
    """Not found, or not allowed in the job's state: one line for the operator, exit code 1."""


# -- the commands, as data ------------------------------------------------------------------------------------


def github_web_url(api_url: str) -> str:
    """https://github.com for the public API; https://HOST for GitHub Enterprise Server's https://HOST/api/v3."""
    parts = urlsplit(api_url)
    if parts.hostname == "api.github.com":
        return "https://github.com"
    path = parts.path.rstrip("/")
    if path.endswith("/api/v3"):
        path = path[: -len("/api/v3")]
    return f"{parts.scheme}://{parts.netloc}{path}"


@dataclass
class Admin:
    store: Store
    clock: Callable[[], float] = time.time
    web_url: str = "https://github.com"

    def links(self, job: Job) -> dict[str, str]:
        pull = f"{self.web_url}/{job.repo_full_name}/pull/{job.pr_number}"
        out = {"pull_request": pull}
        if job.check_run_id is not None:
            out["check_run"] = f"{self.web_url}/{job.repo_full_name}/runs/{job.check_run_id}"
        if job.review_id is not None:
            out["review"] = f"{pull}#pullrequestreview-{job.review_id}"
        answer = job.details.answer_url  # an answer in a thread (review/answer.py)
        if isinstance(answer, str) and answer.startswith(f"{self.web_url}/"):
            out["answer"] = answer
        return out

    def job_summary(self, job: Job) -> dict[str, Any]:
        return {
            "id": job.id,
            "state": job.state.value,
            "repo": job.repo_full_name,
            "pr": job.pr_number,
            "head_sha": job.head_sha,
            "trigger": job.trigger,
            "priority": job.priority,
            "attempts": job.attempts,
            "max_attempts": job.max_attempts,
            "created_at": job.created_at,
            "started_at": job.started_at,
            "finished_at": job.finished_at,
            "next_attempt_at": job.next_attempt_at,
            "lease_owner": job.lease_owner,
            "lease_expires_at": job.lease_expires_at,
            "last_error": job.last_error,
            "outcome": job.outcome,
            "superseded_by": job.superseded_by,
            "check_run_id": job.check_run_id,
            "review_id": job.review_id,
            "publish_intent_at": job.publish_intent_at,
            "delivery_id": job.details.delivery_id,
            "links": self.links(job),
        }

    async def status(self) -> dict[str, Any]:
        now = self.clock()
        stats = await self.store.stats(now=now)
        pending = await self.store.list_jobs(states=(JobState.QUEUED.value, JobState.RUNNING.value), limit=PENDING_SCAN)
        failed = await self.store.list_jobs(states=(JobState.FAILED.value,), limit=FAILED_SHOWN)
        oldest_at = stats.oldest_pending_created_at
        oldest = [j for j in pending if oldest_at is not None and j.created_at == oldest_at]
        expired = [j for j in pending if j.state == JobState.RUNNING and (j.lease_expires_at or now) < now]
        unreconciled = [j for j in pending if j.publish_intent_at is not None and j.review_id is None]
        return {
            "now": now,
            "paused": await self.store.get_setting("queue_paused") == "1",
            "jobs_by_state": {s.value: stats.by_state.get(s.value, 0) for s in JobState},
            "oldest_pending": None
            if oldest_at is None
            else {
                "age_seconds": max(0.0, now - oldest_at),
                "created_at": oldest_at,
                "job": self.job_summary(oldest[0]) if oldest else None,
            },
            "expired_claims": {"count": stats.expired_leases, "jobs": [self.job_summary(j) for j in expired]},
            "exhausted_retries": {
                "count": stats.by_state.get(JobState.FAILED.value, 0),
                "newest": [self.job_summary(j) for j in failed],
            },
            "awaiting_reconciliation": {
                "count": stats.awaiting_reconciliation,
                "jobs": [self.job_summary(j) for j in unreconciled],
            },
            "workers": [worker_summary(w) for w in await self.store.workers(now=now)],
        }

    async def list_jobs(
        self, *, states: Sequence[str] = (), repo: str | None = None, pr: int | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        jobs = await self.store.list_jobs(states=states, repo=repo, pr_number=pr, limit=limit)
        return [self.job_summary(j) for j in jobs]

    async def _job(self, job_id: int) -> Job:
        job = await self.store.get_job(job_id)
        if job is None:
            raise AdminError(f"no job {job_id}")
        return job

    async def show(self, job_id: int) -> dict[str, Any]:
        job = await self._job(job_id)
        attempts = await self.store.attempts_of(job_id)
        return {
            **self.job_summary(job),
            "details": job.details.to_dict(),
            "attempt_history": [_attempt(a) for a in attempts],
        }

    async def retry(self, job_id: int) -> dict[str, Any]:
        job = await self._job(job_id)
        allowed = sources_of(JobEvent.RETRY_BY_OPERATOR)
        if job.state not in allowed or not await self.store.retry_job(job_id, now=self.clock()):
            state = (await self._job(job_id)).state
            raise AdminError(f"job {job_id} is {state.value}: only {_either(allowed)} jobs can be retried")
        return self.job_summary(await self._job(job_id))

    async def cancel(self, job_id: int, *, reason: str) -> dict[str, Any]:
        job = await self._job(job_id)
        allowed = sources_of(JobEvent.CANCEL)
        if job.state not in allowed or not await self.store.cancel_job(job_id, now=self.clock(), reason=reason):
            state = (await self._job(job_id)).state
            raise AdminError(f"job {job_id} is {state.value}: only {_either(allowed)} jobs can be cancelled")
        return {**self.job_summary(await self._job(job_id)), "previous_state": job.state.value}

    async def set_paused(self, paused: bool) -> dict[str, Any]:
        await self.store.set_setting("queue_paused", "1" if paused else "0")
        return {"paused": paused}


def _attempt(a: Attempt) -> dict[str, Any]:
    return {
        "attempt": a.attempt,
        "lease_owner": a.lease_owner,
        "started_at": a.started_at,
        "finished_at": a.finished_at,
        "outcome": a.outcome,
        "error": a.error,
        "model": a.model,
        "tokens": {
            "input": a.input_tokens,
            "output": a.output_tokens,
            "cache_creation": a.cache_creation_tokens,
            "cache_read": a.cache_read_tokens,
        },
    }


def worker_summary(w: WorkerStatus) -> dict[str, Any]:
    """A registered process for `status --json` and the dashboard: alive, or gone with the jobs it held."""
    i = w.info
    return {
        "id": i.id,
        "host": i.host,
        "pid": i.pid,
        "role": i.role,
        "version": i.version,
        "slots": i.slots,
        "jobs_running": i.jobs_running,
        "started_at": i.started_at,
        "heartbeat_at": i.heartbeat_at,
        "gone": w.gone,
        "held_jobs": [
            {"id": h.job_id, "repo": h.repo, "pr": h.pr_number, "rescued_at": h.lease_expires_at} for h in w.held
        ],
        "rescued_at": w.rescued_at,
    }


def _either(states: frozenset[JobState]) -> str:
    return " or ".join(sorted(s.value for s in states))


# -- text output ----------------------------------------------------------------------------------------------


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"


def _ago(ts: float | None, now: float) -> str:
    if ts is None:
        return "-"
    return f"{duration(now - ts)} ago" if ts <= now else f"in {duration(ts - now)}"


def _one_line(text: str | None, width: int = 80) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _job_line(j: dict[str, Any]) -> str:
    return f"  job {j['id']}  {j['repo']}#{j['pr']}  {j['head_sha'][:10]}  attempt {j['attempts']}/{j['max_attempts']}"


def render_status(s: dict[str, Any]) -> str:
    now = s["now"]
    counts = ", ".join(f"{k} {v}" for k, v in s["jobs_by_state"].items())
    lines = [
        "queue:  PAUSED (no new claims; `reviewer-app queue resume` to resume)" if s["paused"] else "queue:  running",
        f"jobs:   {counts}",
    ]
    oldest = s["oldest_pending"]
    if oldest is None:
        lines.append("oldest pending job: none pending")
    else:
        who = f" (job {oldest['job']['id']}, {oldest['job']['state']})" if oldest["job"] else ""
        lines.append(f"oldest pending job: {duration(oldest['age_seconds'])} old{who}")
    expired = s["expired_claims"]
    lines.append(f"expired claims: {expired['count'] or 'none'}")
    for j in expired["jobs"]:
        lines.append(f"{_job_line(j)}  held by {j['lease_owner']}, expired {_ago(j['lease_expires_at'], now)}")
    failed = s["exhausted_retries"]
    shown = f" (newest {len(failed['newest'])} shown)" if failed["count"] > len(failed["newest"]) else ""
    lines.append(f"exhausted retries (failed): {failed['count'] or 'none'}{shown}")
    for j in failed["newest"]:
        lines.append(f"{_job_line(j)}  {_ago(j['finished_at'], now)}: {_one_line(j['last_error'], 60)}")
    waiting = s["awaiting_reconciliation"]
    lines.append(f"publications awaiting reconciliation: {waiting['count'] or 'none'}")
    for j in waiting["jobs"]:
        lines.append(f"{_job_line(j)}  intent {_ago(j['publish_intent_at'], now)}, no review id yet")
    workers = s["workers"]
    gone = sum(1 for w in workers if w["gone"])
    lines.append(f"processes: {len(workers) - gone} alive, {gone} gone" if workers else "processes: none registered")
    for w in workers:
        what = "GONE" if w["gone"] else "alive"
        lines.append(
            f"  {w['role']:<17} {w['host']} pid {w['pid']}  {what}, heartbeat {_ago(w['heartbeat_at'], now)}"
            f"  {w['jobs_running']}/{w['slots']} slot(s)  v{w['version']}  up since {_when(w['started_at'])}"
        )
        for h in w["held_jobs"]:
            lines.append(f"    job {h['id']}  {h['repo']}#{h['pr']}  rescued {_ago(h['rescued_at'], now)}")
    return "\n".join(lines)


def render_list(jobs: list[dict[str, Any]], now: float) -> str:
    if not jobs:
        return "no jobs"
    rows = [("ID", "STATE", "PULL REQUEST", "HEAD", "ATT", "CREATED", "OUTCOME / LAST ERROR")]
    for j in jobs:
        rows.append(
            (
                str(j["id"]),
                j["state"],
                f"{j['repo']}#{j['pr']}",
                j["head_sha"][:10],
                f"{j['attempts']}/{j['max_attempts']}",
                _ago(j["created_at"], now),
                _one_line(j["outcome"] or j["last_error"], 60),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        ("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1]).rstrip() for r in rows
    )


def render_job(j: dict[str, Any], now: float) -> str:
    links = j["links"]
    lease = "-"
    if j["state"] == JobState.RUNNING.value and j["lease_expires_at"] is not None:
        expires = j["lease_expires_at"]
        lease = f"held by {j['lease_owner']}, " + (
            f"expired {_ago(expires, now)}" if expires < now else f"expires {_ago(expires, now)}"
        )
    elif j["lease_owner"]:
        lease = f"last held by {j['lease_owner']}"
    fields = [
        ("pull request", f"{j['repo']}#{j['pr']}  {links['pull_request']}"),
        ("head", j["head_sha"]),
        ("trigger", f"{j['trigger']} (priority {j['priority']})"),
        ("delivery", j["delivery_id"] or "-"),
        ("attempts", f"{j['attempts']} of {j['max_attempts']}"),
        ("created", f"{_when(j['created_at'])} ({_ago(j['created_at'], now)})"),
        ("started", _when(j["started_at"])),
        ("finished", _when(j["finished_at"])),
        ("next attempt", _when(j["next_attempt_at"]) if j["state"] == JobState.QUEUED.value else "-"),
        ("lease", lease),
        ("outcome", j["outcome"] or "-"),
        ("last error", j["last_error"] or "-"),
        ("superseded by", f"job {j['superseded_by']}" if j["superseded_by"] else "-"),
        ("check run", f"{j['check_run_id']}  {links['check_run']}" if "check_run" in links else "-"),
        ("review", f"{j['review_id']}  {links['review']}" if "review" in links else "-"),
        ("publish intent", _when(j["publish_intent_at"])),
    ]
    lines = [f"job {j['id']}  {j['state']}"] + [f"  {k:<15}{v}" for k, v in fields]
    lines.append("attempts:" if j["attempt_history"] else "attempts: none yet")
    for a in j["attempt_history"]:
        took = f" ({duration(a['finished_at'] - a['started_at'])})" if a["finished_at"] is not None else " (running)"
        lines.append(
            f"  #{a['attempt']}  {_when(a['started_at'])}{took}  {a['outcome'] or 'running'}  "
            f"lease holder {a['lease_owner']}"
        )
        if a["error"]:
            lines.append(f"      error: {_one_line(a['error'], 200)}")
        t = a["tokens"]
        if any(t.values()) or a["model"]:
            lines.append(
                f"      tokens: input {t['input']}, output {t['output']}, cache write {t['cache_creation']}, "
                f"cache read {t['cache_read']} ({a['model'] or 'model unknown'})"
            )
    return "\n".join(lines)


# -- the command line -----------------------------------------------------------------------------------------


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `status`, `jobs ...` and `queue ...` on the reviewer-app parser."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON for scripts")
    sub.add_parser("status", parents=[common], help="the queue on one screen: backlog age, expired claims, failures")
    jobs = sub.add_parser("jobs", help="list, show, retry or cancel jobs").add_subparsers(
        dest="jobs_command", required=True
    )
    ls = jobs.add_parser("list", parents=[common], help="jobs, newest first")
    ls.add_argument("--state", action="append", choices=[s.value for s in JobState], help="repeatable")
    ls.add_argument("--repo", help="owner/name")
    ls.add_argument("--pr", type=int, help="pull request number")
    ls.add_argument("--limit", type=int, default=50)
    for name, what in (
        ("show", "one job with every attempt"),
        ("retry", "give a failed or cancelled job fresh attempts"),
        ("cancel", "cancel a queued or running job"),
    ):
        p = jobs.add_parser(name, parents=[common], help=what)
        p.add_argument("job_id", type=int, metavar="ID")
        if name == "cancel":
            p.add_argument("--reason", default="cancelled by an operator")
    queue = sub.add_parser("queue", help="pause or resume claims").add_subparsers(dest="queue_command", required=True)
    queue.add_parser("pause", parents=[common], help="stop claiming new jobs (running ones finish)")
    queue.add_parser("resume", parents=[common], help="claim again")
    usage = sub.add_parser(
        "usage",
        parents=[common],
        help="model tokens per repository, kind (reviews, answers) and model, interactive and batched, and what they cost",
    )
    usage.add_argument("--days", type=float, default=7.0, help="look back this many days (default 7)")


def usage_report(rows: list[dict[str, Any]], prices: Mapping[str, Price]) -> dict[str, Any]:
    """The store's usage rows with what they cost and saved (US dollars, from ``prices``; None where the model has no
    price), and the totals: interactive and batched tokens apart, and what batching saved."""
    priced: list[dict[str, Any]] = []
    for r in rows:
        c = cost(
            prices,
            r["model"],
            input_tokens=r["input_tokens"],
            output_tokens=r["output_tokens"],
            cache_creation_tokens=r["cache_creation_tokens"],
            cache_read_tokens=r["cache_read_tokens"],
            batched=r["batched"],
        )
        priced.append({**r, "cost_usd": c.dollars, "saved_usd": c.saved})
    totals: dict[str, Any] = {}
    for way, batched in (("interactive", False), ("batched", True)):
        mine = [r for r in priced if r["batched"] is batched]
        totals[f"{way}_tokens"] = sum(
            r["input_tokens"] + r["output_tokens"] + r["cache_creation_tokens"] + r["cache_read_tokens"] for r in mine
        )
        totals[f"{way}_usd"] = sum(r["cost_usd"] or 0.0 for r in mine)
    totals["saved_usd"] = sum(r["saved_usd"] or 0.0 for r in priced)
    totals["unpriced_models"] = sorted({r["model"] or "unknown" for r in priced if r["cost_usd"] is None})
    return {"rows": priced, "totals": totals}


def render_usage(rows: list[dict[str, Any]], days: float, prices: Mapping[str, Price] = DEFAULT_PRICES) -> str:
    if not rows:
        return f"no model usage in the last {days:g} days"
    report = usage_report(rows, prices)
    head = f"model tokens in the last {days:g} days (interactive: attempts that called the model; batched: Message Batches):"
    cols = (
        "repository",
        "kind",
        "model",
        "way",
        "jobs",
        "input",
        "output",
        "cache write",
        "cache read",
        "cost",
        "saved",
    )
    table = [cols]
    for r in report["rows"]:
        table.append(
            (
                r["repo"],
                r["kind"],
                r["model"] or "unknown",
                "batched" if r["batched"] else "interactive",
                str(r["jobs"]),
                str(r["input_tokens"]),
                str(r["output_tokens"]),
                str(r["cache_creation_tokens"]),
                str(r["cache_read_tokens"]),
                _dollars(r["cost_usd"]),
                _dollars(r["saved_usd"]) if r["batched"] else "-",
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(cols))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in table]
    t = report["totals"]
    lines.append(
        f"interactive: {t['interactive_tokens']} tokens, {_dollars(t['interactive_usd'])}; batched: "
        f"{t['batched_tokens']} tokens, {_dollars(t['batched_usd'])}; saved by batching: {_dollars(t['saved_usd'])}"
    )
    if t["unpriced_models"]:
        lines.append(f"no price for {', '.join(t['unpriced_models'])}: set REVIEWER_PRICES to count them")
    return "\n".join([head, *lines])


def _dollars(value: float | None) -> str:
    return "?" if value is None else f"${value:,.2f}"


def run(cfg: Config, args: argparse.Namespace) -> int:
    """Run one admin command; 0 when done, 1 when not found, not allowed or the database is unavailable."""
    path = cfg.sqlite_path
    if path is not None and not Path(path).exists():
        print(f"reviewer-app: no database at {path!r}: check DATABASE_URL", file=sys.stderr)
        return 1
    try:
        result, text = asyncio.run(_run(cfg, args))
    except (AdminError, StoreUnavailable) as exc:
        print(f"reviewer-app: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2, default=str) if args.json else text)
    return 0


async def _run(cfg: Config, args: argparse.Namespace) -> tuple[Any, str]:
    store = make_store(cfg)
    await store.open()
    try:
        admin = Admin(store, web_url=github_web_url(cfg.github_api_url))
        now = admin.clock()
        if args.command == "status":
            status = await admin.status()
            return status, render_status(status)
        if args.command == "usage":
            rows = await store.usage_by_repo(since=now - args.days * 86400)
            return usage_report(rows, cfg.price_table), render_usage(rows, args.days, cfg.price_table)
        if args.command == "queue":
            paused = args.queue_command == "pause"
            result = await admin.set_paused(paused)
            text = (
                "queue paused: running jobs finish, nothing new is claimed until `reviewer-app queue resume`"
                if paused
                else "queue resumed: free slots claim jobs again"
            )
            return result, text
        if args.jobs_command == "list":
            jobs = await admin.list_jobs(states=args.state or (), repo=args.repo, pr=args.pr, limit=args.limit)
            return jobs, render_list(jobs, now)
        if args.jobs_command == "show":
            job = await admin.show(args.job_id)
            return job, render_job(job, now)
        if args.jobs_command == "retry":
            job = await admin.retry(args.job_id)
            return job, f"job {job['id']} is queued again with fresh attempts ({job['max_attempts']})"
        job = await admin.cancel(args.job_id, reason=args.reason)
        running = job["previous_state"] == JobState.RUNNING.value
        note = "; its worker stops at its next lease renewal and publishes nothing" if running else ""
        return job, f"job {job['id']} cancelled{note}"
    finally:
        await store.close()
