"""The app and its installations: the app itself, the manifest flow that creates it, installation tokens, what an
installation sees and which installation holds a repository; and the person a personal token belongs to."""

from __future__ import annotations

import json
import re
import secrets

import yarl
from aiohttp import web

from tests.fakes.github.api import AUTH, ApiError, page, read_body
from tests.fakes.github.auth import require_installation, require_jwt, require_user
from tests.fakes.github.model import Installation, IssuedToken
from tests.fakes.github.permissions import token_covers
from tests.fakes.github.routes.pulls import repo_json
from tests.fakes.github.shapes import Json, iso, user_json
from tests.fakes.github.state import GitHubState
from tests.fakes.keys import generate_key_pair

MANIFEST_CODE_LIFETIME = 3600.0  # a manifest flow's temporary code works once, within an hour


async def get_app(gh: GitHubState, request: web.Request) -> web.Response:
    require_jwt(request)
    return web.json_response(gh.app_json())


async def new_app_page(gh: GitHubState, request: web.Request) -> web.Response:
    """The user submits the manifest form and presses "Create GitHub App": back to redirect_url with a code."""
    try:
        manifest = json.loads(str((await request.post()).get("manifest", "")))
    except json.JSONDecodeError as exc:
        raise ApiError(422, "Invalid manifest") from exc
    if not isinstance(manifest, dict) or not manifest.get("url") or not manifest.get("redirect_url"):
        raise ApiError(422, "Invalid manifest: url and redirect_url are required")
    code = gh.register_manifest_code(manifest, owner=request.match_info.get("org"))
    query = {"code": code, **({"state": request.query["state"]} if "state" in request.query else {})}
    location = str(yarl.URL(manifest["redirect_url"]).update_query(query))
    return web.Response(status=302, headers={"Location": location})


async def convert_manifest(gh: GitHubState, request: web.Request) -> web.Response:
    """Unknown, used and expired codes are all 404, as on GitHub; a good one makes this fake the new App."""
    pending = gh.manifest_codes.pop(request.match_info["code"], None)
    if pending is None or gh.clock() - pending.created_at >= MANIFEST_CODE_LIFETIME:
        raise ApiError(404, "Not Found")
    manifest, pair = pending.manifest, generate_key_pair()
    gh.app_id, gh.public_key, gh.private_key = gh.next_id(), pair.public_pem, pair.private_pem
    gh.app_name = str(manifest.get("name") or "app")
    gh.app_slug = re.sub(r"[^a-z0-9]+", "-", gh.app_name.lower()).strip("-")
    gh.app_owner = pending.owner
    gh.webhook_secret = secrets.token_hex(20)
    gh.webhook_url = (manifest.get("hook_attributes") or {}).get("url")
    now = iso(gh.clock())
    return web.json_response(
        {
            "id": gh.app_id,
            "slug": gh.app_slug,
            "node_id": f"A_{gh.app_id}",
            "name": gh.app_name,
            "owner": user_json(gh.app_owner),
            "description": manifest.get("description", ""),
            "external_url": manifest["url"],
            "html_url": f"{gh.base_url or 'https://github.com'}/apps/{gh.app_slug}",
            "created_at": now,
            "updated_at": now,
            "permissions": manifest.get("default_permissions", {}),
            "events": manifest.get("default_events", []),
            "installations_count": 0,
            "client_id": "Iv1." + secrets.token_hex(8),
            "client_secret": secrets.token_hex(20),
            "webhook_secret": gh.webhook_secret,
            "pem": gh.private_key,
        },
        status=201,
    )


async def create_token(gh: GitHubState, request: web.Request) -> web.Response:
    require_jwt(request)
    inst = gh.installations.get(int(request.match_info["installation_id"]))
    if inst is None:
        raise ApiError(404, "Not Found")
    if inst.suspended:
        raise ApiError(403, "This installation has been suspended")
    body = await read_body(request) if request.can_read_body else {}
    own = {r.full_name.split("/", 1)[1]: r for r in gh.repos.values() if r.installation_id == inst.id}
    names, ids = body.get("repositories"), body.get("repository_ids")
    chosen: frozenset[str] | None = None
    if names is not None or ids is not None:
        by_id = {r.id: name for name, r in own.items()}
        wanted = [*(names or []), *(by_id.get(i, f"#{i}") for i in ids or [])]
        if not all(isinstance(n, str) and n in own for n in wanted):
            raise ApiError(
                422,
                "There is at least one repository that does not exist or is not accessible to the parent installation.",
            )
        chosen = frozenset(wanted)
    asked = body.get("permissions")
    permissions = dict(APP_PERMISSIONS) if asked is None else _granted(asked)
    value = "ghs_" + secrets.token_hex(18)
    expires_at = int(gh.clock() + gh.token_lifetime)
    gh.tokens[value] = IssuedToken(
        installation_id=inst.id,
        expires_at=expires_at,
        repositories=chosen,
        permissions=tuple(sorted(permissions.items())),
    )
    gh.issued_tokens.append(value)
    gh.token_requests.append(body)
    gh.counters["access_tokens"] += 1
    gh.counters[f"access_tokens:{inst.id}"] += 1
    answer: Json = {
        "token": value,
        "expires_at": iso(expires_at),
        "permissions": permissions,
        "repository_selection": "selected",
    }
    if chosen is not None:
        answer["repositories"] = [repo_json(own[n]) for n in sorted(chosen)]
    return web.json_response(answer, status=201)


# What the App was granted (app-manifest.yml's default_permissions): a token may ask for these, or less.
APP_PERMISSIONS = {
    "pull_requests": "write",
    "checks": "write",
    "contents": "read",
    "issues": "write",
    "metadata": "read",
}
_LEVELS = {"read": 1, "write": 2}


def _granted(asked: object) -> dict[str, str]:
    if not isinstance(asked, dict) or any(
        _LEVELS.get(str(level), 9) > _LEVELS.get(APP_PERMISSIONS.get(str(name), ""), 0) for name, level in asked.items()
    ):
        raise ApiError(422, "The permissions requested are not granted to this installation.")
    return {str(k): str(v) for k, v in asked.items()}


def installation_json(gh: GitHubState, inst: Installation) -> Json:
    api = "https://api.github.com"
    return {
        "id": inst.id,
        "account": {**user_json(inst.account), "type": "Organization"},
        "app_id": gh.app_id,
        "app_slug": gh.app_slug,
        "target_type": "Organization",
        "repository_selection": "selected",
        "access_tokens_url": f"{api}/app/installations/{inst.id}/access_tokens",
        "repositories_url": f"{api}/installation/repositories",
        "html_url": f"https://github.com/organizations/{inst.account}/settings/installations/{inst.id}",
        "target_id": user_json(inst.account)["id"],
        "permissions": {"pull_requests": "write", "checks": "write", "contents": "read", "issues": "write"},
        "events": ["pull_request", "issue_comment", "check_run"],
        "single_file_name": None,
        "created_at": iso(inst.created_at),
        "updated_at": iso(inst.created_at),
        "suspended_by": user_json("site-admin") if inst.suspended else None,
        "suspended_at": iso(gh.clock()) if inst.suspended else None,
    }


async def list_installations(gh: GitHubState, request: web.Request) -> web.Response:
    require_jwt(request)
    return page(
        request, [installation_json(gh, inst) for inst in sorted(gh.installations.values(), key=lambda i: i.id)]
    )


async def get_installation(gh: GitHubState, request: web.Request) -> web.Response:
    require_jwt(request)
    inst = gh.installations.get(int(request.match_info["installation_id"]))
    if inst is None:
        raise ApiError(404, "Not Found")
    return web.json_response(installation_json(gh, inst))


async def list_installation_repos(gh: GitHubState, request: web.Request) -> web.Response:
    installation_id = require_installation(gh, request[AUTH])
    repos = [
        repo_json(r)
        for r in sorted(gh.repos.values(), key=lambda r: r.id)
        if r.installation_id == installation_id and token_covers(request[AUTH], r)
    ]
    total = len(repos)
    return page(request, repos, lambda chunk: {"total_count": total, "repositories": chunk})


async def get_repo_installation(gh: GitHubState, request: web.Request) -> web.Response:
    """The App's installation that holds the repository (app JWT): 404 when none of its installations does."""
    require_jwt(request)
    repo = gh.repos.get(f"{request.match_info['owner']}/{request.match_info['repo']}")
    inst = gh.installations.get(repo.installation_id) if repo is not None else None
    if inst is None:
        raise ApiError(404, "Not Found")
    return web.json_response(installation_json(gh, inst))


async def get_user(gh: GitHubState, request: web.Request) -> web.Response:
    """The person a token belongs to (GitHub's `private-user`); an installation's token is not a person's: 403."""
    if request[AUTH].kind == "token":
        raise ApiError(403, "Resource not accessible by integration")
    login = require_user(request[AUTH])
    public = user_json(login)
    created = iso(0)
    return web.json_response(
        {
            **public,
            "name": None,
            "company": None,
            "blog": "",
            "location": None,
            "email": None,
            "hireable": None,
            "bio": None,
            "public_repos": 0,
            "public_gists": 0,
            "followers": 0,
            "following": 0,
            "created_at": created,
            "updated_at": created,
            "private_gists": 0,
            "total_private_repos": 0,
            "owned_private_repos": 0,
            "disk_usage": 0,
            "collaborators": 0,
            "two_factor_authentication": True,
        }
    )


ROUTES = [
    ("GET", "/app", get_app),
    ("POST", "/app-manifests/{code}/conversions", convert_manifest),
    ("POST", "/settings/apps/new", new_app_page),  # github.com's pages, the part the flow needs
    ("POST", "/organizations/{org}/settings/apps/new", new_app_page),
    ("POST", "/app/installations/{installation_id}/access_tokens", create_token),
    ("GET", "/app/installations", list_installations),
    ("GET", "/app/installations/{installation_id}", get_installation),
    ("GET", "/installation/repositories", list_installation_repos),
    ("GET", "/repos/{owner}/{repo}/installation", get_repo_installation),
    ("GET", "/user", get_user),
]
