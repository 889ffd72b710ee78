"""`reviewer-app learnings list|show|add|remove --repo owner/name`: a repository's learnings on the database, for an
operator (the team teaches and forgets them with `/review learn` and `/review forget`)."""

from __future__ import annotations

import argparse
import dataclasses
from datetime import UTC, datetime
from typing import Any

from reviewer_app.cli.admin_commands import run_on_database
from reviewer_app.cli.args import whole_number
from reviewer_app.core.learnings import KINDS, Learning, LearningLimitReached, make_draft, source_label
from reviewer_app.settings.config import Config
from reviewer_app.store.base import Store
from reviewer_app.store.factory import make_store

COMMAND = "learnings"


class LearningsError(Exception):
    """What the operator asked cannot be done; the message says why, in one line."""


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `learnings list|show|add|remove` on the reviewer-app parser."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON for scripts")
    common.add_argument(
        "--repo",
        required=True,
        type=repository,
        help="owner/name, as the app's jobs record it (or the repository's numeric id)",
    )
    parser = sub.add_parser(COMMAND, help="list, show, add or remove a repository's learnings")
    parser.set_defaults(command_parser=parser)
    verbs = parser.add_subparsers(dest="learnings_command", metavar="{list,show,add,remove}")
    verbs.add_parser("list", parents=[common], help="the repository's learnings, oldest first")
    show = verbs.add_parser("show", parents=[common], help="one learning with its source")
    show.add_argument("learning_id", type=whole_number(1), metavar="ID")
    add = verbs.add_parser("add", parents=[common], help="teach the repository's reviews one sentence")
    add.add_argument("text", nargs="+", metavar="SENTENCE")
    add.add_argument("--path", dest="path_glob", metavar="GLOB", help="only for files under this glob")
    add.add_argument("--kind", choices=KINDS, default=KINDS[0], help="default: do-not-flag")
    add.add_argument("--author", default="operator", help="who taught it (default: operator)")
    remove = verbs.add_parser("remove", parents=[common], help="forget one learning")
    remove.add_argument("learning_id", type=whole_number(1), metavar="ID")


def repository(raw: str) -> str:
    """An argparse type: owner/name or a numeric repository id (anything else is a usage error, exit 2)."""
    value = raw.strip()
    owner, _, name = value.partition("/")
    if value.isdigit() or (owner and name and "/" not in name and " " not in value):
        return value
    raise argparse.ArgumentTypeError(f"{raw!r} is neither owner/name nor a repository id")


def missing_subcommand(args: argparse.Namespace) -> str | None:
    if args.command == COMMAND and args.learnings_command is None:
        return "say what to do: list, show ID, add SENTENCE or remove ID, each with --repo owner/name"
    return None


def run(cfg: Config, args: argparse.Namespace) -> int:
    """Run one learnings command; 0 when done, 1 when not found, refused or the database is unavailable."""
    return run_on_database(cfg, args, _run, LearningsError)


async def _run(cfg: Config, args: argparse.Namespace) -> tuple[Any, str]:
    store = make_store(cfg)
    await store.open()
    try:
        repo = await _repo_id(store, args.repo, cfg)
        if args.learnings_command == "list":
            found = await store.list_learnings(repo) if repo is not None else []
            return [as_json(x) for x in found], render_list(found, args.repo)
        if repo is None and args.learnings_command == "add":
            raise LearningsError(
                f"the app has not reviewed {args.repo} yet and no App is configured to ask GitHub its id: give the "
                f"id instead (`gh api repos/{args.repo} --jq .id`)"
            )
        if repo is None:
            raise LearningsError(f"no learning {args.learning_id} in {args.repo}")
        if args.learnings_command == "add":
            return await _add(store, cfg, args, repo)
        learning = await store.get_learning(repo, args.learning_id)
        if learning is None:
            raise LearningsError(f"no learning {args.learning_id} in {args.repo}")
        if args.learnings_command == "show":
            return as_json(learning), render_learning(learning)
        await store.remove_learning(repo, learning.id)
        return {**as_json(learning), "removed": True}, f"learning {learning.id} removed from {args.repo}"
    finally:
        await store.close()


async def _add(store: Store, cfg: Config, args: argparse.Namespace, repo: str) -> tuple[Any, str]:
    try:
        draft = make_draft(
            repo=repo,
            text=" ".join(args.text),
            kind=args.kind,
            path_glob=args.path_glob,
            source_kind="cli",
            author=args.author,
            created_at=datetime.now(UTC),
            max_text=cfg.learning_max_chars,
        )
        learning = await store.add_learning(draft, limit=cfg.learnings_per_repo)
    except (ValueError, LearningLimitReached) as exc:
        raise LearningsError(f"nothing added: {exc}") from exc
    return as_json(learning), f"learning {learning.id} in {args.repo}: {learning.text}"


async def _repo_id(store: Store, repo: str, cfg: Config) -> str | None:
    """The repository's id: given as a number, or found by the full name the app's newest job records for it; before
    the app's first review of it, asked of GitHub with the App's credentials (None without them: it can hold no
    learning under that name yet)."""
    if repo.isdigit():
        return repo
    found = await store.repo_id_of_name(repo)
    if found is None and cfg.app_id and cfg.private_key:
        found = await _ask_github(cfg, repo)
    return None if found is None else str(found)


async def _ask_github(cfg: Config, repo: str) -> int:
    """The id GitHub gives ``repo``, read with a token of the installation that holds it (metadata only)."""
    import aiohttp

    from reviewer_app.core.errors import JobError
    from reviewer_app.github.auth import AppCredentials
    from reviewer_app.github.client import GitHubClient
    from reviewer_app.github.scopes import acting_as

    async with aiohttp.ClientSession() as session:
        github = GitHubClient(session, cfg.github_api_url, AppCredentials(cfg.app_id, cfg.private_key))
        try:
            with acting_as("lookup"):
                found = await github.repository_id(repo)
        except JobError as exc:
            raise LearningsError(f"GitHub did not say which repository {repo} is: {exc.reason}") from None
    if found is None:
        raise LearningsError(f"the App is not installed on {repo} (or there is no such repository)")
    return found


def as_json(learning: Learning) -> dict[str, Any]:
    out = dataclasses.asdict(learning)
    out["created_at"] = learning.created_at.isoformat()
    out["last_applied"] = learning.last_applied.isoformat() if learning.last_applied else None
    return out


def render_list(learnings: list[Learning], repo: str) -> str:
    if not learnings:
        return f"{repo} has no learnings"
    rows = [f"{'ID':>6}  {'KIND':<12}  {'STATUS':<7}  {'PATH':<20}  {'APPLIED':>7}  SENTENCE"]
    for x in learnings:
        where = x.path_glob or "(all)"
        rows.append(f"{x.id:>6}  {x.kind:<12}  {x.status:<7}  {where:<20}  {x.times_applied:>7}  {x.text}")
    return "\n".join(rows)


def render_learning(x: Learning) -> str:
    last = x.last_applied.strftime("%Y-%m-%d %H:%M UTC") if x.last_applied else "never"
    return "\n".join(
        [
            f"learning {x.id} ({x.kind}, {'files ' + x.path_glob if x.path_glob else 'all files'}, {x.status})",
            f"  {x.text}",
            f"source:   {source_label(x)}, {x.created_at.strftime('%Y-%m-%d %H:%M UTC')}",
            f"link:     {x.source_url or '-'}",
            f"applied:  {x.times_applied} time(s), last {last}",
        ]
    )
