"""Pull request reviews and their comments: listing reviews, and creating one with comments anchored on the diff."""

from __future__ import annotations

from aiohttp import web

from tests.fakes.github.api import AUTH, REPO_PATH, ApiError, page, read_body
from tests.fakes.github.auth import pull_for
from tests.fakes.github.diffs import commentable_lines, hunk_lines
from tests.fakes.github.permissions import actor
from tests.fakes.github.shapes import Json, user_json
from tests.fakes.github.state import GitHubState

REVIEW_EVENTS = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED"}


async def list_reviews(gh: GitHubState, request: web.Request) -> web.Response:
    pull = pull_for(gh, request)
    return page(request, gh.reviews.get((pull.repo, pull.number), []))


async def create_review(gh: GitHubState, request: web.Request) -> web.Response:
    pull = pull_for(gh, request)
    data = await read_body(request)
    commit_id = data.get("commit_id") or pull.head_sha
    if commit_id not in pull.files_by_sha:
        raise ApiError(422, "Unprocessable Entity", errors=[f"No commit found for SHA: {commit_id}"])
    event = data.get("event")
    if event is not None and event not in REVIEW_EVENTS:
        raise ApiError(422, "Unprocessable Entity", errors=[f"Unknown review event: {event}"])
    body = data.get("body") or ""
    comments = data.get("comments") or []
    if event == "REQUEST_CHANGES" and not body:
        raise ApiError(422, "Unprocessable Entity", errors=["Body is required for REQUEST_CHANGES"])
    if event == "COMMENT" and not body and not comments:
        raise ApiError(422, "Unprocessable Entity", errors=["Body is required for COMMENT"])
    files = {f["filename"]: f for f in pull.files_by_sha[commit_id]}
    for comment in comments:
        check_anchor(comment, files)
    bot = actor(gh.app_slug, request[AUTH])  # the App's bot, or the person whose token it is
    review = gh.review_json(pull.repo, pull.number, bot, body, REVIEW_EVENTS.get(event or "", "PENDING"), commit_id)
    gh.reviews.setdefault((pull.repo, pull.number), []).append(review)
    for comment in comments:
        comment_id = gh.next_id()
        gh.review_comments.setdefault((pull.repo, pull.number), []).append(
            {
                "id": comment_id,
                "pull_request_review_id": review["id"],
                "path": comment["path"],
                "line": comment["line"],
                "side": comment.get("side", "RIGHT"),
                "start_line": comment.get("start_line"),
                "start_side": comment.get("start_side") if comment.get("start_line") else None,
                "body": comment["body"],
                "commit_id": commit_id,
                "user": user_json(bot),
            }
        )
    gh.counters["reviews_created"] += 1
    return web.json_response(review)


def check_anchor(comment: Json, files: dict[str, Json]) -> None:
    def invalid(why: str) -> ApiError:
        return ApiError(422, "Unprocessable Entity", errors=[why])

    if not isinstance(comment, dict) or not comment.get("body") or not comment.get("path"):
        raise invalid("Pull request review thread path and body are required")
    entry = files.get(comment["path"])
    if entry is None:
        raise invalid("Path could not be resolved")
    if not isinstance(comment.get("line"), int):
        raise invalid("Pull request review thread line must be an integer")
    if "patch" not in entry:
        raise invalid("Line could not be resolved")
    left, right = commentable_lines(entry["patch"])
    side = comment.get("side", "RIGHT")
    if side not in ("LEFT", "RIGHT"):
        raise invalid("Pull request review thread side must be LEFT or RIGHT")
    lines = right if side == "RIGHT" else left
    if comment["line"] not in lines:
        raise invalid("Pull request review thread line must be part of the diff")
    start = comment.get("start_line")
    if start is None:
        return
    # A multi-line comment: both ends in one hunk, the start before the line (GitHub refuses start == line).
    start_side = comment.get("start_side", side)
    if start_side not in ("LEFT", "RIGHT"):
        raise invalid("Pull request review thread start side must be LEFT or RIGHT")
    if not isinstance(start, int) or (start_side == side and start >= comment["line"]):
        raise invalid("Pull request review thread start line must precede the end line.")
    for hunk_left, hunk_right in hunk_lines(entry["patch"]):
        if comment["line"] in (hunk_right if side == "RIGHT" else hunk_left):
            if start in (hunk_right if start_side == "RIGHT" else hunk_left):
                return
            break
    raise invalid("Pull request review thread start line must be part of the same hunk as the line.")


ROUTES = [
    ("GET", REPO_PATH + r"/pulls/{number:\d+}/reviews", list_reviews),
    ("POST", REPO_PATH + r"/pulls/{number:\d+}/reviews", create_review),
]
