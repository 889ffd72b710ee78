"""`reviewer-app review --local [BASE]`: the commits of the git checkout here reviewed before they are pushed (in a
pre-push hook, in any CI on a checkout), with the model key alone: no GitHub token, no App, nothing sent but the
model's requests (review/local.py). Also what both ways of `review` print, in the format asked (review/formats.py):
``text`` on a terminal, ``markdown`` otherwise (the review as the App posts it), ``json`` or ``sarif``.

Exit status: 0 reviewed; 1 the review could not be given (the model failed); 2 a wrong command line, no model key, not
a git checkout or an unknown BASE; 3 with ``--fail-on SEVERITY``, a finding of that severity or worse was found.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from reviewer_app.core.review_model import SEVERITIES
from reviewer_app.core.terminal import for_terminal
from reviewer_app.review.formats import FORMATS, Report, as_sarif, as_text, spend, wants_colour
from reviewer_app.review.progress import Progress
from reviewer_app.settings.config import Config, ConfigError, load_config, model_missing
from reviewer_app.settings.envfile import EnvFileError, apply_env_file

if TYPE_CHECKING:
    from reviewer_app.review.local import LocalReview
    from reviewer_app.review.one_pr import OneReview

FINDINGS_FOUND = 3  # --fail-on: a finding at or above the severity named


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options `review` takes for both ways of reviewing: what to print, and how quietly."""
    p.add_argument(
        "--local",
        nargs="?",
        const="",
        metavar="BASE",
        help="review this git checkout's commits since BASE (default: the merge base with the remote's default "
        "branch); no GitHub token needed",
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        help="text (the default on a terminal), markdown (as the App posts it; the default otherwise), json, sarif",
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr (it is shown only on a terminal)")
    p.add_argument(
        "--fail-on",
        choices=SEVERITIES,
        help=f"exit {FINDINGS_FOUND} when a finding of this severity or worse is found (for hooks and CI)",
    )


def output_format(args: argparse.Namespace, out: TextIO) -> str:
    if getattr(args, "json", False):
        return "json"
    return str(args.format or ("text" if out.isatty() else "markdown"))


def progress_for(args: argparse.Namespace, err: TextIO = sys.stderr) -> Progress:
    return Progress(err, shown=not args.quiet and err.isatty())


def report_of(result: OneReview, subject: str, extra: dict[str, Any] | None = None) -> Report:
    answer = result.answer
    return Report(
        subject=subject,
        head_sha=result.head_sha,
        summary=answer.summary if answer is not None else "",
        findings=answer.comments if answer is not None else (),
        not_reviewed=answer.not_covered if answer is not None else (),
        withheld=len(answer.withheld) if answer is not None else 0,
        usage=result.usage,
        extra=extra or {},
    )


def failing(report: Report, fail_on: str | None) -> bool:
    if fail_on is None:
        return False
    worst = SEVERITIES.index(fail_on)
    return any(SEVERITIES.index(c.rank) <= worst for c in report.findings)


def fail(message: str, status: int) -> int:
    print(f"reviewer-app: review: {' '.join(message.split())}", file=sys.stderr)
    return status


def run(args: argparse.Namespace) -> int:
    """`review --local [BASE]`."""
    from reviewer_app.cli.review import APP_ONLY
    from reviewer_app.cli.review import _why as why
    from reviewer_app.review.local_git import GitError, open_commits

    if args.url is not None:
        return fail("name a pull request or --local, not both", 2)
    if getattr(args, "post", False):
        return fail("--post posts on a pull request: a local review has none to post on", 2)
    env = os.environ
    try:
        apply_env_file(env.get("REVIEWER_ENV_FILE") or ".env", env)
        cfg = load_config({k: v for k, v in env.items() if k not in APP_ONLY}, require_webhook_secret=False)
    except (ConfigError, EnvFileError) as exc:
        return fail(f"configuration error: {exc}", 2)
    try:
        commits = open_commits(Path.cwd(), args.local or None)
    except GitError as exc:
        return fail(f"--local: {exc}", 2)
    if commits.base == commits.head:
        print(f"reviewer-app: review: nothing to review: HEAD is {commits.base_label}", file=sys.stderr)
        fmt = output_format(args, sys.stdout)
        if fmt in ("json", "sarif"):  # a CI step that uploads the file still gets a valid, empty one
            emit(
                fmt,
                Report(f"no commits since {commits.base_label}", commits.head, "", ()),
                "",
                cfg,
                repository_uri=None,
            )
        return 0
    if (missing := model_missing(cfg)) is not None:
        return fail(missing.what, 2)
    from reviewer_app.logs import configured_secrets, setup_logging
    from reviewer_app.review.local import review_local

    setup_logging(
        env.get("LOG_LEVEL") or "CRITICAL",
        cfg.log_format,
        secrets=configured_secrets(cfg, env),
        debug_loggers=cfg.debug_loggers,
    )
    progress = progress_for(args)
    try:
        done = asyncio.run(review_local(cfg, commits, progress))
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except TimeoutError:
        return fail(f"the review took longer than REVIEWER_JOB_TIMEOUT_SECONDS={cfg.job_timeout_seconds:g}", 1)
    except Exception as exc:  # noqa: BLE001 - every failure is one line for a person (LOG_LEVEL=ERROR: its trace)
        logging.getLogger(__name__).error("the local review failed", exc_info=exc)
        return fail(why(exc), 1)
    report = local_report(done)
    emit(output_format(args, sys.stdout), report, done.review.would.body, cfg, repository_uri=None)
    progress.step("done")
    print(f"reviewer-app: review: {report.subject}: {spend(report.usage, cfg.price_table).line()}", file=sys.stderr)
    return FINDINGS_FOUND if failing(report, args.fail_on) else 0


def local_report(done: LocalReview) -> Report:
    c = done.commits
    subject = f"{len(c.messages)} commit(s) on {c.branch} at {c.head[:12]} since {c.base_label}"
    extra = {"repository": c.repo, "base_sha": c.base, "files_changed": done.files}
    return report_of(done.review, subject, extra)


def emit(fmt: str, report: Report, markdown: str, cfg: Config, *, repository_uri: str | None) -> None:
    """Print ``report`` on stdout in ``fmt`` (markdown: the review as the App posts it)."""
    from reviewer_app import __version__
    from reviewer_app.review.formats import as_json

    if fmt == "text":
        print(as_text(report, colour=wants_colour(os.environ, tty=sys.stdout.isatty())), end="")
    elif fmt == "json":
        print(json.dumps(as_json(report, cfg.price_table), indent=2))
    elif fmt == "sarif":
        print(json.dumps(as_sarif(report, version=__version__, repository_uri=repository_uri), indent=2))
    else:  # what the pull request and the model wrote, without its escapes (core/terminal.py)
        print(for_terminal(markdown.rstrip()) + "\n", end="")
