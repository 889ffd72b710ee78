"""A fake Anthropic Messages API on loopback, with scripted answers and fault injection, for the real SDK to call."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import math
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

DEFAULT_MODEL_ANSWER: dict[str, Any] = {"summary": "No problems found.", "comments": []}
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


_Step = _Answer | _Fault | _Disconnect


class FakeAnthropic:
    """A scripted stand-in for ``POST /v1/messages`` and ``POST /v1/messages/count_tokens``.

    Each ``script_*`` call queues what the next valid Messages request(s) get, first in first out; when the
    queue is empty a request gets a tool call carrying ``default_answer``. Requests that fail validation (no
    credentials, missing fields) are answered 401/400 without consuming the queue. Every request is recorded in
    ``requests``.
    """

    def __init__(self, *, api_key: str | None = None, tool_name: str = "submit_review") -> None:
        self.api_key = api_key  # when set, any other key gets 401
        self.tool_name = tool_name
        self.default_answer: dict[str, Any] = dict(DEFAULT_MODEL_ANSWER)
        self.requests: list[RecordedRequest] = []
        self.base_url: str | None = None
        self._script: deque[_Step] = deque()
        self._ids = itertools.count(1)
        self._cached_prefixes: set[str] = set()
        self._arrived = asyncio.Condition()
        self._closing = asyncio.Event()

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

    @property
    def pending(self) -> int:
        """How many scripted steps are still queued."""
        return len(self._script)

    @property
    def message_requests(self) -> list[RecordedRequest]:
        """The recorded ``POST /v1/messages`` requests, in order."""
        return [r for r in self.requests if r.path == "/v1/messages"]

    async def wait_for_requests(self, count: int, within: float = 5.0) -> None:
        """Wait up to ``within`` seconds for ``count`` requests to have arrived (a signal, instead of a sleep)."""
        async with self._arrived:
            await asyncio.wait_for(self._arrived.wait_for(lambda: len(self.requests) >= count), within)

    # --- serving ---------------------------------------------------------------------------------------------

    def make_app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/messages", self._handle_messages)
        app.router.add_post("/v1/messages/count_tokens", self._handle_count_tokens)
        return app

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
        step = self._script.popleft() if self._script else None
        if isinstance(step, _Disconnect):
            assert request.transport is not None
            request.transport.close()
            raise asyncio.CancelledError  # aiohttp drops the request without writing a response
        if isinstance(step, _Answer) and step.delay:
            await self._pause(step.delay)
        if isinstance(step, _Fault):
            return self._error(step.status, step.error_type, step.message, step.headers, step.error_code)
        if step is None:
            block = {"type": "tool_use", "name": self.tool_name, "input": dict(self.default_answer)}
            step = _Answer([block], "tool_use", None)
        return self._message(body, step)

    async def _handle_count_tokens(self, request: web.Request) -> web.StreamResponse:
        body, rejection = await self._admit(request, require_max_tokens=False)
        if rejection is not None:
            return rejection
        assert body is not None
        return self._json({"input_tokens": _tokens(_request_text(body))})

    async def _admit(
        self, request: web.Request, *, require_max_tokens: bool
    ) -> tuple[dict[str, Any] | None, web.Response | None]:
        raw = await request.read()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        async with self._arrived:
            headers = {k.lower(): v for k, v in request.headers.items()}
            self.requests.append(RecordedRequest(request.method, request.path, headers, body))
            self._arrived.notify_all()

        key = request.headers.get("x-api-key")
        auth = request.headers.get("authorization", "")
        if key is None and auth.lower().startswith("bearer "):
            key = auth[len("bearer ") :]
        if not key:
            return None, self._error(401, "authentication_error", "x-api-key header is required")
        if self.api_key is not None and key != self.api_key:
            return None, self._error(401, "authentication_error", "invalid x-api-key")
        if not request.headers.get("anthropic-version"):
            return None, self._error(400, "invalid_request_error", "anthropic-version: header is required")
        if not isinstance(body, dict):
            return None, self._error(400, "invalid_request_error", "request body must be a JSON object")
        problem = _validate(body, require_max_tokens=require_max_tokens)
        if problem:
            return None, self._error(400, "invalid_request_error", problem)
        return body, None

    def _message(self, body: dict[str, Any], answer: _Answer) -> web.Response:
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
        return self._json(payload, request_id=f"req_fake_{n:04d}")

    def _usage(self, body: dict[str, Any], content: list[dict[str, Any]]) -> dict[str, int]:
        """Token counts in the API's split: cached prefix (tools + system) apart from the uncached input."""
        total = _tokens(_request_text(body))
        prefix = _cached_prefix(body)
        created = read = 0
        if prefix:
            digest = hashlib.sha256(prefix.encode()).hexdigest()
            if digest in self._cached_prefixes:
                read = _tokens(prefix)
            else:
                created = _tokens(prefix)
                self._cached_prefixes.add(digest)
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

    def _queue(self, step: _Step, times: int) -> None:
        self._script.extend([step] * times)


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


def _cached_prefix(body: dict[str, Any]) -> str:
    """The text of tools and system up to the last block marked with cache_control ('' if none is marked)."""
    parts: list[Any] = [*(body.get("tools") or [])]
    system = body.get("system")
    if isinstance(system, list):
        parts.extend(system)
    last = max((i for i, p in enumerate(parts) if isinstance(p, dict) and "cache_control" in p), default=-1)
    return json.dumps(parts[: last + 1]) if last >= 0 else ""


def _request_text(body: dict[str, Any]) -> str:
    return json.dumps([body.get("tools"), body.get("system"), body.get("messages")])


def _tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def _header_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
