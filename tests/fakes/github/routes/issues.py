"""A pull request's conversation: issue comments, and reactions to them (and to review comments)."""

from __future__ import annotations

from aiohttp import web

from tests.fakes.github.api import AUTH, REPO_PATH, ApiError, page, read_body
from tests.fakes.github.auth import pull_for, repo_for
from tests.fakes.github.permissions import actor
from tests.fakes.github.shapes import Json, iso, user_json
from tests.fakes.github.state import GitHubState

REACTIONS = {"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}


async def list_issue_comments(gh: GitHubState, request: web.Request) -> web.Response:
    pull = pull_for(gh, request)
    return page(request, gh.issue_comments.get((pull.repo, pull.number), []))


async def create_issue_comment(gh: GitHubState, request: web.Request) -> web.Response:
    pull = pull_for(gh, request)
    data = await read_body(request)
    if not data.get("body"):
        raise ApiError(
            422,
            "Validation Failed",
            errors=[{"resource": "IssueComment", "code": "missing_field", "field": "body"}],
        )
    comment = gh.comment_json(pull.repo, pull.number, actor(gh.app_slug, request[AUTH]), data["body"])
    gh.issue_comments.setdefault((pull.repo, pull.number), []).append(comment)
    return web.json_response(comment, status=201)


async def create_reaction(gh: GitHubState, request: web.Request) -> web.Response:
    return await _react(gh, request, gh.issue_comments)


async def create_review_comment_reaction(gh: GitHubState, request: web.Request) -> web.Response:
    """A reaction on a review comment (``/pulls/comments/{id}/reactions``): a comment of another kind is a 404."""
    return await _react(gh, request, gh.review_comments)


async def _react(gh: GitHubState, request: web.Request, kind: dict[tuple[str, int], list[Json]]) -> web.Response:
    repo = repo_for(gh, request)
    comment_id = int(request.match_info["comment_id"])
    exists = any(
        c["id"] == comment_id for (name, _), comments in kind.items() if name == repo.full_name for c in comments
    )
    if not exists:
        raise ApiError(404, "Not Found")
    content = (await read_body(request)).get("content")
    if content not in REACTIONS:
        raise ApiError(
            422, "Validation Failed", errors=[{"resource": "Reaction", "code": "invalid", "field": "content"}]
        )
    bot = actor(gh.app_slug, request[AUTH])
    reactions = gh.reactions.setdefault(comment_id, [])
    for reaction in reactions:
        if reaction["content"] == content and reaction["user"]["login"] == bot:
            return web.json_response(reaction, status=200)  # GitHub answers 200 for an existing one
    reaction = {
        "id": gh.next_id(),
        "node_id": "REA_x",
        "user": user_json(bot),
        "content": content,
        "created_at": iso(gh.clock()),
    }
    reactions.append(reaction)
    return web.json_response(reaction, status=201)


ROUTES = [
    ("GET", REPO_PATH + r"/issues/{number:\d+}/comments", list_issue_comments),
    ("POST", REPO_PATH + r"/issues/{number:\d+}/comments", create_issue_comment),
    ("POST", REPO_PATH + r"/issues/comments/{comment_id:\d+}/reactions", create_reaction),
    ("POST", REPO_PATH + r"/pulls/comments/{comment_id:\d+}/reactions", create_review_comment_reaction),
]
