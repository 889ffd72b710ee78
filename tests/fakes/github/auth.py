"""Who is calling and what they may touch: the API's headers, app JWTs, installation tokens and a person's tokens, and
the guards every route calls before it reads or writes."""

from __future__ import annotations

import re

import jwt
from aiohttp import web

from tests.fakes.github.api import API_MEDIA_TYPE, API_VERSIONS, AUTH, ApiError, AuthInfo
from tests.fakes.github.model import Pull, Repo
from tests.fakes.github.permissions import ENDPOINT_PERMISSIONS, has_permission, sees
from tests.fakes.github.state import GitHubState

JWT_MAX_LIFETIME = 600 + 60  # GitHub caps app JWTs at 10 minutes; a little slack for clock drift


def check_api_headers(gh: GitHubState, request: web.Request) -> ApiError | None:
    """The API's media type and version headers are present (github.com's web pages need neither)."""
    if request.path.endswith("/settings/apps/new"):
        return None
    if request.headers.get("Accept", "").split(";")[0].strip().lower() != API_MEDIA_TYPE:
        gh.counters["bad_api_headers"] += 1
        return ApiError(415, f"Unsupported 'Accept' header: use {API_MEDIA_TYPE}")
    version = request.headers.get("X-GitHub-Api-Version")
    if version not in API_VERSIONS:
        gh.counters["bad_api_headers"] += 1
        return ApiError(400, f"X-GitHub-Api-Version {version!r} is not supported")
    return None


def identify(gh: GitHubState, request: web.Request) -> AuthInfo:
    scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
    if not credential:
        return AuthInfo("none")
    if scheme.lower() == "bearer" and credential.count(".") == 2:
        return AuthInfo("jwt" if _verify_jwt(gh, credential) else "bad_jwt")
    token = gh.tokens.get(credential)
    if token is None:
        gh.counters["bad_credentials"] += 1
        return AuthInfo("bad_token")
    expired = gh.clock() >= token.expires_at
    if expired:
        gh.counters["expired_token_requests"] += 1
    return AuthInfo(
        "token" if token.user is None else "user",
        installation_id=token.installation_id,
        expired=expired,
        repositories=token.repositories,
        permissions=token.permissions,
        user=token.user,
    )


def _verify_jwt(gh: GitHubState, token: str) -> bool:
    try:
        claims = jwt.decode(token, gh.public_key, algorithms=["RS256"], options={"require": ["exp", "iat", "iss"]})
    except jwt.PyJWTError:
        return False
    return str(claims["iss"]) == str(gh.app_id) and claims["exp"] - claims["iat"] <= JWT_MAX_LIFETIME


def require_jwt(request: web.Request) -> None:
    if request[AUTH].kind != "jwt":
        raise ApiError(401, "A JSON web token could not be decoded")


def require_installation(gh: GitHubState, auth: AuthInfo) -> int:
    """The installation a good, unexpired token of a present, unsuspended installation speaks for."""
    if auth.kind != "token" or auth.expired or auth.installation_id not in gh.installations:
        raise ApiError(401, "Bad credentials")
    if gh.installations[auth.installation_id].suspended:
        raise ApiError(403, "This installation has been suspended")
    return auth.installation_id


def require_user(auth: AuthInfo) -> str:
    """The person a good, unexpired token of theirs acts as."""
    if auth.kind != "user" or auth.expired or auth.user is None:
        raise ApiError(401, "Bad credentials")
    return auth.user


def repo_for(gh: GitHubState, request: web.Request) -> Repo:
    auth: AuthInfo = request[AUTH]
    if auth.kind == "jwt":
        raise ApiError(403, "Resource not accessible by integration")
    if auth.kind == "user":
        require_user(auth)
    else:
        require_installation(gh, auth)
    full_name = f"{request.match_info['owner']}/{request.match_info['repo']}"
    repo = gh.repos.get(full_name)
    if repo is None or not sees(auth, repo):
        raise ApiError(404, "Not Found")  # GitHub does not say a repository exists that the token cannot see
    require_permission(auth, request.method, request.match_info.route.resource)
    if repo.archived and request.method in ("POST", "PATCH", "PUT", "DELETE"):
        raise ApiError(403, "Repository was archived so is read-only.")
    return repo


def pull_for(gh: GitHubState, request: web.Request) -> Pull:
    repo = repo_for(gh, request)
    pull = gh.pulls.get((repo.full_name, int(request.match_info["number"])))
    if pull is None:
        raise ApiError(404, "Not Found")
    return pull


def require_permission(auth: AuthInfo, method: str, resource: object) -> None:
    """403 as GitHub answers when the token lacks what the endpoint needs (tests/fakes/github/permissions.py)."""
    canonical = re.sub(r"\{(\w+):[^}]+\}", r"{\1}", getattr(resource, "canonical", "")).rstrip("/")
    needed = ENDPOINT_PERMISSIONS.get((method, canonical))
    if needed is None:
        raise ApiError(500, f"the fake knows no permission for {method} {canonical}: add it to permissions.py")
    if not has_permission(auth, needed):
        who = "personal access token" if auth.kind == "user" else "integration"
        raise ApiError(403, f"Resource not accessible by {who}")
