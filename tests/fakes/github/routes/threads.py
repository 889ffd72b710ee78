"""Review threads: list a pull request's review comments, reply in a thread, and arrange replies in tests.

The routes read and write the state's ``review_comments`` (kept as the review POST stores them) and fill in what
GitHub's `pull-request-review-comment` schema asks for when they serve them (tests/github/test_fake_schema.py holds them to
it).
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from tests.fakes.github.api import AUTH, REPO_PATH, ApiError, page, read_body
from tests.fakes.github.auth import pull_for
from tests.fakes.github.permissions import actor
from tests.fakes.github.shapes import iso, user_json
from tests.fakes.github.state import GitHubState

Json = dict[str, Any]

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def diff_hunk_until(patch: str, line: int) -> str:
    """The hunk of ``patch`` holding new-side ``line``, cut after that line, as GitHub shows a comment's diff_hunk."""
    out: list[str] = []
    new = 0
    for text in patch.split("\n"):
        header = _HUNK.match(text)
        if header:
            out, new = [text], int(header.group(1))
            continue
        out.append(text)
        if text.startswith("-"):
            continue
        if new == line:
            return "\n".join(out)
        new += 1
    return "\n".join(out)


def _comment_json(fake: GitHubState, repo: str, number: int, entry: Json) -> Json:
    """A stored review comment as GitHub serves it."""
    comment_id = entry["id"]
    api = f"https://api.github.com/repos/{repo}"
    html = f"https://github.com/{repo}/pull/{number}#discussion_r{comment_id}"
    pull = fake.pulls[(repo, number)]
    commit_id = entry.get("commit_id") or pull.head_sha
    patch = next((f.get("patch") for f in pull.files_by_sha.get(commit_id, []) if f["filename"] == entry["path"]), "")
    user = entry["user"] if isinstance(entry.get("user"), dict) else user_json(str(entry.get("user")))
    return {
        "url": f"{api}/pulls/comments/{comment_id}",
        "pull_request_review_id": entry.get("pull_request_review_id"),
        "id": comment_id,
        "node_id": f"PRRC_{comment_id}",
        "diff_hunk": entry.get("diff_hunk") or diff_hunk_until(patch or "", int(entry.get("line") or 0)),
        "path": entry["path"],
        "commit_id": commit_id,
        "original_commit_id": commit_id,
        "in_reply_to_id": entry.get("in_reply_to_id"),
        "user": user,
        "body": entry["body"],
        "created_at": entry.get("created_at") or iso(fake.clock()),
        "updated_at": entry.get("created_at") or iso(fake.clock()),
        "html_url": html,
        "pull_request_url": f"{api}/pulls/{number}",
        "author_association": entry.get("author_association", "NONE"),
        "_links": {
            "self": {"href": f"{api}/pulls/comments/{comment_id}"},
            "html": {"href": html},
            "pull_request": {"href": f"{api}/pulls/{number}"},
        },
        "line": entry.get("line"),
        "original_line": entry.get("line"),
        "side": entry.get("side", "RIGHT"),
        "start_line": entry.get("start_line"),
        "start_side": entry.get("start_side"),
        "subject_type": "line",
    }


def add_review_reply(
    fake: GitHubState, repo: str, number: int, in_reply_to: int, login: str, body: str, *, association: str = "NONE"
) -> Json:
    """Someone replies in the thread ``in_reply_to`` starts; the comment as GitHub would serve it."""
    comments = fake.review_comments.setdefault((repo, number), [])
    root = next(c for c in comments if c["id"] == in_reply_to)
    entry = {
        "id": fake.next_id(),
        "pull_request_review_id": None,
        "path": root["path"],
        "line": root.get("line"),
        "side": root.get("side", "RIGHT"),
        "body": body,
        "commit_id": root.get("commit_id"),
        "in_reply_to_id": in_reply_to,
        "user": user_json(login),
        "author_association": association,
        "created_at": iso(fake.clock()),
    }
    comments.append(entry)
    return _comment_json(fake, repo, number, entry)


async def list_review_comments(gh: GitHubState, request: web.Request) -> web.Response:
    pull = pull_for(gh, request)
    entries = gh.review_comments.get((pull.repo, pull.number), [])
    return page(request, [_comment_json(gh, pull.repo, pull.number, e) for e in entries])


async def reply(gh: GitHubState, request: web.Request) -> web.Response:
    pull = pull_for(gh, request)
    data = await read_body(request)
    if not isinstance(data.get("body"), str) or not data["body"]:
        raise ApiError(
            422,
            "Validation Failed",
            errors=[{"resource": "PullRequestReviewComment", "code": "missing_field", "field": "body"}],
        )
    root_id = int(request.match_info["comment_id"])
    comments = gh.review_comments.setdefault((pull.repo, pull.number), [])
    root = next((c for c in comments if c["id"] == root_id), None)
    if root is None:
        raise ApiError(404, "Not Found")
    if root.get("in_reply_to_id"):
        raise ApiError(422, "Validation Failed", errors=["replies to replies are not supported"])
    entry = {
        "id": gh.next_id(),
        "pull_request_review_id": None,
        "path": root["path"],
        "line": root.get("line"),
        "side": root.get("side", "RIGHT"),
        "body": data["body"],
        "commit_id": root.get("commit_id"),
        "in_reply_to_id": root_id,
        "user": user_json(actor(gh.app_slug, request[AUTH])),
        "author_association": "NONE",
        "created_at": iso(gh.clock()),
    }
    comments.append(entry)
    gh.counters["review_replies_created"] += 1
    return web.json_response(_comment_json(gh, pull.repo, pull.number, entry), status=201)


ROUTES = [
    ("GET", REPO_PATH + r"/pulls/{number:\d+}/comments", list_review_comments),
    ("POST", REPO_PATH + r"/pulls/{number:\d+}/comments/{comment_id:\d+}/replies", reply),
]
