"""Slash commands in pull-request comments (`/review ...` or `@app-slug ...`): parsing and who may use them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from reviewer_app.core.learnings import DEFAULT_KIND, KINDS, check_glob

Verb = Literal["review", "full", "pause", "resume", "learn", "forget", "help", "unknown"]

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
| `/review learn SENTENCE` | teach this repository's reviews one rule (options: `--path GLOB`, `--prefer`, `--always-check`; default: do not flag) |
| `/review learn confirm ID` | make pending learning ID (one a reply proposed) apply |
| `/review forget ID` | forget learning ID (the app says each learning's id when it learns it) |
| `/review help` | this message |

You can also address the app by name: `@{slug} review`, `@{slug} pause`, ..."""

_WORDS = {
    "": "review",
    "review": "review",
    "full": "full",
    "pause": "pause",
    "resume": "resume",
    "learn": "learn",
    "forget": "forget",
    "help": "help",
    "stop": "pause",
    "start": "resume",
}


@dataclass(frozen=True)
class Command:
    verb: Verb
    args: str = ""  # the rest of the command's line (what `learn` and `forget` act on)


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
        word, *args = rest.split(None, 1) or [""]
        verb = _WORDS.get(word.lower(), "unknown")
        return Command(verb, args[0].strip() if args else "")  # type: ignore[arg-type]
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


LEARN_USAGE = "`/review learn [--path GLOB] [--prefer | --always-check] ONE SENTENCE`"
_KIND_FLAGS = {"--do-not-flag": "do-not-flag", "--prefer": "prefer", "--always-check": "always-check"}


@dataclass(frozen=True)
class LearnArgs:
    """What `/review learn` asks: the sentence, its path glob (None: every path) and its kind."""

    text: str
    path_glob: str | None
    kind: str


def parse_learn(args: str) -> LearnArgs:
    """The options and sentence of `/review learn`: ``--path GLOB`` and a kind flag, in any order before the
    sentence. Raises ValueError with a one-line reason that repeats none of the comment's text."""
    words = args.split()
    glob: str | None = None
    kind = DEFAULT_KIND
    while words and words[0].startswith("--"):
        flag = words.pop(0).lower()
        if flag == "--path" and words:
            glob = check_glob(words.pop(0))
        elif flag == "--kind" and words and words[0].lower() in KINDS:
            kind = words.pop(0).lower()
        elif flag in _KIND_FLAGS:
            kind = _KIND_FLAGS[flag]
        else:
            raise ValueError(f"unknown option; use {LEARN_USAGE}")
    if not words:
        raise ValueError(f"say what to learn: {LEARN_USAGE}")
    return LearnArgs(" ".join(words), glob, kind)


def parse_forget(args: str, *, usage: str = "say which learning to forget: `/review forget ID`") -> int:
    """The learning id of `/review forget ID` (``12`` or ``#12``); ValueError otherwise."""
    word = args.split()[0].lstrip("#") if args.split() else ""
    if not word.isdigit() or not 0 < int(word) < 2**63:
        raise ValueError(usage)
    return int(word)


def confirmed_id(args: str) -> int | None:
    """The learning id of `/review learn confirm ID`; None when the arguments are no confirmation (a sentence to
    learn); ValueError when they are one without an id."""
    words = args.split()
    if not words or words[0].lower() != "confirm" or len(words) > 2:
        return None
    return parse_forget(" ".join(words[1:]), usage="say which learning to confirm: `/review learn confirm ID`")


@dataclass(frozen=True)
class TeamRequest:
    """A `/review learn` or `/review forget` awaiting the outbox's permission check (an Effect's content): who asked,
    where, when, and what (``learn``: the sentence, glob and kind; ``forget``: the learning's id)."""

    repo_id: int
    pr_number: int
    login: str
    comment_url: str | None
    at: float | None
    learn: LearnArgs | None = None
    forget: int | None = None
    confirm: int | None = None
    # Why the command cannot be applied (a one-line reason that repeats none of its text): answered only to a person
    # with write access, anyone else's gets a reaction (core/events.py).
    error: str | None = None

    def to_json(self) -> str:
        learn = self.learn
        return json.dumps(
            {
                "repo_id": self.repo_id,
                "pr": self.pr_number,
                "login": self.login,
                "url": self.comment_url,
                "at": self.at,
                **({"text": learn.text, "glob": learn.path_glob, "kind": learn.kind} if learn else {}),
                **({"forget": self.forget} if self.forget is not None else {}),
                **({"confirm": self.confirm} if self.confirm is not None else {}),
                **({"error": self.error} if self.error is not None else {}),
            }
        )

    @classmethod
    def from_json(cls, content: str) -> TeamRequest:
        v = json.loads(content)
        learn = LearnArgs(v["text"], v.get("glob"), v["kind"]) if "text" in v else None
        return cls(
            int(v["repo_id"]),
            int(v["pr"]),
            str(v["login"]),
            v.get("url"),
            v.get("at"),
            learn,
            v.get("forget"),
            v.get("confirm"),
            v.get("error"),
        )
