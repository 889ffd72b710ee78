"""POST /api/github/webhooks: verify, decide, commit, then answer; nothing slow happens in the request."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import orjson
from aiohttp import web
from gidgethub import BadRequest, routing, sansio

from reviewer_app.core.admission import Enqueue, Guard, Ignore
from reviewer_app.core.events import rerun_job_id
from reviewer_app.core.payload import MalformedPayload
from reviewer_app.core.timestamps import replay_reason
from reviewer_app.metrics import Metrics
from reviewer_app.store.base import AdmitResult, Delivery, Store, StoreUnavailable
from reviewer_app.web.events import Decisions

log = logging.getLogger(__name__)


@dataclass
class Receiver:
    store: Store
    router: routing.Router
    secret: str | None  # None only with the explicit insecure development flag
    max_body_bytes: int
    max_attempts: int
    debounce_seconds: float = 0.0
    app_id: int | None = None
    app_slug: str = ""  # learned from GET /app once the worker side knows it; `/review` works without it
    guard: Guard | None = None
    clock: Callable[[], float] = time.time
    on_admitted: Callable[[AdmitResult], None] | None = None
    metrics: Metrics | None = None
    # Deliveries are remembered this long (REVIEWER_RETENTION_DAYS); an event older than that is a replay. 0: off.
    replay_window_seconds: float = 0.0
    body_timeout_seconds: float = 60.0  # a body sent slower than this is answered 408 (web/limits.py)

    async def handle(self, request: web.Request) -> web.Response:
        response = await self._receive(request)
        if self.metrics is not None:
            self.metrics.webhooks.labels(*_webhook_labels(request, response)).inc()
        return response

    async def _receive(self, request: web.Request) -> _Answer:
        if request.content_length is not None and request.content_length > self.max_body_bytes:
            return _answer(413, error=f"body larger than {self.max_body_bytes} bytes")
        try:
            async with asyncio.timeout(self.body_timeout_seconds):
                body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _answer(413, error=f"body larger than {self.max_body_bytes} bytes")
        except TimeoutError:
            log.warning(
                "webhook from %s: body not received within %.0f s (408)", request.remote, self.body_timeout_seconds
            )
            return _answer(408, error=f"body not received within {self.body_timeout_seconds:g} s")
        headers = {k.lower(): v for k, v in request.headers.items()}
        headers.pop("x-hub-signature", None)  # SHA-1 signatures are not accepted
        if self.secret is not None:
            problem = signature_problem(headers.get("x-hub-signature-256"), body, self.secret)
            if problem is not None:
                # One line, no traceback, nothing the sender wrote: an unverified request is noise, not news.
                log.warning("webhook from %s refused (401): %s", request.remote, problem)
                return _answer(401, error=problem)
        event_name = headers.get("x-github-event")
        delivery_id = headers.get("x-github-delivery")
        if not event_name or not delivery_id:
            return _answer(400, error="missing X-GitHub-Event or X-GitHub-Delivery header")
        if len(delivery_id) > 200:
            return _answer(400, error="X-GitHub-Delivery is too long")
        headers.setdefault("content-type", "application/json")
        try:
            if headers["content-type"].split(";")[0].strip().lower() == "application/json":
                # The common case, parsed directly (orjson: a third of json's time on a 30 KB body); the
                # signature was checked above.
                event = sansio.Event(orjson.loads(body), event=event_name, delivery_id=delivery_id)
            else:  # form-encoded payloads (a webhook setting GitHub offers): gidgethub decodes them
                headers.pop("x-hub-signature-256", None)
                event = sansio.Event.from_http(headers, body, secret=None)
        except (BadRequest, ValueError, UnicodeDecodeError):
            return _answer(400, error="body is not a JSON object")
        if not isinstance(event.data, dict):
            return _answer(400, error="body is not a JSON object")

        decisions = Decisions(
            debounce_seconds=self.debounce_seconds, app_id=self.app_id, app_slug=self.app_slug, guard=self.guard
        )
        try:
            decisions.rerun_job_pull = await self._rerun_job_pull(event)
        except StoreUnavailable as exc:
            log.error("delivery %s not admitted, answering 503: %s", delivery_id, exc)
            return _answer(503, error="the job could not be read; GitHub may redeliver this event")
        try:
            await self.router.dispatch(event, decisions)
        except MalformedPayload as exc:
            return _answer(400, error=str(exc))
        except (AttributeError, TypeError, KeyError, IndexError, ValueError):
            # A field of a type the decision code did not foresee (a string where an object belongs): a bug to fix
            # there, logged with its traceback, but no server error to the sender, which would only send it again.
            log.error(
                "delivery %s: a field of the %s payload has a type the decisions do not handle; answering 400",
                delivery_id,
                event_name,
                exc_info=True,
                extra={"delivery": delivery_id, "event": event_name},
            )
            return _answer(400, error="a payload field has an unexpected type")
        action = event.data.get("action") if isinstance(event.data.get("action"), str) else None
        if not decisions.items:
            decisions.items.append(Ignore(f"event {event_name!r} action {action!r} is not handled"))
        decision = decisions.items[0]
        replay = replay_reason(event_name, event.data, now=self.clock(), window_seconds=self.replay_window_seconds)
        if replay is not None and not isinstance(decision, Ignore):
            decision = Ignore(replay)
        delivery = Delivery(delivery_id=delivery_id, event=event_name, action=action)
        extra = {"delivery": delivery_id, "event": event_name, "action": action}
        if isinstance(decision, Enqueue):
            spec = decision.job
            extra.update(repo=spec.repo_full_name, pr=spec.pr_number, head_sha=spec.head_sha)
        if isinstance(decision, Ignore):
            log.info("delivery %s ignored: %s", delivery_id, decision.reason, extra=extra)
            return _answer(200, outcome="ignored", reason=decision.reason)
        problem = unstorable(decision) or unstorable(delivery)
        if problem is not None:  # the store would fail on it, and the answer would wrongly say the store is down
            log.warning("delivery %s refused (400): %s", delivery_id, problem, extra=extra)
            return _answer(400, error=f"the payload cannot be stored: {problem}")
        try:
            result = await self.store.admit(delivery, decision, now=self.clock(), max_attempts=self.max_attempts)
        except StoreUnavailable as exc:
            log.error("delivery %s not admitted, answering 503: %s", delivery_id, exc, extra=extra)
            return _answer(503, error="the job could not be stored; GitHub may redeliver this event")
        log.info(
            "delivery %s: %s job=%s superseded=%s cancelled=%s",
            delivery_id,
            result.outcome,
            result.job_id,
            list(result.superseded),
            list(result.cancelled),
            extra={**extra, "job_id": result.job_id},
        )
        if self.on_admitted is not None:
            self.on_admitted(result)
        return _answer(
            200 if result.outcome == "ignored" else 202,
            outcome=result.outcome,
            job_id=result.job_id,
            superseded=list(result.superseded),
            cancelled=list(result.cancelled),
            reason=result.reason or None,
        )

    async def _rerun_job_pull(self, event: sansio.Event) -> tuple[int, int] | None:
        """(repository id, PR number) of the job a rerequested check run or suite belongs to, read from the store, when
        the payload lists no pull request (a fork's): a read of our own rows, no GitHub call in the request. A check
        run names its job (``external_id``); a check suite is the app's on one commit, found by its head."""
        data = event.data
        node = data.get(event.event)
        if event.event not in ("check_run", "check_suite") or data.get("action") != "rerequested":
            return None
        if not isinstance(node, dict) or node.get("pull_requests"):
            return None
        if event.event == "check_run":
            job_id = rerun_job_id(data)
            job = await self.store.get_job(job_id) if job_id is not None else None
            return (job.repo_id, job.pr_number) if job is not None else None
        repo_id = data["repository"].get("id") if isinstance(data.get("repository"), dict) else None
        head = node.get("head_sha")
        if type(repo_id) is not int or repo_id not in _INT64 or not isinstance(head, str) or not _SHA.fullmatch(head):
            return None
        number = await self.store.pull_of_head(repo_id, head)
        return (repo_id, number) if number is not None else None


_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # a commit id: SHA-1, or SHA-256
_SIGNATURE = re.compile(r"sha256=([0-9a-fA-F]{64})")
_INT64 = range(-(2**63), 2**63)


def unstorable(value: object) -> str | None:
    """Why a decision (or delivery) cannot be stored as it is, or None: an integer beyond 64 bits (both stores refuse
    it) or text with a NUL character (PostgreSQL refuses it). A job's ``details`` are stored as JSON text, where
    both are fine, so they are not looked at."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if value in _INT64 else "an integer beyond 64 bits"
    if isinstance(value, str):
        return "text with a NUL character" if "\x00" in value else None
    if isinstance(value, tuple | list):
        return next((p for p in map(unstorable, value) if p), None)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = (getattr(value, f.name) for f in dataclasses.fields(value) if f.name != "details")
        return next((p for p in map(unstorable, fields) if p), None)
    return None


def signature_problem(header: str | None, body: bytes, secret: str) -> str | None:
    """Why ``header`` is not the HMAC-SHA256 of ``body`` under ``secret`` (None when it is).

    Exactly ``sha256=`` and 64 hex digits, compared in constant time; any other spelling (``sha1=``, non-ASCII,
    padding) is refused before any comparison, so no input can make the check itself fail.
    """
    if not header:
        return "missing X-Hub-Signature-256"
    given = _SIGNATURE.fullmatch(header)
    if given is None:
        return "X-Hub-Signature-256 is not sha256= and 64 hex digits"
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(given.group(1).lower().encode(), expected.encode()):
        return "signature does not match"
    return None


# Answers that carry no admission outcome, by status.
_REFUSALS = {400: "bad_request", 401: "bad_signature", 413: "too_large", 503: "unavailable"}
_EVENT_NAME = re.compile(r"[a-z_]{1,40}")


class _Answer(web.Response):
    """A JSON answer that remembers its admission outcome, so the metrics need not parse the body again."""

    outcome: str = "unknown"


def _webhook_labels(request: web.Request, response: _Answer) -> tuple[str, str]:
    """(event, outcome) for the webhooks counter; label values stay few whatever a sender puts in its headers."""
    if response.status in (401, 413):
        return "unverified", _REFUSALS[response.status]  # nothing of an unverified request is trusted
    event = request.headers.get("X-GitHub-Event", "")
    event = event if _EVENT_NAME.fullmatch(event) else "other"
    if response.status in _REFUSALS:
        return event, _REFUSALS[response.status]
    return event, response.outcome


def _answer(status: int, **fields: object) -> _Answer:
    body = {k: v for k, v in fields.items() if v is not None and v != []}
    response = _Answer(status=status, body=orjson.dumps(body), content_type="application/json")
    outcome = body.get("outcome")
    if isinstance(outcome, str):
        response.outcome = outcome
    return response
