"""Webhook routing: one gidgethub router per concern; handlers only decide, they never call GitHub."""

from __future__ import annotations

from dataclasses import dataclass, field

from gidgethub import routing, sansio

from reviewer_app.core.admission import Decision, Guard, Ignore
from reviewer_app.core.events import decide_comment, decide_installation, decide_pull_request, decide_rerun
from reviewer_app.core.payload import require_shape
from reviewer_app.core.replies import decide_review_comment


@dataclass
class Decisions:
    """What the app knows when deciding (its identity, its limits), and what the handlers decided."""

    debounce_seconds: float = 0.0
    app_id: int | None = None
    app_slug: str = ""
    guard: Guard | None = None
    rerun_job_pull: tuple[int, int] | None = None  # (repository id, PR number) of a fork's rerequested run or suite
    items: list[Decision] = field(default_factory=list)

    @property
    def bot_login(self) -> str:
        return f"{self.app_slug}[bot]" if self.app_slug else ""


pull_requests = routing.Router()


@pull_requests.register("pull_request")
async def on_pull_request(event: sansio.Event, decisions: Decisions) -> None:
    require_shape(event.event, event.data)
    action = event.data.get("action")
    if not isinstance(action, str):
        decisions.items.append(Ignore("pull_request event without an action"))
        return
    decisions.items.append(
        decide_pull_request(
            action,
            event.data,
            debounce_seconds=decisions.debounce_seconds,
            guard=decisions.guard,
            delivery_id=str(event.delivery_id),
        )
    )


comments = routing.Router()


@comments.register("issue_comment")
async def on_issue_comment(event: sansio.Event, decisions: Decisions) -> None:
    require_shape(event.event, event.data)
    decisions.items.append(
        decide_comment(
            str(event.data.get("action")),
            event.data,
            app_slug=decisions.app_slug,
            bot_login=decisions.bot_login,
            guard=decisions.guard,
            delivery_id=str(event.delivery_id),
        )
    )


@comments.register("pull_request_review_comment")
async def on_review_comment(event: sansio.Event, decisions: Decisions) -> None:
    require_shape(event.event, event.data)
    decisions.items.append(
        decide_review_comment(
            str(event.data.get("action")),
            event.data,
            bot_login=decisions.bot_login,
            guard=decisions.guard,
            delivery_id=str(event.delivery_id),
        )
    )


check_runs = routing.Router()


@check_runs.register("check_run")
@check_runs.register("check_suite")
async def on_rerequested(event: sansio.Event, decisions: Decisions) -> None:
    require_shape(event.event, event.data)
    decisions.items.append(
        decide_rerun(
            event.event,
            str(event.data.get("action")),
            event.data,
            app_id=decisions.app_id,
            delivery_id=str(event.delivery_id),
            job_pull=decisions.rerun_job_pull,
            guard=decisions.guard,
        )
    )


installations = routing.Router()


@installations.register("installation")
@installations.register("installation_repositories")
async def on_installation(event: sansio.Event, decisions: Decisions) -> None:
    require_shape(event.event, event.data)
    decisions.items.append(decide_installation(event.event, str(event.data.get("action")), event.data))


pings = routing.Router()


@pings.register("ping")
async def on_ping(event: sansio.Event, decisions: Decisions) -> None:
    decisions.items.append(Ignore("pong"))


def make_router() -> routing.Router:
    return routing.Router(pull_requests, comments, check_runs, installations, pings)
