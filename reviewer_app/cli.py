"""The reviewer-app command: serve, worker and admin commands over the same database."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from reviewer_app import admin_cli
from reviewer_app.config import ConfigError, load_config
from reviewer_app.envfile import EnvFileError, apply_env_file
from reviewer_app.logs import setup_logging
from reviewer_app.store import migrate as migrate_store


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="reviewer-app", description="Review pull requests with Claude.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="receive webhooks and run reviews")
    serve.add_argument("--host", help="bind address (env HOST, default 0.0.0.0)")
    serve.add_argument("--port", type=int, help="port (env PORT, default 8080)")
    serve.add_argument("--no-worker", action="store_true", help="receive only; run no reviews here")
    worker = sub.add_parser("worker", help="run reviews and background duties only; receive no webhooks")
    worker.add_argument("--host", help="bind address of the health port (env HOST, default 0.0.0.0)")
    worker.add_argument("--port", type=int, help="serve /healthz, /readyz and /metrics on this port (default: none)")
    sub.add_parser("config", help="print the effective configuration, secrets masked")
    admin_cli.add_commands(sub)
    migrate_store.add_command(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "migrate-store":  # both databases are named on the command line: no configuration needed
        return migrate_store.main(args)
    try:
        # The .env file fills in what the real environment leaves unset (the setup page writes the App there).
        apply_env_file(os.environ.get("REVIEWER_ENV_FILE") or ".env", os.environ)
        overrides = {}
        if args.command == "serve":
            overrides = {"host": args.host, "port": args.port}
        # Admin commands work on the database only: they need no webhook secret.
        # `serve` without any App starts the setup page instead of failing.
        # A worker receives no webhooks either: it needs no webhook secret.
        cfg = load_config(
            require_webhook_secret=args.command not in (*admin_cli.COMMANDS, "worker"),
            allow_setup=args.command == "serve",
            **overrides,
        )
    except (ConfigError, EnvFileError) as exc:
        print(f"reviewer-app: configuration error: {exc}", file=sys.stderr)
        return 2
    setup_logging(cfg.log_level, cfg.log_format)
    if args.command == "config":
        for key, value in cfg.masked().items():
            print(f"{key}={value}")
        return 0
    if args.command in admin_cli.COMMANDS:
        return admin_cli.run(cfg, args)
    if args.command in ("serve", "worker"):
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
    return 1


if __name__ == "__main__":
    sys.exit(main())
