"""Slash commands in pull-request comments (`/review ...` or `@app-slug ...`): parsing and who may use them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

Verb = Literal["review", "full", "pause", "resume", "help", "unknown"]

# Write access shows in the author association; anything else (CONTRIBUTOR, FIRST_TIMER, NONE...) is refused.
TRUSTED_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
# GitHub's `permission` for a collaborator (GET collaborators/{user}/permission): maintain shows as write, triage as
# read. What a command that changes the app's behaviour (a review, pause, resume) needs.
WRITE_PERMISSIONS = frozenset({"admin", "write"})

# At most one help answer per pull request in this many seconds: the answer is the same every time.
HELP_QUIET_SECONDS = 600.0

HELP_TEXT = """\
**reviewer-app commands** (people with write access only):

| command | what it does |
|---|---|
| `/review` | review the current head now (only what changed since the last review, when there was one) |
| `/review full` | review the whole pull request again |
| `/review pause` | stop automatic reviews of this pull request (`/review` still works) |
| `/review resume` | start automatic reviews again |
| `/review help` | this message |

You can also address the app by name: `@{slug} review`, `@{slug} pause`, ..."""

_WORDS = {
    "": "review",
    "review": "review",
    "full": "full",
    "pause": "pause",
    "resume": "resume",
    "help": "help",
    "stop": "pause",
    "start": "resume",
}


@dataclass(frozen=True)
class Command:
    verb: Verb


def own_lines(body: str) -> Iterator[str]:
    """The comment's own lines, stripped: quoted lines (`>`) and fenced code blocks are someone else's words."""
    in_fence = False
    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if not in_fence and not line.startswith(">"):
            yield line


def parse_command(body: str, *, app_slug: str) -> Command | None:
    """The first command line in a comment, or None when the comment holds no command.

    A command line starts with `/review` or `@<app-slug>`; quoted lines (`>`) and code blocks are not commands.
    """
    mention = re.compile(rf"^@{re.escape(app_slug)}(?:\[bot\])?(?=\s|$)\s*(.*)$", re.IGNORECASE) if app_slug else None
    for line in own_lines(body):
        rest: str | None = None
        m = re.match(r"^/review\b\s*(.*)$", line, re.IGNORECASE)
        if m:
            rest = m.group(1)
        elif mention is not None and (m := mention.match(line)):
            rest = m.group(1)
            # "@app review full" and "@app full" mean the same.
            rest = re.sub(r"^review\b\s*", "", rest, flags=re.IGNORECASE) if rest.lower() != "review" else ""
        if rest is None:
            continue
        word = rest.strip().split()[0].lower() if rest.strip() else ""
        verb = _WORDS.get(word, "unknown")
        return Command(verb)  # type: ignore[arg-type]
    return None


def may_command(*, author_association: str | None, user_type: str | None, login: str, bot_login: str) -> bool:
    """Whether this comment's author may trigger, pause or resume reviews."""
    if user_type == "Bot" or login.lower().endswith("[bot]") or login.lower() == bot_login.lower():
        return False
    return (author_association or "").upper() in TRUSTED_ASSOCIATIONS


def is_bot(*, user_type: str | None, login: str, bot_login: str) -> bool:
    return user_type == "Bot" or login.lower().endswith("[bot]") or login.lower() == bot_login.lower()


def help_text(app_slug: str) -> str:
    return HELP_TEXT.replace("{slug}", app_slug or "reviewer-app")
