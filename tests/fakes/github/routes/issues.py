"""A pull request's conversation: issue comments, and reactions to them (and to review comments: made, listed).

GitHub sends no webhook for a reaction: the app reads them (``GET /pulls/comments/{id}/reactions``). Tests arrange a
person's reaction with ``add_reaction``."""

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
    reaction, created = add_reaction(gh, comment_id, actor(gh.app_slug, request[AUTH]), content)
    return web.json_response(reaction, status=201 if created else 200)  # GitHub answers 200 for an existing one


def add_reaction(gh: GitHubState, comment_id: int, login: str, content: str) -> tuple[Json, bool]:
    """``login`` reacts with ``content`` on comment ``comment_id`` (GitHub keeps one reaction per kind and person):
    the reaction as GitHub's `reaction` schema has it, and whether it is new."""
    if content not in REACTIONS:
        raise ValueError(f"GitHub has no reaction {content!r}")
    reactions = gh.reactions.setdefault(comment_id, [])
    for reaction in reactions:
        if reaction["content"] == content and reaction["user"]["login"] == login:
            return reaction, False
    reaction_id = gh.next_id()  # past 2**32, as every id the fake hands out
    reaction = {
        "id": reaction_id,
        "node_id": f"REA_{reaction_id}",
        "user": user_json(login),
        "content": content,
        "created_at": iso(gh.clock()),
    }
    reactions.append(reaction)
    return reaction, True


async def list_review_comment_reactions(gh: GitHubState, request: web.Request) -> web.Response:
    """A review comment's reactions, oldest first, paginated; ``content`` keeps one kind. A comment of another
    kind, or of another repository, is a 404; an unknown ``content`` is GitHub's 422."""
    repo = repo_for(gh, request)
    comment_id = int(request.match_info["comment_id"])
    if not any(
        c["id"] == comment_id for (name, _), cs in gh.review_comments.items() if name == repo.full_name for c in cs
    ):
        raise ApiError(404, "Not Found")
    content = request.query.get("content")
    if content is not None and content not in REACTIONS:
        raise ApiError(
            422, "Validation Failed", errors=[{"resource": "Reaction", "code": "invalid", "field": "content"}]
        )
    reactions = [r for r in gh.reactions.get(comment_id, []) if content is None or r["content"] == content]
    return page(request, reactions)


ROUTES = [
    ("GET", REPO_PATH + r"/issues/{number:\d+}/comments", list_issue_comments),
    ("POST", REPO_PATH + r"/issues/{number:\d+}/comments", create_issue_comment),
    ("POST", REPO_PATH + r"/issues/comments/{comment_id:\d+}/reactions", create_reaction),
    ("POST", REPO_PATH + r"/pulls/comments/{comment_id:\d+}/reactions", create_review_comment_reaction),
    ("GET", REPO_PATH + r"/pulls/comments/{comment_id:\d+}/reactions", list_review_comment_reactions),
]
