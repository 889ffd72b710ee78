"""The app's webhook deliveries: the list GitHub keeps, and asking for one to be delivered again."""

from __future__ import annotations

import asyncio

from aiohttp import web

from tests.fakes.github.api import PER_PAGE_DEFAULT, ApiError, per_page
from tests.fakes.github.auth import require_jwt
from tests.fakes.github.state import GitHubState


async def list_deliveries(gh: GitHubState, request: web.Request) -> web.Response:
    require_jwt(request)
    try:
        size = per_page(request)
    except ValueError:
        size = PER_PAGE_DEFAULT
    newest_first = sorted(gh.deliveries, key=lambda d: d["id"], reverse=True)
    cursor = request.query.get("cursor")
    if cursor:
        below = int(cursor.removeprefix("v1_"))
        newest_first = [d for d in newest_first if d["id"] <= below]
    chunk, rest = newest_first[:size], newest_first[size:]
    headers = {}
    if rest:
        next_url = request.url.update_query(cursor=f"v1_{rest[0]['id']}")
        headers["Link"] = f'<{next_url}>; rel="next"'
    return web.json_response(chunk, headers=headers)


async def redeliver(gh: GitHubState, request: web.Request) -> web.Response:
    require_jwt(request)
    delivery_id = int(request.match_info["delivery_id"])
    original = next((d for d in gh.deliveries if d["id"] == delivery_id), None)
    if original is None:
        raise ApiError(404, "Not Found")
    gh.redelivery_requests.append(delivery_id)
    stored = gh.delivery_payloads.get(original["guid"])
    if stored is not None and gh.webhook_url is not None and gh.webhook_secret is not None:
        task = asyncio.create_task(gh.send_webhook(stored[0], stored[1], guid=original["guid"], redelivery=True))
        gh.background.add(task)
        task.add_done_callback(gh.background.discard)
    else:
        gh.add_delivery(
            original["event"],
            original["action"],
            guid=original["guid"],
            redelivery=True,
            installation_id=original["installation_id"],
            repository_id=original["repository_id"],
        )
    return web.json_response({}, status=202)


ROUTES = [
    ("GET", "/app/hook/deliveries", list_deliveries),
    ("POST", "/app/hook/deliveries/{delivery_id}/attempts", redeliver),
]
