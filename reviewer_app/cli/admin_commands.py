"""The admin commands' command line: `status`, `jobs ...`, `queue ...` and `usage`, run against the job database."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from reviewer_app import __version__
from reviewer_app.admin import Admin, AdminError, github_web_url
from reviewer_app.admin_text import render_job, render_list, render_status
from reviewer_app.cli.args import number_above, whole_number
from reviewer_app.cli.usage_report import render_usage, usage_report
from reviewer_app.core.states import JobState
from reviewer_app.core.terminal import for_terminal
from reviewer_app.settings.config import Config
from reviewer_app.store.base import StoreUnavailable
from reviewer_app.store.factory import make_store

COMMANDS = ("status", "jobs", "queue", "usage")
# What the admin commands add while no App is configured: the database is fine, nothing has come in yet.
SETUP_NOTE = (
    "No GitHub App is configured yet: `reviewer-app serve` shows the setup page that registers one; until then no "
    "webhook arrives and no job is queued."
)


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `status`, `jobs ...`, `queue ...` and `usage` on the reviewer-app parser."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON for scripts")
    sub.add_parser("status", parents=[common], help="the queue on one screen: backlog age, expired claims, failures")
    jobs_parser = sub.add_parser("jobs", help="list, show, retry or cancel jobs")
    jobs_parser.set_defaults(command_parser=jobs_parser)
    jobs = jobs_parser.add_subparsers(dest="jobs_command", metavar="{list,show,retry,cancel}")
    ls = jobs.add_parser("list", parents=[common], help="jobs, newest first")
    ls.add_argument("--state", action="append", choices=[s.value for s in JobState], help="repeatable")
    ls.add_argument("--repo", help="owner/name")
    ls.add_argument("--pr", type=whole_number(1), help="pull request number")
    ls.add_argument("--limit", type=whole_number(1), default=50, help="at most this many jobs (default 50)")
    for name, what in (
        ("show", "one job with every attempt"),
        ("retry", "give a failed or cancelled job fresh attempts"),
        ("cancel", "cancel a queued or running job"),
    ):
        p = jobs.add_parser(name, parents=[common], help=what)
        p.add_argument("job_id", type=whole_number(1), metavar="ID")
        if name == "cancel":
            p.add_argument("--reason", default="cancelled by an operator")
    queue_parser = sub.add_parser("queue", help="pause or resume claims")
    queue_parser.set_defaults(command_parser=queue_parser)
    queue = queue_parser.add_subparsers(dest="queue_command", metavar="{pause,resume}")
    queue.add_parser("pause", parents=[common], help="stop claiming new jobs (running ones finish)")
    queue.add_parser("resume", parents=[common], help="claim again")
    usage = sub.add_parser(
        "usage",
        parents=[common],
        help="model tokens per repository, kind (reviews, answers) and model, interactive and batched, and what they cost",
    )
    usage.add_argument("--days", type=number_above(0), default=7.0, help="look back this many days (default 7)")


def missing_subcommand(args: argparse.Namespace) -> str | None:
    """What to say when `jobs` or `queue` came without what to do (argparse would say "required: jobs_command")."""
    if args.command == "jobs" and args.jobs_command is None:
        return "say what to do: list, show ID, retry ID or cancel ID (`reviewer-app jobs list` to start)"
    if args.command == "queue" and args.queue_command is None:
        return "say what to do: pause or resume (`reviewer-app status` shows whether the queue is paused)"
    return None


def run(cfg: Config, args: argparse.Namespace) -> int:
    """Run one admin command; 0 when done, 1 when not found, not allowed or the database is unavailable."""
    return run_on_database(cfg, args, _run, AdminError)


Command = Callable[[Config, argparse.Namespace], Awaitable[tuple[Any, str]]]


def run_on_database(cfg: Config, args: argparse.Namespace, command: Command, refused: type[Exception]) -> int:
    """Run a command over the database (never creating one): its text, or JSON with ``--json``; 0 when done, 1 with
    one line on stderr when it is ``refused`` or the database is unavailable."""
    path = cfg.sqlite_path
    if path is not None and not Path(path).exists():
        print(
            f"reviewer-app: no database at {path!r} yet: `reviewer-app serve` creates it when it starts "
            "(DATABASE_URL says where)",
            file=sys.stderr,
        )
        return 1
    try:
        result, text = asyncio.run(command(cfg, args))
    except (refused, StoreUnavailable) as exc:
        print(f"reviewer-app: {for_terminal(str(exc))}", file=sys.stderr)
        return 1
    if cfg.needs_setup and not args.json and (args.command == "status" or _listed_nothing(args, result)):
        text = f"{text}\n\n{SETUP_NOTE}"
    # Learnings, titles and errors are other people's words: printed without their escapes (core/terminal.py).
    print(for_terminal(json.dumps(result, indent=2, default=str) if args.json else text))
    return 0


def _listed_nothing(args: argparse.Namespace, result: Any) -> bool:
    """`jobs list` or `usage` found nothing (in setup mode: since no App sent anything yet)."""
    listing = args.command == "usage" or getattr(args, "jobs_command", None) == "list"
    rows = result.get("rows") if isinstance(result, dict) else result
    return listing and not rows


async def _run(cfg: Config, args: argparse.Namespace) -> tuple[Any, str]:
    store = make_store(cfg)
    await store.open()
    try:
        admin = Admin(store, web_url=github_web_url(cfg.github_api_url))
        now = admin.clock()
        if args.command == "status":
            status = {**await admin.status(), "version": __version__, "app_configured": not cfg.needs_setup}
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
