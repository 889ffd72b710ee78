"""A fake Anthropic Messages API on loopback, with scripted answers and fault injection, for the real SDK to call.

It serves the Message Batches endpoints too (create, retrieve, results as JSONL, cancel), in the API's documented
shapes: a batch is ``in_progress`` until it is processed (at the first look after its creation, or when a test ends
it: ``hold_batches``), then ``ended`` with ``request_counts`` and a ``results_url``. Each request of a batch takes the
next scripted step like an interactive call would (an answer succeeds, an error or a dropped connection errors);
``batch_outcomes`` forces a request's result type, ``expire_batches`` expires what is still processing, and
``reverse_results`` returns results in another order than the requests. Requests of the verification pass (those
forcing ``verify_tool``) take their steps from a queue of their own (``script_verify_*``). An answer in a thread
forces ``answer_tool``: ``script_answer`` queues one, and unscripted it gets ``default_thread_answer`` (or the
``responder``'s: a text is the answer, a dict the tool's whole input)."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import math
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

DEFAULT_MODEL_ANSWER: dict[str, Any] = {"summary": "No problems found.", "comments": []}
DEFAULT_THREAD_ANSWER: dict[str, Any] = {"answer": "Thanks, noted.", "disputes": False, "learning": None}
# The minimum cacheable prompt per model, as Anthropic documents it: below it a cache_control mark caches nothing,
# silently (no error; both cache counters stay 0). First match on the model name's prefix wins.
MIN_CACHEABLE_TOKENS: tuple[tuple[str, int], ...] = (
    ("claude-opus-4-5", 4096),
    ("claude-opus-4-6", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-3-haiku", 2048),
    ("claude-3-5-haiku", 2048),
    ("claude-haiku-3", 2048),
)
DEFAULT_MIN_CACHEABLE_TOKENS = 1024  # Sonnet 4.x, Opus 4 and 4.1, Sonnet 3.7, and any other model name
SPEND_LIMIT_MESSAGE = (
    "Your organization has reached its monthly spend limit; your credit balance is exhausted. "
    "Usage resumes when the limit is raised or resets."
)


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the fake received it: header names lower-cased, ``body`` None when it was not JSON."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any

    @property
    def system(self) -> Any:
        return self.body.get("system") if isinstance(self.body, dict) else None

    @property
    def tools(self) -> Any:
        return self.body.get("tools") if isinstance(self.body, dict) else None

    @property
    def tool_choice(self) -> Any:
        return self.body.get("tool_choice") if isinstance(self.body, dict) else None

    @property
    def messages(self) -> Any:
        return self.body.get("messages") if isinstance(self.body, dict) else None


@dataclass(frozen=True)
class _Answer:
    content: list[dict[str, Any]]
    stop_reason: str
    usage: Mapping[str, int] | None
    delay: float = 0.0


@dataclass(frozen=True)
class _Fault:
    status: int
    error_type: str
    message: str
    headers: Mapping[str, str] = field(default_factory=dict)
    error_code: str | None = None


@dataclass(frozen=True)
class _Disconnect:
    pass


@dataclass(frozen=True)
class _LostAnswer:
    """The prompt was processed (and cached, and billed), then the connection dropped before the answer."""


_Step = _Answer | _Fault | _Disconnect | _LostAnswer
_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
BATCH_LIFETIME = 24 * 3600.0  # a batch expires (what is unprocessed) 24 hours after its creation


@dataclass
class FakeBatch:
    """One Message Batch as the fake keeps it."""

    id: str
    requests: list[dict[str, Any]]
    created_at: float
    processing_status: str = "in_progress"  # in_progress, canceling, ended
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # custom_id -> result, once processed
    ended_at: float | None = None
    cancel_initiated_at: float | None = None


class FakeAnthropic:
    """A scripted stand-in for ``POST /v1/messages`` and ``POST /v1/messages/count_tokens``.

    Each ``script_*`` call queues what the next valid Messages request(s) get, first in first out; when the
    queue is empty a request gets a tool call carrying ``default_answer``. Requests that fail validation (no
    credentials, missing fields) are answered 401/400 without consuming the queue. Every request is recorded in
    ``requests``.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        tool_name: str = "submit_review",
        verify_tool: str = "submit_verdicts",
        answer_tool: str = "submit_answer",
    ) -> None:
        self.api_key = api_key  # when set, any other key gets 401
        self.tool_name = tool_name
        self.answer_tool = answer_tool  # an answer in a thread (review/answer.py): its text and its classification
        self.default_thread_answer: dict[str, Any] = dict(DEFAULT_THREAD_ANSWER)
        # Requests that force ``verify_tool`` (the verification pass) take their steps from a queue of their own
        # (``script_verify_*``), so scripting a review's answers is not disturbed by its verification. Unscripted, the
        # verifier confirms every finding of the request with ``verify_confidence``, or answers what ``verifier``
        # computes from the request's body.
        self.verify_tool = verify_tool
        self.verify_confidence = 90
        self.verifier: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        self._verify_script: deque[_Step] = deque()
        self.default_answer: dict[str, Any] = dict(DEFAULT_MODEL_ANSWER)
        # When set, what an unscripted request gets, computed from its body (see ``_unscripted``).
        self.responder: Callable[[dict[str, Any]], dict[str, Any] | str] | None = None
        self.requests: list[RecordedRequest] = []
        self.base_url: str | None = None
        self._script: deque[_Step] = deque()
        self._ids = itertools.count(1)
        self._cached_prefixes: set[str] = set()
        self.count_tokens_status: int | None = None  # when set, count_tokens answers this error status
        self._arrived = asyncio.Condition()
        self._closing = asyncio.Event()
        self.batches: dict[str, FakeBatch] = {}
        self.hold_batches = False  # True: batches stay in progress until end_batches() or expire_batches()
        self.batch_outcomes: dict[str, str] = {}  # custom_id -> result type forced on it (errored, expired, ...)
        self.reverse_results = False  # True: results come in the reverse order of the requests
        self._batch_create_faults: deque[_Fault] = deque()
        # When set, a batch create is recorded at once but answered only once the event is set (a create in flight).
        self.batch_create_gate: asyncio.Event | None = None

    # --- scripting -------------------------------------------------------------------------------------------

    def script_tool_answer(
        self,
        input: Mapping[str, Any],
        *,
        usage: Mapping[str, int] | None = None,
        name: str | None = None,
        delay: float = 0.0,
        times: int = 1,
    ) -> None:
        """Answer with one tool_use block carrying ``input``; ``usage`` fields override the computed ones."""
        block = {"type": "tool_use", "name": name or self.tool_name, "input": dict(input)}
        self._queue(_Answer([block], "tool_use", usage, delay), times)

    def script_answer(self, text: str, *, disputes: bool = False, learning: str | None = None, times: int = 1) -> None:
        """An answer in a thread: the ``answer_tool`` call with its text and whether the reply disputes the finding
        (and the learning the model proposes then)."""
        block = {
            "type": "tool_use",
            "name": self.answer_tool,
            "input": {"answer": text, "disputes": disputes, "learning": learning},
        }
        self._queue(_Answer([block], "tool_use", None, 0.0), times)

    def script_malformed_answer(
        self,
        input: Any = None,
        *,
        usage: Mapping[str, int] | None = None,
        times: int = 1,
    ) -> None:
        """Answer with a tool call whose input breaks the schema (default: no summary, comments not a list)."""
        bad = {"comments": "line 3 looks wrong"} if input is None else input
        block = {"type": "tool_use", "name": self.tool_name, "input": bad}
        self._queue(_Answer([block], "tool_use", usage, 0.0), times)

    def script_text_answer(
        self, text: str = "Looks good to me!", *, usage: Mapping[str, int] | None = None, times: int = 1
    ) -> None:
        """Answer in plain text with no tool call, as a model that ignored tool_choice would."""
        self._queue(_Answer([{"type": "text", "text": text}], "end_turn", usage, 0.0), times)

    def script_empty_answer(self, *, usage: Mapping[str, int] | None = None, times: int = 1) -> None:
        """Answer with an empty content list."""
        self._queue(_Answer([], "end_turn", usage, 0.0), times)

    def script_slow_answer(self, delay: float, input: Mapping[str, Any] | None = None) -> None:
        """Answer after ``delay`` seconds (cut short when the fake stops, so teardown never waits on it)."""
        self.script_tool_answer(self.default_answer if input is None else input, delay=delay)

    def script_error(
        self,
        status: int,
        error_type: str,
        message: str,
        *,
        headers: Mapping[str, str] | None = None,
        error_code: str | None = None,
        times: int = 1,
    ) -> None:
        """Answer with an API error of any kind; ``error_code`` goes to ``error.details.error_code``."""
        self._queue(_Fault(status, error_type, message, dict(headers or {}), error_code), times)

    def script_rate_limit(self, retry_after: float | None = 7, *, times: int = 1) -> None:
        """429 rate_limit_error, with a ``retry-after`` header (seconds) unless None."""
        headers = {} if retry_after is None else {"retry-after": _header_number(retry_after)}
        self.script_error(
            429,
            "rate_limit_error",
            "Number of request tokens has exceeded your per-minute rate limit.",
            headers=headers,
            times=times,
        )

    def script_spend_limit(
        self,
        *,
        error_code: str | None = "enforced_spend_limit_reached",
        message: str = SPEND_LIMIT_MESSAGE,
        times: int = 1,
    ) -> None:
        """429 rate_limit_error that says the spend limit / credit balance is exhausted (no ``retry-after``).

        With ``error_code=None`` only the message says so, as older API responses did.
        """
        self.script_error(
            429,
            "rate_limit_error",
            message,
            headers={"x-should-retry": "false"},
            error_code=error_code,
            times=times,
        )

    def script_overloaded(self, *, retry_after: float | None = None, times: int = 1) -> None:
        """529 overloaded_error."""
        headers = {} if retry_after is None else {"retry-after": _header_number(retry_after)}
        self.script_error(529, "overloaded_error", "Overloaded", headers=headers, times=times)

    def script_server_error(self, *, retry_after: float | None = None, times: int = 1) -> None:
        """500 api_error (a small ``retry_after`` keeps the SDK's own retry from sleeping its 0.5 s backoff)."""
        headers = {} if retry_after is None else {"retry-after": _header_number(retry_after)}
        self.script_error(500, "api_error", "Internal server error", headers=headers, times=times)

    def script_disconnect(self, *, times: int = 1) -> None:
        """Drop the connection without answering."""
        self._queue(_Disconnect(), times)

    def script_lost_answer(self, *, times: int = 1) -> None:
        """Process the prompt (its cache breakpoints are written), then drop the connection without answering."""
        self._queue(_LostAnswer(), times)

    def script_verify_answer(self, verdicts: list[dict[str, Any]], *, times: int = 1) -> None:
        """The next verification request(s) get these verdicts (``{"id": "F1", "verdict": ..., "confidence": ...,
        "reason": ...}``)."""
        block = {"type": "tool_use", "name": self.verify_tool, "input": {"verdicts": list(verdicts)}}
        self._verify_script.extend([_Answer([block], "tool_use", None)] * times)

    def script_verify_malformed(self, *, times: int = 1) -> None:
        """The next verification request(s) get a tool call that breaks the verdicts schema."""
        block = {"type": "tool_use", "name": self.verify_tool, "input": {"verdicts": "all fine"}}
        self._verify_script.extend([_Answer([block], "tool_use", None)] * times)

    def script_verify_error(self, status: int, error_type: str, message: str, *, times: int = 1) -> None:
        """The next verification request(s) get an API error."""
        self._verify_script.extend([_Fault(status, error_type, message)] * times)

    @property
    def verify_requests(self) -> list[RecordedRequest]:
        """The recorded ``POST /v1/messages`` requests of the verification pass, in order."""
        return [r for r in self.message_requests if self._verifies(r.body)]

    @property
    def review_requests(self) -> list[RecordedRequest]:
        """The recorded ``POST /v1/messages`` requests that are not the verification pass's, in order."""
        return [r for r in self.message_requests if not self._verifies(r.body)]

    def _verifies(self, body: Any) -> bool:
        choice = body.get("tool_choice") if isinstance(body, dict) else None
        return isinstance(choice, dict) and choice.get("name") == self.verify_tool

    def _next_step(self, body: dict[str, Any]) -> _Step | None:
        queue = self._verify_script if self._verifies(body) else self._script
        return queue.popleft() if queue else None

    def script_batch_create_error(self, status: int, error_type: str, message: str, *, times: int = 1) -> None:
        """Answer the next batch creation(s) with an API error."""
        self._batch_create_faults.extend([_Fault(status, error_type, message)] * times)

    def end_batches(self) -> None:
        """Process every batch still in progress now (each request takes its scripted step)."""
        for batch in self.batches.values():
            self._process(batch, hold=False)

    def expire_batches(self) -> None:
        """Every batch still in progress reaches its 24 hours: what it has not processed expires."""
        for batch in self.batches.values():
            if batch.processing_status != "ended":
                self._end(batch, "expired")

    @property
    def batch_creates(self) -> list[RecordedRequest]:
        """The recorded ``POST /v1/messages/batches`` requests, in order."""
        return [r for r in self.requests if r.method == "POST" and r.path == "/v1/messages/batches"]

    @property
    def pending(self) -> int:
        """How many scripted steps are still queued."""
        return len(self._script)

    @property
    def message_requests(self) -> list[RecordedRequest]:
        """The recorded Messages requests (``POST /v1/messages``, or the platform's path for it), in order."""
        return [r for r in self.requests if self._is_messages_path(r.path)]

    def _is_messages_path(self, path: str) -> bool:
        return path == "/v1/messages"

    async def wait_for_requests(self, count: int, within: float = 5.0) -> None:
        """Wait up to ``within`` seconds for ``count`` requests to have arrived (a signal, instead of a sleep)."""
        async with self._arrived:
            await asyncio.wait_for(self._arrived.wait_for(lambda: len(self.requests) >= count), within)

    # --- serving ---------------------------------------------------------------------------------------------

    def make_app(self) -> web.Application:
        app = web.Application()
        self._add_routes(app)
        return app

    def client_environment(self, tmp_path: Path) -> dict[str, str]:
        """The standard environment a client needs to reach this fake (its base URL, test credentials)."""
        assert self.base_url is not None, "serve() first"
        return {"ANTHROPIC_API_KEY": self.api_key or "sk-ant-test-key", "ANTHROPIC_BASE_URL": self.base_url}

    def _add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self._handle_messages)
        app.router.add_post("/v1/messages/count_tokens", self._handle_count_tokens)
        app.router.add_post("/v1/messages/batches", self._handle_batch_create)
        app.router.add_get("/v1/messages/batches/{batch_id}", self._handle_batch_retrieve)
        app.router.add_get("/v1/messages/batches/{batch_id}/results", self._handle_batch_results)
        app.router.add_post("/v1/messages/batches/{batch_id}/cancel", self._handle_batch_cancel)

    @asynccontextmanager
    async def serve(self, host: str = "127.0.0.1") -> AsyncIterator[str]:
        """Run on ``host`` at a free port; yields the base URL to hand to the SDK."""
        self._closing.clear()
        runner = web.AppRunner(self.make_app(), shutdown_timeout=1.0, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, 0)
        await site.start()
        port = runner.addresses[0][1]
        self.base_url = f"http://{host}:{port}"
        try:
            yield self.base_url
        finally:
            self._closing.set()
            await runner.cleanup()
            self.base_url = None

    # --- handlers --------------------------------------------------------------------------------------------

    async def _handle_messages(self, request: web.Request) -> web.StreamResponse:
        body, rejection = await self._admit(request, require_max_tokens=True)
        if rejection is not None:
            return rejection
        assert body is not None
        step = self._next_step(body)
        if isinstance(step, _LostAnswer):
            self._usage(body, [])
        if isinstance(step, _Disconnect | _LostAnswer):
            assert request.transport is not None
            request.transport.close()
            raise asyncio.CancelledError  # aiohttp drops the request without writing a response
        if isinstance(step, _Answer) and step.delay:
            await self._pause(step.delay)
        if isinstance(step, _Fault):
            return self._error(step.status, step.error_type, step.message, step.headers, step.error_code)
        if step is None:
            step = self._unscripted(body)
        return self._message(body, step)

    async def _handle_count_tokens(self, request: web.Request) -> web.StreamResponse:
        body, rejection = await self._admit(request, require_max_tokens=False)
        if rejection is not None:
            return rejection
        assert body is not None
        if self.count_tokens_status is not None:
            return self._error(self.count_tokens_status, "not_found_error", "count_tokens is not available here")
        return self._json({"input_tokens": _tokens(_prompt_text(_blocks(body)))})

    # --- Message Batches -------------------------------------------------------------------------------------

    async def _handle_batch_create(self, request: web.Request) -> web.StreamResponse:
        body, rejection = await self._receive(request)
        if rejection is not None:
            return rejection
        if not isinstance(body, dict) or not isinstance(body.get("requests"), list) or not body["requests"]:
            return self._error(400, "invalid_request_error", "requests: Field required (a non-empty list)")
        seen: set[str] = set()
        for i, item in enumerate(body["requests"]):
            name = item.get("custom_id") if isinstance(item, dict) else None
            if not isinstance(name, str) or not _CUSTOM_ID.match(name):
                return self._error(
                    400, "invalid_request_error", f"requests.{i}.custom_id: must match ^[a-zA-Z0-9_-]{{1,64}}$"
                )
            if name in seen:
                return self._error(400, "invalid_request_error", f"requests.{i}.custom_id: duplicate custom_id {name}")
            seen.add(name)
            params = item.get("params")
            problem = (
                "params: Field required" if not isinstance(params, dict) else _validate(params, require_max_tokens=True)
            )
            if problem:
                return self._error(400, "invalid_request_error", f"requests.{i}.params.{problem}")
        if self.batch_create_gate is not None:
            await self.batch_create_gate.wait()
        if self._batch_create_faults:
            fault = self._batch_create_faults.popleft()
            return self._error(fault.status, fault.error_type, fault.message)
        batch = FakeBatch(f"msgbatch_fake_{next(self._ids):04d}", list(body["requests"]), time.time())
        self.batches[batch.id] = batch
        return self._json(self._batch_object(batch, request))

    async def _handle_batch_retrieve(self, request: web.Request) -> web.StreamResponse:
        batch, rejection = await self._batch(request)
        if rejection is not None:
            return rejection
        assert batch is not None
        self._process(batch, hold=self.hold_batches)
        return self._json(self._batch_object(batch, request))

    async def _handle_batch_results(self, request: web.Request) -> web.StreamResponse:
        batch, rejection = await self._batch(request)
        if rejection is not None:
            return rejection
        assert batch is not None
        if batch.processing_status != "ended":
            return self._error(400, "invalid_request_error", f"Message Batch {batch.id} has not yet ended processing")
        order = [r["custom_id"] for r in batch.requests]
        if self.reverse_results:
            order.reverse()
        lines = [json.dumps({"custom_id": name, "result": batch.results[name]}) for name in order]
        return web.Response(body=("\n".join(lines) + "\n").encode(), content_type="application/binary")

    async def _handle_batch_cancel(self, request: web.Request) -> web.StreamResponse:
        batch, rejection = await self._batch(request)
        if rejection is not None:
            return rejection
        assert batch is not None
        if batch.processing_status == "in_progress":
            batch.processing_status = "canceling"
            batch.cancel_initiated_at = time.time()
        return self._json(self._batch_object(batch, request))

    async def _batch(self, request: web.Request) -> tuple[FakeBatch | None, web.Response | None]:
        _, rejection = await self._receive(request)
        if rejection is not None:
            return None, rejection
        batch = self.batches.get(request.match_info["batch_id"])
        if batch is None:
            return None, self._error(
                404, "not_found_error", f"Message Batch {request.match_info['batch_id']} not found"
            )
        return batch, None

    def _process(self, batch: FakeBatch, *, hold: bool) -> None:
        """Run a batch's requests (each takes its scripted step), unless it is held; a canceling batch ends with
        what it had not processed canceled."""
        if batch.processing_status == "canceling":
            self._end(batch, "canceled")
            return
        if batch.processing_status != "in_progress" or hold:
            return
        if time.time() - batch.created_at >= BATCH_LIFETIME:
            self._end(batch, "expired")
            return
        for item in batch.requests:
            name, params = item["custom_id"], item["params"]
            forced = self.batch_outcomes.get(name)
            if forced is not None:
                batch.results[name] = _result_of_type(forced)
                continue
            step = self._next_step(params)
            if isinstance(step, _Fault):
                batch.results[name] = _errored(step.error_type, step.message)
            elif isinstance(step, _Disconnect | _LostAnswer):
                batch.results[name] = _errored("api_error", "Internal server error")
            else:
                if step is None:
                    step = self._unscripted(params)
                batch.results[name] = {"type": "succeeded", "message": self._message_payload(params, step)}
        self._end(batch, None)  # every request has its result by now

    @staticmethod
    def _end(batch: FakeBatch, unprocessed: str | None) -> None:
        """End the batch; each request without a result gets one of type ``unprocessed``."""
        for item in batch.requests:
            if item["custom_id"] not in batch.results:
                assert unprocessed is not None, "a request of the batch has no result"
                batch.results[item["custom_id"]] = _result_of_type(unprocessed)
        batch.processing_status = "ended"
        batch.ended_at = time.time()

    def _batch_object(self, batch: FakeBatch, request: web.Request) -> dict[str, Any]:
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        for item in batch.requests:
            result = batch.results.get(item["custom_id"])
            counts[result["type"] if result is not None else "processing"] += 1
        ended = batch.processing_status == "ended"
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": batch.processing_status,
            "request_counts": counts,
            "ended_at": _rfc3339(batch.ended_at),
            "created_at": _rfc3339(batch.created_at),
            "expires_at": _rfc3339(batch.created_at + BATCH_LIFETIME),
            "archived_at": None,
            "cancel_initiated_at": _rfc3339(batch.cancel_initiated_at),
            "results_url": f"{request.url.origin()}/v1/messages/batches/{batch.id}/results" if ended else None,
        }

    # --- requests ----------------------------------------------------------------------------------------------

    async def _receive(self, request: web.Request) -> tuple[Any, web.Response | None]:
        """Record the request and check its credentials and version header; its JSON body (None if none)."""
        raw = await request.read()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        async with self._arrived:
            headers = {k.lower(): v for k, v in request.headers.items()}
            self.requests.append(RecordedRequest(request.method, request.path, headers, body))
            self._arrived.notify_all()
        return body, self._authorize(request, raw)

    def _authorize(self, request: web.Request, raw: bytes) -> web.Response | None:
        key = request.headers.get("x-api-key")
        auth = request.headers.get("authorization", "")
        if key is None and auth.lower().startswith("bearer "):
            key = auth[len("bearer ") :]
        if not key:
            return self._error(401, "authentication_error", "x-api-key header is required")
        if self.api_key is not None and key != self.api_key:
            return self._error(401, "authentication_error", "invalid x-api-key")
        if not request.headers.get("anthropic-version"):
            return self._error(400, "invalid_request_error", "anthropic-version: header is required")
        return None

    async def _admit(
        self, request: web.Request, *, require_max_tokens: bool
    ) -> tuple[dict[str, Any] | None, web.Response | None]:
        body, rejection = await self._receive(request)
        if rejection is not None:
            return None, rejection
        if not isinstance(body, dict):
            return None, self._error(400, "invalid_request_error", "request body must be a JSON object")
        body, rejection = self._platform_body(request, body)
        if rejection is not None:
            return None, rejection
        problem = _validate(body, require_max_tokens=require_max_tokens)
        if problem:
            return None, self._error(400, "invalid_request_error", problem)
        return body, None

    def _platform_body(self, request: web.Request, body: dict[str, Any]) -> tuple[dict[str, Any], web.Response | None]:
        """The body as the Messages API takes it (a platform's fake checks its own wire format and translates)."""
        return body, None

    def _unscripted(self, body: dict[str, Any]) -> _Answer:
        """What a request gets when nothing is scripted: ``responder``'s answer to it (a dict is the review tool's
        input, a str a text answer), else a tool call carrying ``default_answer``."""
        if self._verifies(body):
            verdicts = self.verifier(body) if self.verifier is not None else self._confirm_all(body)
            return _Answer([{"type": "tool_use", "name": self.verify_tool, "input": verdicts}], "tool_use", None)
        if _forces(body, self.answer_tool):
            reply: dict[str, Any] | str = self.responder(body) if self.responder else dict(self.default_thread_answer)
            if isinstance(reply, str):
                reply = {**DEFAULT_THREAD_ANSWER, "answer": reply}
            return _Answer([{"type": "tool_use", "name": self.answer_tool, "input": reply}], "tool_use", None)
        answer: dict[str, Any] | str = dict(self.default_answer)
        if self.responder is not None:
            answer = self.responder(body)
        if isinstance(answer, str):
            return _Answer([{"type": "text", "text": answer}], "end_turn", None)
        return _Answer([{"type": "tool_use", "name": self.tool_name, "input": answer}], "tool_use", None)

    def _confirm_all(self, body: dict[str, Any]) -> dict[str, Any]:
        """Every finding the request names (``<finding id="F1" ...>``) confirmed with ``verify_confidence``."""
        ids = dict.fromkeys(re.findall(r'<finding id="(F\d+)"', _prompt_text(_blocks(body)).replace('\\"', '"')))
        return {
            "verdicts": [
                {"id": i, "verdict": "confirmed", "confidence": self.verify_confidence, "reason": "It holds."}
                for i in ids
            ]
        }

    def _message(self, body: dict[str, Any], answer: _Answer) -> web.Response:
        payload = self._message_payload(body, answer)
        return self._json(payload, request_id=payload["id"].replace("msg_", "req_"))

    def _message_payload(self, body: dict[str, Any], answer: _Answer) -> dict[str, Any]:
        n = next(self._ids)
        content = []
        for block in answer.content:
            if block["type"] == "tool_use":
                block = {"type": "tool_use", "id": f"toolu_fake_{n:04d}", **block}
            content.append(block)
        payload = {
            "id": f"msg_fake_{n:04d}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": answer.stop_reason,
            "stop_sequence": None,
            "usage": {**self._usage(body, content), **(answer.usage or {})},
        }
        return payload

    def _usage(self, body: dict[str, Any], content: list[dict[str, Any]]) -> dict[str, int]:
        """Token counts in the API's split: read from the cache, written to it, and the uncached rest.

        The prompt is the sequence tools, system blocks, message blocks; each block marked with cache_control is a
        breakpoint. A breakpoint whose prefix is shorter than the model's minimum caches nothing. The longest
        prefix already cached is read; the prompt from there to the last cacheable breakpoint is written.
        """
        total, created, read = prompt_cache_split(body, self._cached_prefixes)
        return {
            "input_tokens": max(total - created - read, 1),
            "output_tokens": max(_tokens(json.dumps(content)), 1),
            "cache_creation_input_tokens": created,
            "cache_read_input_tokens": read,
        }

    def _error(
        self,
        status: int,
        error_type: str,
        message: str,
        headers: Mapping[str, str] | None = None,
        error_code: str | None = None,
    ) -> web.Response:
        error: dict[str, Any] = {"type": error_type, "message": message}
        if error_code is not None:
            error["details"] = {"error_code": error_code}
        request_id = f"req_fake_err_{next(self._ids):04d}"
        payload = {"type": "error", "error": error, "request_id": request_id}
        return self._json(payload, status=status, headers=headers, request_id=request_id)

    @staticmethod
    def _json(
        payload: Any,
        *,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        request_id: str = "req_fake",
    ) -> web.Response:
        return web.json_response(payload, status=status, headers={"request-id": request_id, **(headers or {})})

    async def _pause(self, delay: float) -> None:
        try:
            await asyncio.wait_for(self._closing.wait(), delay)
        except TimeoutError:
            pass

    def clear_script(self) -> None:
        """Forget the review answers scripted and not given yet (a test that replaces its fixture's answer)."""
        self._script.clear()

    def _queue(self, step: _Step, times: int) -> None:
        self._script.extend([step] * times)


def _forces(body: Any, tool: str) -> bool:
    choice = body.get("tool_choice") if isinstance(body, dict) else None
    return isinstance(choice, dict) and choice.get("name") == tool


def _result_of_type(kind: str) -> dict[str, Any]:
    """A batch result without an answer: errored (an API error), canceled or expired."""
    if kind == "errored":
        return _errored("api_error", "Internal server error")
    if kind not in ("canceled", "expired"):
        raise ValueError(f"not a result type without an answer: {kind}")
    return {"type": kind}


def _errored(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "errored", "error": {"type": "error", "error": {"type": error_type, "message": message}}}


def _rfc3339(at: float | None) -> str | None:
    return None if at is None else datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


def _validate(body: dict[str, Any], *, require_max_tokens: bool) -> str | None:
    """The first thing the real API would reject this body for, or None."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Field required"
    if require_max_tokens:
        max_tokens = body.get("max_tokens")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            return "max_tokens: Field required (a positive integer)"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: Field required (a non-empty list)"
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        content = message.get("content")
        if not isinstance(content, str | list) or not content:
            return f"messages.{i}.content: Field required"
    problem = _validate_tool_pairs(messages)
    if problem:
        return problem
    system = body.get("system")
    if system is not None and not isinstance(system, str):
        if not isinstance(system, list) or not all(
            isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str) and b["text"]
            for b in system
        ):
            return "system: Input should be a string or a list of non-empty text blocks"
    tools = body.get("tools") or []
    names = {t.get("name") for t in tools if isinstance(t, dict)}
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "tool" and choice.get("name") not in names:
        return f"tool_choice: tool '{choice.get('name')}' not found in tools"
    return None


def _validate_tool_pairs(messages: list[dict[str, Any]]) -> str | None:
    """Every assistant tool_use must be answered by a tool_result in the very next (user) message."""
    for i, message in enumerate(messages):
        content = message["content"]
        if message["role"] != "assistant" or not isinstance(content, list):
            continue
        ids = {b.get("id") for b in content if isinstance(b, dict) and b.get("type") == "tool_use"}
        if not ids:
            continue
        following = messages[i + 1]["content"] if i + 1 < len(messages) else None
        answered = {
            b.get("tool_use_id")
            for b in (following if isinstance(following, list) else [])
            if isinstance(b, dict) and b.get("type") == "tool_result"
        }
        if not ids <= answered:
            return f"messages.{i + 1}: tool_use ids were found without tool_result blocks immediately after"
    return None


def prompt_cache_split(body: dict[str, Any], cached: set[str]) -> tuple[int, int, int]:
    """A Messages request's prompt tokens (characters / 4) as the API's prompt cache splits them: (all of them, those
    written to the cache, those read from it), given the digests of the prefixes ``cached`` so far (updated).

    The prompt is the sequence tools, system blocks, message blocks; each block marked with cache_control is a
    breakpoint. A breakpoint whose prefix is shorter than the model's minimum caches nothing. The longest prefix
    already cached is read; the prompt from there to the last cacheable breakpoint is written."""
    blocks = _blocks(body)
    total = _tokens(_prompt_text(blocks))
    minimum = min_cacheable_tokens(str(body.get("model") or ""))
    breakpoints = [i for i, block in enumerate(blocks) if isinstance(block, dict) and "cache_control" in block]
    prefixes = [(_tokens(_prompt_text(blocks[: i + 1])), _digest(blocks[: i + 1])) for i in breakpoints]
    cacheable = [(tokens, digest) for tokens, digest in prefixes if tokens >= minimum]
    read = max((tokens for tokens, digest in cacheable if digest in cached), default=0)
    longest = max((tokens for tokens, _ in cacheable), default=0)
    cached.update(digest for _, digest in cacheable)
    return total, longest - read, read


def min_cacheable_tokens(model: str) -> int:
    """The fewest tokens a cache breakpoint's prefix needs for ``model`` to cache it."""
    return next((n for prefix, n in MIN_CACHEABLE_TOKENS if model.startswith(prefix)), DEFAULT_MIN_CACHEABLE_TOKENS)


def _blocks(body: dict[str, Any]) -> list[Any]:
    """The prompt in the order the API caches it: tools, then system blocks, then every message's blocks."""
    blocks: list[Any] = [*(body.get("tools") or [])]
    system = body.get("system")
    blocks.extend(system if isinstance(system, list) else [system] if system else [])
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            blocks.extend({"role": message["role"], **b} if isinstance(b, dict) else b for b in content)
        elif content:
            blocks.append({"role": message.get("role"), "type": "text", "text": content})
    return blocks


def _prompt_text(blocks: list[Any]) -> str:
    """The blocks as text, without their cache marks (a mark does not change what is cached)."""
    return json.dumps(
        [{k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b for b in blocks],
        sort_keys=True,
    )


def _digest(blocks: list[Any]) -> str:
    return hashlib.sha256(_prompt_text(blocks).encode()).hexdigest()


def _tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def _header_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
