"""`reviewer-app review PULL_REQUEST_URL`: one pull request reviewed with a token and the model key, no App, no webhook
and no database beyond a temporary one (review/one_pr.py runs the App's stages). The review is printed as the App
would post it (Markdown, or ``--json`` with the structured findings) and posted only with ``--post``.

The REST API: ``GITHUB_API_URL`` when set, else the URL's host tells it (https://api.github.com for github.com, a
GitHub Enterprise Server's https://HOST/api/v3). The token goes only where it belongs (review_token.py):
``GITHUB_TOKEN`` to github.com or GITHUB_API_URL's host, the GitHub CLI's token for the API's own host, or the
variable ``--token-env NAME`` names; never in clear except to loopback. A wrong command line or a missing token or
key is one line and exit 2; a review GitHub or the model could not give is one line and exit 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from reviewer_app.cli import local
from reviewer_app.cli.review_token import NoToken, find_token
from reviewer_app.core.pull_url import NotAPullRequestURL, PullRef, parse_pull_url
from reviewer_app.core.terminal import for_terminal
from reviewer_app.settings.config import Config, ConfigError, load_config, model_missing
from reviewer_app.settings.envfile import EnvFileError, apply_env_file

if TYPE_CHECKING:
    from reviewer_app.review.one_pr import OneReview
    from reviewer_app.review.progress import Progress

PROG = "reviewer-app: review"
# The App's own settings: `review` needs none of them, and one half set (an id without its key) must not stop it.
APP_ONLY = ("GITHUB_APP_ID", "GITHUB_PRIVATE_KEY", "GITHUB_PRIVATE_KEY_PATH", "GITHUB_WEBHOOK_SECRET", "DATABASE_URL")


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "review",
        help="review one pull request by its URL and print the review (a GitHub token and the model key; no App)",
        description="Review one pull request as the App would and print the review; --post posts it.",
    )
    p.add_argument("url", metavar="PULL_REQUEST_URL", nargs="?", help="https://HOST/OWNER/REPO/pull/NUMBER")
    p.add_argument("--json", action="store_true", help="print the structured findings and the review as JSON")
    local.add_arguments(p)
    p.add_argument(
        "--post",
        action="store_true",
        help="post the review on the pull request, as the token's user (once per head: a second --post posts nothing)",
    )
    p.add_argument(
        "--token-env",
        metavar="NAME",
        help="send the token in the environment variable NAME (for a host other than github.com or GITHUB_API_URL's)",
    )


def fail(message: str, status: int) -> int:
    print(f"{PROG}: {for_terminal(' '.join(message.split()))}", file=sys.stderr)
    return status


def run(args: argparse.Namespace) -> int:
    if args.local is not None:
        return local.run(args)
    if args.url is None:
        return fail("say what to review: a PULL_REQUEST_URL, or --local for this checkout's commits", 2)
    env = os.environ
    try:
        ref = parse_pull_url(args.url)
    except NotAPullRequestURL as exc:
        return fail(str(exc), 2)
    try:
        apply_env_file(env.get("REVIEWER_ENV_FILE") or ".env", env)
        cfg = load_config({k: v for k, v in env.items() if k not in APP_ONLY}, require_webhook_secret=False)
    except (ConfigError, EnvFileError) as exc:
        return fail(f"configuration error: {exc}", 2)
    if (missing := model_missing(cfg)) is not None:
        return fail(missing.what, 2)
    api_url = (env.get("GITHUB_API_URL") or ref.api_url).rstrip("/")
    try:  # only where it may go (review_token.py): a pasted link's host gets no token of another host's
        token = find_token(env, api_url, token_env=args.token_env)
    except NoToken as exc:
        return fail(str(exc), 2)
    from reviewer_app.logs import configured_secrets, setup_logging

    # The review goes to stdout, and what went wrong is one line on stderr: the log says more only when LOG_LEVEL asks.
    setup_logging(
        env.get("LOG_LEVEL") or "CRITICAL",
        cfg.log_format,
        secrets=[token, *configured_secrets(cfg, env)],
        debug_loggers=cfg.debug_loggers,
    )
    try:
        progress = local.progress_for(args)
        result = asyncio.run(_review(cfg, ref, token, api_url, post=args.post, progress=progress))
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except TimeoutError:
        return fail(f"the review took longer than REVIEWER_JOB_TIMEOUT_SECONDS={cfg.job_timeout_seconds:g}", 1)
    except Exception as exc:  # noqa: BLE001 - every failure is one line for a person (LOG_LEVEL=ERROR: its trace)
        logging.getLogger(__name__).error("the review failed", exc_info=exc)
        return fail(_why(exc), 1)
    fmt = local.output_format(args, sys.stdout)
    report = local.report_of(result, f"{ref.repo}#{ref.number} at {result.head_sha[:12]}")
    if fmt == "json":  # the findings, and the review as GitHub gets it
        print(json.dumps(as_json(ref, result, cfg), indent=2))
    else:
        local.emit(fmt, report, as_markdown(result), cfg, repository_uri=f"{ref.scheme}://{ref.host}/{ref.repo}")
    if result.not_posted is not None:
        return fail(f"reviewed, but not posted: {_why(result.not_posted)}", 1)
    print(f"{PROG}: {for_terminal(_what_happened(ref, result, cfg))}", file=sys.stderr)
    return local.FINDINGS_FOUND if local.failing(report, args.fail_on) else 0


async def _review(cfg: Config, ref: PullRef, token: str, api_url: str, *, post: bool, progress: Progress) -> OneReview:
    import aiohttp

    from reviewer_app.github.auth import PersonalToken
    from reviewer_app.github.client import GitHubClient
    from reviewer_app.github.pacing import WritePacer
    from reviewer_app.review.model_client import ModelEndpoint, make_client
    from reviewer_app.review.one_pr import OnePullRequest, review_one
    from reviewer_app.review.progress import reviewers
    from reviewer_app.review.settings import ReviewSettings
    from reviewer_app.store.factory import make_store

    with tempfile.TemporaryDirectory(prefix="reviewer-app-review-") as tmp:
        store = make_store(replace(cfg, database_url=f"sqlite:///{tmp}/review.db"))
        await store.open()
        try:
            async with aiohttp.ClientSession() as session:
                github = GitHubClient(
                    session,
                    api_url,
                    PersonalToken(token),
                    read_retry_delays=(cfg.github_retry_seconds, cfg.github_retry_seconds * 3),
                    pacer=WritePacer(interval=cfg.github_write_interval_seconds, burst=cfg.github_write_burst),
                )
                # No job-level retries here: the SDK waits out an overloaded or rate-limited model itself.
                client = make_client(ModelEndpoint.from_config(cfg), timeout=cfg.model_timeout_seconds, max_retries=2)
                try:
                    claude, verifier = reviewers(cfg, client, progress)
                    reviewer = OnePullRequest(github, claude, ReviewSettings.from_config(cfg), verifier)
                    return await review_one(
                        store, reviewer, ref, post=post, clock=time.time, timeout=cfg.job_timeout_seconds
                    )
                finally:
                    await client.close()
        finally:
            await store.close()


def _why(exc: BaseException) -> str:
    """A failure in words: the job errors' reasons (already free of the token), the rest by their text."""
    from reviewer_app.core.errors import Cancelled, Deferred, JobError, Superseded, TransientError

    if isinstance(exc, Superseded):
        return f"the pull request moved on while it was reviewed ({exc.reason}); run the command again"
    if isinstance(exc, Cancelled):
        return f"no review: {exc.reason}"
    if isinstance(exc, Deferred):  # a rate limit (GitHub's or the model's), or a wait: nothing here waits for it
        until = datetime.fromtimestamp(exc.retry_at).astimezone().strftime("%H:%M:%S")
        return f"{exc.reason.split('; retry after')[0]}; try again after {until}"
    if isinstance(exc, TransientError):  # nothing here tries again by itself
        return exc.reason.removesuffix("; will retry") + "; try again later"
    if isinstance(exc, JobError):
        return exc.reason
    return str(exc) or type(exc).__name__


# -- what is printed --------------------------------------------------------------------------------------------


def as_markdown(result: OneReview) -> str:
    """The review as the App posts it: its body, then each inline comment with the line it sits on."""
    parts = [result.would.body.rstrip()]
    comments = result.would.comments
    if comments:
        parts.append(f"---\n\n**Inline comments** ({len(comments)}), each on its line of the diff:")
        for c in comments:
            parts.append(f"#### `{c.get('path')}` {_lines(c)}\n\n{str(c.get('body') or '').rstrip()}")
    return "\n\n".join(parts) + "\n"


def _lines(c: Mapping[str, Any]) -> str:
    start, line = c.get("start_line"), c.get("line")
    where = f"lines {start}–{line}" if start else f"line {line}"
    return f"{where} (old side)" if c.get("side") == "LEFT" else where


def as_json(ref: PullRef, result: OneReview, cfg: Config) -> dict[str, Any]:
    """The structured findings, the review as GitHub gets it, whether it was posted, and what the model cost."""
    answer = result.answer
    inline = {(c.get("path"), c.get("line"), c.get("side") or "RIGHT") for c in result.would.comments}
    findings = [
        {
            "path": c.path,
            "line": c.line,
            "side": c.side,
            "start_line": c.start_line,
            "severity": c.rank,
            "body": c.body,
            "suggestion": c.suggestion,
            "inline": (c.path, c.line, c.side) in inline,
        }
        for c in (answer.comments if answer is not None else ())
    ]
    counts = result.counts
    return {
        "pull_request": ref.web_url,
        "repository": ref.repo,
        "number": ref.number,
        "head_sha": result.head_sha,
        "model": answer.model if answer is not None else None,
        "summary": answer.summary if answer is not None else None,
        "findings": findings,
        "not_reviewed": [{"path": p, "reason": r} for p, r in (answer.not_covered if answer is not None else ())],
        "counts": None if counts is None else {**counts.by_severity(), "files_reviewed": counts.files_reviewed},
        "review": {"body": result.would.body, "comments": list(result.would.comments)},
        "posted": None
        if result.review_url is None
        else {"url": result.review_url, "now": result.posted_before is None},
        "usage": _usage(result, cfg),
    }


def _usage(result: OneReview, cfg: Config) -> dict[str, Any]:
    from reviewer_app.review.formats import spend

    model = next((a.model for a in result.attempts if a.model), None) or cfg.model
    return {**spend(result.usage, cfg.price_table).as_json(), "model": model}


def _what_happened(ref: PullRef, result: OneReview, cfg: Config) -> str:
    where = f"{ref.repo}#{ref.number} at {result.head_sha[:12]}"
    if result.posted_before is not None:
        return (
            f"{where} was already reviewed (a review whose marker names this head); nothing posted: {result.review_url}"
        )
    from reviewer_app.review.formats import spend

    spent = spend(result.usage, cfg.price_table).line()
    if result.review_url is not None:
        return f"{where} reviewed and posted ({spent}): {result.review_url}"
    return f"{where} reviewed, not posted ({spent}); --post posts it"
