"""The reviewer-app command: serve, worker and admin commands over the same database."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path

from reviewer_app.cli import admin_commands, backup, learnings, outcomes, review
from reviewer_app.cli.args import whole_number
from reviewer_app.dispatch.registry import app_version
from reviewer_app.logs import configured_secrets, setup_logging
from reviewer_app.settings.config import Config, ConfigError, load_config, lookalike_settings
from reviewer_app.settings.envfile import EnvFileError, apply_env_file
from reviewer_app.store import migrate as migrate_store
from reviewer_app.store.base import StoreUnavailable

# Commands that work on the database only: they receive no webhook, so they need no webhook secret.
DATABASE_COMMANDS = (*admin_commands.COMMANDS, learnings.COMMAND, outcomes.COMMAND, "backup")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="reviewer-app", description="Review pull requests with Claude.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {app_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    review.add_command(sub)
    serve = sub.add_parser("serve", help="receive webhooks and run reviews")
    serve.add_argument("--host", help="bind address (env HOST, default 0.0.0.0)")
    serve.add_argument("--port", type=whole_number(0, 65535), help="port (env PORT, default 8080)")
    serve.add_argument("--no-worker", action="store_true", help="receive only; run no reviews here")
    worker = sub.add_parser("worker", help="run reviews and background duties only; receive no webhooks")
    worker.add_argument("--host", help="bind address of the health port (env HOST, default 0.0.0.0)")
    worker.add_argument(
        "--port", type=whole_number(0, 65535), help="serve /healthz, /readyz and /metrics on this port (default: none)"
    )
    config = sub.add_parser(
        "config", help="print the effective configuration, secrets masked, with what is wrong or missing marked"
    )
    config.add_argument("--json", action="store_true", help="print JSON for scripts")
    admin_commands.add_commands(sub)
    learnings.add_command(sub)
    outcomes.add_command(sub)
    backup.add_command(sub)
    migrate_store.add_command(sub)
    parser.set_defaults(command_names=tuple(sub.choices))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        names = ", ".join(args.command_names)
        parser.error(f"say which command to run: {names} (`reviewer-app --help` says what each does)")
    missing = admin_commands.missing_subcommand(args) or learnings.missing_subcommand(args)
    if missing is not None:
        args.command_parser.error(missing)
    warn_lookalikes()
    if args.command == "migrate-store":  # both databases are named on the command line: no configuration needed
        return migrate_store.main(args)
    if args.command == "review":  # a token and the model key: none of the App's settings, no database of its own
        return review.run(args)
    if args.command == "config":
        return print_config(as_json=args.json)
    try:
        # The .env file fills in what the real environment leaves unset (the setup page writes the App there).
        apply_env_file(os.environ.get("REVIEWER_ENV_FILE") or ".env", os.environ)
        overrides = {}
        if args.command == "serve":
            overrides = {"host": args.host, "port": args.port}
        # `serve` without any App starts the setup page instead of failing.
        # A worker receives no webhooks either: it needs no webhook secret.
        cfg = load_config(
            require_webhook_secret=args.command not in (*DATABASE_COMMANDS, "worker"),
            allow_setup=args.command == "serve",
            **overrides,
        )
    except (ConfigError, EnvFileError) as exc:
        print(f"reviewer-app: configuration error: {exc}", file=sys.stderr)
        return 2
    setup_logging(
        cfg.log_level,
        cfg.log_format,
        secrets=configured_secrets(cfg, os.environ),
        debug_loggers=cfg.debug_loggers,
    )
    if args.command in admin_commands.COMMANDS:
        return admin_commands.run(cfg, args)
    if args.command == learnings.COMMAND:
        return learnings.run(cfg, args)
    if args.command == outcomes.COMMAND:
        return outcomes.run(cfg, args)
    if args.command == "backup":
        return backup.run(cfg, args)
    if args.command in ("serve", "worker"):
        return _run_service(cfg, args)
    return 1


def _run_service(cfg: Config, args: argparse.Namespace) -> int:
    """`serve` or `worker` until stopped; a failure to start is one line on stderr and exit status 2."""
    from reviewer_app.review.model_client import ModelUnavailable
    from reviewer_app.service import serve, work
    from reviewer_app.web.limits import CannotListen

    try:
        if args.command == "serve":
            asyncio.run(serve(cfg, worker=not args.no_worker))
            return 0
        return asyncio.run(work(cfg, host=args.host, port=args.port))
    except KeyboardInterrupt:
        return 0
    except CannotListen as exc:
        print(f"reviewer-app: {exc}", file=sys.stderr)
        return 2
    except StoreUnavailable as exc:
        print(f"reviewer-app: {_one_line(str(exc))}{database_hint(cfg)}", file=sys.stderr)
        return 2
    except ModelUnavailable as exc:  # the model provider's client cannot be built: no region, no credentials
        print(f"reviewer-app: {_one_line(str(exc))}", file=sys.stderr)
        return 2


def database_hint(cfg: Config) -> str:
    """What to check when the database cannot be opened, where the driver's own words do not say it."""
    path = cfg.sqlite_path
    if path is not None:
        parent = Path(path).parent
        if not parent.is_dir():
            return f" (the directory {str(parent)!r} does not exist: create it, or change DATABASE_URL)"
        if not os.access(parent, os.W_OK):
            return f" (the directory {str(parent)!r} is not writable by this user)"
    return "; check DATABASE_URL"


def print_config(*, as_json: bool = False) -> int:
    """`reviewer-app config`: every setting it can read, with what is wrong or missing marked (``as_json``: as data,
    each setting's value, mark, and what stops `serve`); 2 when `serve` would refuse this configuration, 0 otherwise."""
    from reviewer_app.cli.config_report import inspect_config

    env_problem = None
    try:
        apply_env_file(os.environ.get("REVIEWER_ENV_FILE") or ".env", os.environ)
    except EnvFileError as exc:
        env_problem = str(exc)
    report = inspect_config(os.environ)
    found = [env_problem] if env_problem else []
    found += report.problems
    if as_json:
        settings = {env: {"value": value, "mark": report.marks.get(env)} for env, value in report.values.items()}
        data = {
            "settings": settings,
            "problems": found,
            "warnings": lookalike_settings(os.environ),
            "serve_would_start": not (found or report.broken),
        }
        print(json.dumps(data, indent=2))
        return 2 if found or report.broken else 0
    print("\n".join(report.lines()))
    for problem in found:
        print(f"reviewer-app: configuration error: {problem}", file=sys.stderr)
    return 2 if found or report.broken else 0


def warn_lookalikes() -> None:
    """A warning line for each GITHUB_ or ANTHROPIC_ name, in the environment or the .env file, that looks like a
    setting but is none (GITHUB_APPID): it is ignored, and the setting it meant stays unset."""
    env = dict(os.environ)
    with contextlib.suppress(EnvFileError):  # a broken .env file is the command's own error to report
        apply_env_file(env.get("REVIEWER_ENV_FILE") or ".env", env)
    for warning in lookalike_settings(env):
        print(f"reviewer-app: warning: {warning}", file=sys.stderr)


def _one_line(text: str) -> str:
    return " ".join(text.split())


if __name__ == "__main__":
    sys.exit(main())
