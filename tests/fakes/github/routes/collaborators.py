"""A collaborator's permission on a repository."""

from __future__ import annotations

from aiohttp import web

from tests.fakes.github.api import REPO_PATH
from tests.fakes.github.auth import repo_for
from tests.fakes.github.shapes import user_json
from tests.fakes.github.state import GitHubState


async def permission(gh: GitHubState, request: web.Request) -> web.Response:
    repo = repo_for(gh, request)
    user = request.match_info["user"]
    owner = repo.full_name.split("/")[0]
    permission = repo.permissions.get(user, "admin" if user == owner else "none")
    role = {"admin": "admin", "write": "write", "read": "read", "none": "none"}.get(permission, permission)
    legacy = {"maintain": "write", "triage": "read"}.get(permission, permission)
    return web.json_response({"permission": legacy, "role_name": role, "user": {**user_json(user), "role_name": role}})


ROUTES = [
    ("GET", REPO_PATH + "/collaborators/{user}/permission", permission),
]
