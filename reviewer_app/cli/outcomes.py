"""`reviewer-app outcomes [--repo OWNER/NAME] [--since DAYS] [--json]`: what the app's published findings became (their
fates) and the acted-on rate, by dimension and per experiment variant, read from the database."""

from __future__ import annotations

import argparse
import time
from typing import Any

from reviewer_app.admin import github_web_url
from reviewer_app.cli.admin_commands import run_on_database
from reviewer_app.cli.args import number_above
from reviewer_app.outcomes_report import read_outcomes, render_outcomes
from reviewer_app.settings.config import Config
from reviewer_app.store.factory import make_store

COMMAND = "outcomes"


class OutcomesError(Exception):
    """The report cannot be made; the message says why, in one line."""


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        COMMAND, help="what the published findings became (fixed, dismissed, open at merge) and the acted-on rate"
    )
    parser.add_argument("--repo", metavar="OWNER/NAME", help="one repository (default: every repository)")
    parser.add_argument(
        "--since", type=number_above(0), default=30.0, metavar="DAYS", help="findings published in the last DAYS days"
    )
    parser.add_argument("--json", action="store_true", help="print JSON for scripts (with every finding)")


def run(cfg: Config, args: argparse.Namespace) -> int:
    """Print the report; 0 when done, 1 when the database is unavailable."""
    return run_on_database(cfg, args, _run, OutcomesError)


async def _run(cfg: Config, args: argparse.Namespace) -> tuple[Any, str]:
    store = make_store(cfg)
    await store.open()
    try:
        report = await read_outcomes(
            store,
            since=time.time() - args.since * 86400,
            repo=args.repo,
            prices=cfg.price_table,
            web_url=github_web_url(cfg.github_api_url),
        )
    finally:
        await store.close()
    return report, render_outcomes(report, args.since)
