"""Check runs: listing a commit's, creating one, reading and updating it (never taken back to an earlier status)."""

from __future__ import annotations

import json

from aiohttp import web

from tests.fakes.github.api import REPO_PATH, ApiError, page, read_body
from tests.fakes.github.auth import repo_for
from tests.fakes.github.shapes import Json, iso
from tests.fakes.github.state import GitHubState

CHECK_STATUSES = {"queued", "in_progress", "completed", "waiting", "requested", "pending"}


async def list_check_runs(gh: GitHubState, request: web.Request) -> web.Response:
    repo = repo_for(gh, request)
    sha = repo.resolve(request.match_info["ref"])
    runs = sorted(gh.check_runs_for(repo.full_name, sha), key=lambda run: -run["id"])
    q = request.query
    if "check_name" in q:
        runs = [run for run in runs if run["name"] == q["check_name"]]
    if "app_id" in q:
        runs = [run for run in runs if str(run["app"]["id"]) == q["app_id"]]
    if "status" in q:
        runs = [run for run in runs if run["status"] == q["status"]]
    if q.get("filter", "latest") == "latest":
        seen: set[str] = set()
        runs = [run for run in runs if not (run["name"] in seen or seen.add(run["name"]))]
    total = len(runs)
    return page(request, runs, lambda chunk: {"total_count": total, "check_runs": chunk})


async def create_check_run(gh: GitHubState, request: web.Request) -> web.Response:
    repo = repo_for(gh, request)
    data = await read_body(request)
    for key in ("name", "head_sha"):
        if not data.get(key):
            raise ApiError(422, f'Invalid request.\n\n"{key}" wasn\'t supplied.')
    if data["head_sha"] not in repo.parents:
        raise ApiError(422, "Unprocessable Entity", errors=[f"No commit found for SHA: {data['head_sha']}"])
    run_id = gh.next_id()
    run: Json = {
        "id": run_id,
        "node_id": f"CR_{run_id}",
        "head_sha": data["head_sha"],
        "name": data["name"],
        "external_id": data.get("external_id", ""),
        "details_url": data.get("details_url"),
        "html_url": f"https://github.com/{repo.full_name}/runs/{run_id}",
        "status": "queued",
        "conclusion": None,
        "started_at": data.get("started_at", iso(gh.clock())),
        "completed_at": None,
        "url": f"https://api.github.com/repos/{repo.full_name}/check-runs/{run_id}",
        "output": {
            "title": None,
            "summary": None,
            "text": None,
            "annotations_count": 0,
            "annotations_url": f"https://api.github.com/repos/{repo.full_name}/check-runs/{run_id}/annotations",
        },
        "check_suite": {"id": gh.next_id()},
        "app": gh.app_json(),
        "pull_requests": [],
    }
    apply_check_run_update(gh, run, {k: v for k, v in data.items() if k not in ("name", "head_sha")})
    gh.check_runs[run_id] = run
    gh.check_run_repo[run_id] = repo.full_name
    gh.counters["check_runs_created"] += 1
    return web.json_response(run, status=201)


def check_run_in(gh: GitHubState, request: web.Request) -> Json:
    repo = repo_for(gh, request)
    run_id = int(request.match_info["run_id"])
    if gh.check_run_repo.get(run_id) != repo.full_name:
        raise ApiError(404, "Not Found")
    return gh.check_runs[run_id]


async def get_check_run(gh: GitHubState, request: web.Request) -> web.Response:
    return web.json_response(check_run_in(gh, request))


async def update_check_run(gh: GitHubState, request: web.Request) -> web.Response:
    run = check_run_in(gh, request)
    data = await read_body(request)
    updated = json.loads(json.dumps(run))
    apply_check_run_update(gh, updated, data)  # validate on a copy: a 422 changes nothing
    back = {"completed": ("queued", "in_progress"), "in_progress": ("queued",)}.get(run["status"], ())
    if updated["status"] in back:
        # GitHub does not reliably take a run back (a completed run reopened, one in progress queued again):
        # the fake never does, and keeps the attempt for tests to see.
        gh.check_run_regressions.append((run["id"], run["status"], updated["status"]))
        updated.update(status=run["status"], conclusion=run["conclusion"], completed_at=run["completed_at"])
    run.update(updated)
    return web.json_response(run)


def apply_check_run_update(gh: GitHubState, run: Json, data: Json) -> None:
    status = data.get("status", run["status"])
    conclusion = data.get("conclusion", run["conclusion"] if "status" not in data else None)
    if data.get("conclusion"):
        status = "completed"
    if status not in CHECK_STATUSES:
        raise ApiError(422, "Unprocessable Entity", errors=[f"Invalid status: {status}"])
    if status == "completed" and not conclusion:
        raise ApiError(422, "Unprocessable Entity", errors=["Conclusion is required when status is completed"])
    for key in ("name", "details_url", "external_id", "started_at"):
        if key in data:
            run[key] = data[key]
    run["status"], run["conclusion"] = status, conclusion if status == "completed" else None
    if status == "completed":
        run["completed_at"] = data.get("completed_at") or run["completed_at"] or iso(gh.clock())
    if "output" in data:
        output = data["output"] or {}
        if not output.get("title") or not output.get("summary"):
            raise ApiError(422, "Unprocessable Entity", errors=["output requires title and summary"])
        run["output"].update({k: output.get(k) for k in ("title", "summary", "text")})


ROUTES = [
    ("GET", REPO_PATH + "/commits/{ref}/check-runs", list_check_runs),
    ("POST", REPO_PATH + "/check-runs", create_check_run),
    ("GET", REPO_PATH + r"/check-runs/{run_id:\d+}", get_check_run),
    ("PATCH", REPO_PATH + r"/check-runs/{run_id:\d+}", update_check_run),
]
