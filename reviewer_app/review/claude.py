"""The Claude adapter: one structured review through a forced tool call, with API errors mapped to job errors."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from reviewer_app.core.errors import PermanentError
from reviewer_app.core.providers import ANTHROPIC, PROVIDERS, Provider, anthropic_model_name
from reviewer_app.core.review_model import ModelAnswer
from reviewer_app.review.claude_errors import credentials_error, describe, map_api_error
from reviewer_app.review.claude_parse import (
    MalformedAnswer,
    feedback_turns,
    parse_review,
    parse_tool_answer,
    usage_dict,
)
from reviewer_app.review.model_client import ModelClient
from reviewer_app.review.prompt import REVIEW_TOOL, REVIEW_TOOL_NAME, SYSTEM_PROMPT, estimate_tokens
from reviewer_app.review.sdk import anthropic

if TYPE_CHECKING:
    from anthropic.types import Message

log = logging.getLogger(__name__)
T = TypeVar("T")

EPHEMERAL = {"type": "ephemeral"}
# The minimum cacheable prompt per model, as Anthropic documents it (first matching name prefix wins). Below it a
# cache mark caches nothing and says nothing. Where sources disagree the lower figure is used: a mark below the real
# minimum costs nothing, a mark left out above it loses the cache.
MIN_CACHEABLE_TOKENS: tuple[tuple[str, int], ...] = (
    ("claude-opus-4-5", 4096),
    ("claude-opus-4-6", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-3-haiku", 2048),
    ("claude-3-5-haiku", 2048),
)
DEFAULT_MIN_CACHEABLE_TOKENS = 1024


class MalformedAnswers(PermanentError):
    """The model's answers did not fit the forced tool, however often it was asked."""


@dataclass
class UsageMeter:
    """Tokens and calls spent on one review, summed over every call made, including failed ones."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def since(self, earlier: UsageMeter) -> UsageMeter:
        """What was spent after ``earlier`` (a copy of this meter taken then)."""
        return UsageMeter(
            self.calls - earlier.calls,
            self.input_tokens - earlier.input_tokens,
            self.output_tokens - earlier.output_tokens,
            self.cache_creation_input_tokens - earlier.cache_creation_input_tokens,
            self.cache_read_input_tokens - earlier.cache_read_input_tokens,
        )

    def add(self, usage: Any) -> None:
        self.input_tokens += usage.input_tokens or 0
        self.output_tokens += usage.output_tokens or 0
        self.cache_creation_input_tokens += usage.cache_creation_input_tokens or 0
        self.cache_read_input_tokens += usage.cache_read_input_tokens or 0


def min_cacheable_tokens(model: str) -> int:
    """The fewest tokens a prompt prefix needs for ``model`` (in any provider's spelling) to cache it."""
    name = anthropic_model_name(model)
    return next((n for prefix, n in MIN_CACHEABLE_TOKENS if name.startswith(prefix)), DEFAULT_MIN_CACHEABLE_TOKENS)


class ClaudeReviewer:
    """Asks Claude for one review and returns it as a ``ModelAnswer``, or raises a ``JobError``.

    A malformed answer is asked again, with the validation error fed back, up to ``malformed_retries`` more
    times. Token usage is summed into the caller's ``UsageMeter`` (if given) as the calls happen, so it is
    known even when ``review`` raises; ``last_usage`` holds the meter of the latest review for single-job
    callers, and ``calls_made`` counts every Messages call this reviewer ever made. ``model`` is the model asked.

    Cache breakpoints go where they pay: on the fixed prefix (tools and system prompt) when it reaches the model's
    minimum, after the blocks several requests share (the parts of one review), and after the whole user turn, so
    a re-ask after a malformed answer and a retry of the job read the diff from the cache. Prefixes are measured
    with the token counting endpoint where the provider offers it, estimated otherwise. ``provider`` says which the
    client reaches (review/model_client.py): Bedrock and Vertex AI take the API version in each request's body.
    """

    def __init__(
        self,
        client: ModelClient,
        model: str,
        *,
        provider: Provider = PROVIDERS[ANTHROPIC],
        max_output_tokens: int = 4096,
        malformed_retries: int = 2,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if malformed_retries < 0:
            raise ValueError("malformed_retries must be >= 0")
        self._client = client
        self.model = model
        self.provider = provider
        version = provider.body_version
        self._extra_body: dict[str, Any] | None = {"anthropic_version": version} if version else None
        self._max_output_tokens = max_output_tokens
        self._malformed_retries = malformed_retries
        self._clock = clock
        self.calls_made = 0
        self.last_usage = UsageMeter()
        self.count_calls = 0  # token counting requests made
        # False where the provider has no token counting, or once the endpoint turned out to be missing (a gateway)
        self._counting = provider.counts_tokens
        self._fixed_tokens: dict[tuple[str, ...], int] = {}  # by the names of the tools offered

    async def review(
        self,
        user_blocks: str | Sequence[str],
        *,
        meter: UsageMeter | None = None,
        shared_blocks: int = 0,
        tools: ToolRunner | None = None,
        turns: Sequence[dict[str, Any]] = (),
        on_turn: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
    ) -> ModelAnswer:
        """Review the user turn (one text, or text blocks; the first ``shared_blocks`` are shared with other
        requests of the same review).

        With ``tools``, the model may call them for up to ``tools.max_turns`` turns before it submits; each turn
        (the model's calls and what they cost) goes to ``on_turn`` as it completes, and ``turns`` stored by an
        earlier attempt are replayed (their tools run again: same commit, same results) instead of asked again.
        """
        meter = UsageMeter() if meter is None else meter
        self.last_usage = meter
        system, definitions, choice, base = await self._first_request(user_blocks, shared_blocks, tools)
        content = base[0]["content"]
        cached = "cache_control" in content[-1] if content else False
        history: list[dict[str, Any]] = []
        for turn in turns if tools is not None else ():
            history += [
                {"role": "assistant", "content": turn["content"]},
                {"role": "user", "content": await tools.run(_tool_calls(turn["content"]))},
            ]  # type: ignore[union-attr]
        used = len(history) // 2
        feedback: list[dict[str, Any]] = []
        tries = 1 + self._malformed_retries
        malformed = 0
        while True:
            messages = base + (_mark_last(history) if cached else history) + feedback
            response = await self._call(meter, system=system, tools=definitions, tool_choice=choice, messages=messages)
            calls = [b for b in response.content if b.type == "tool_use"]
            reads = [c for c in calls if c.name != REVIEW_TOOL_NAME]
            submitted = len(reads) < len(calls)
            if tools is not None and reads and not submitted and all(c.name in tools.names for c in reads):
                assistant = _assistant_content(response)
                if used < tools.max_turns:
                    results = await tools.run(_tool_calls(assistant))
                    used += 1
                    history += [{"role": "assistant", "content": assistant}, {"role": "user", "content": results}]
                    feedback = []
                    if on_turn is not None:
                        await on_turn({"content": assistant, "usage": usage_dict(response.usage)})
                    continue
                problem = f"the limit of {tools.max_turns} tool turns is reached"
                feedback = [
                    {"role": "assistant", "content": assistant},
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": c["id"],
                                "is_error": True,
                                "content": f"Not run: {problem}. Call {REVIEW_TOOL_NAME} now with your review.",
                            }
                            for c in _tool_calls(assistant)
                        ],
                    },
                ]
                err: str = problem
            else:
                try:
                    summary, comments = parse_review(response)
                except MalformedAnswer as exc:
                    err = str(exc)
                    feedback = feedback_turns(response, err)
                else:
                    log.info(
                        "review answered: model=%s calls=%d tool_turns=%d input=%d output=%d cache_write=%d "
                        "cache_read=%d",
                        response.model,
                        meter.calls,
                        used,
                        meter.input_tokens,
                        meter.output_tokens,
                        meter.cache_creation_input_tokens,
                        meter.cache_read_input_tokens,
                    )
                    return ModelAnswer(
                        summary=summary,
                        comments=comments,
                        model=str(response.model),
                        input_tokens=meter.input_tokens,
                        output_tokens=meter.output_tokens,
                        cache_creation_input_tokens=meter.cache_creation_input_tokens,
                        cache_read_input_tokens=meter.cache_read_input_tokens,
                    )
            malformed += 1
            log.warning(
                "model answer malformed (try %d of %d, stop_reason=%s, request_id=%s): %s",
                malformed,
                tries,
                response.stop_reason,
                getattr(response, "_request_id", None),
                err,
            )
            if malformed >= tries:
                raise PermanentError(f"model returned a malformed review {tries} times")

    async def ask_tool(
        self, system: str, user: str, tool: dict[str, Any], parse: Callable[[Any], T], *, meter: UsageMeter
    ) -> tuple[T, str]:
        """One answer through the forced ``tool`` (the verification pass, an answer in a thread): ``parse`` of its
        input, and the model that gave it. No cache marks (the question is asked once). A malformed answer is asked
        again with the problem fed back, as a review's is; ``parse`` raises MalformedAnswer."""
        params = self.tool_params(system, user, tool)
        del params["model"], params["max_tokens"]
        feedback: list[dict[str, Any]] = []
        tries = 1 + self._malformed_retries
        for attempt in range(1, tries + 1):
            response = await self._call(meter, **{**params, "messages": params["messages"] + feedback})
            try:
                return parse_tool_answer(response, tool["name"], parse), str(response.model)
            except MalformedAnswer as exc:
                log.warning("%s answer malformed (try %d of %d): %s", tool["name"], attempt, tries, exc)
                feedback = feedback_turns(response, str(exc), tool["name"])
        raise MalformedAnswers(f"model returned a malformed {tool['name']} answer {tries} times")

    def tool_params(self, system: str, user: str, tool: dict[str, Any]) -> dict[str, Any]:
        """The Messages parameters of a forced call of ``tool`` with this reviewer's model (one request of a batch)."""
        return {
            "model": self.model,
            "max_tokens": self._max_output_tokens,
            "system": [{"type": "text", "text": system}],
            "tools": [tool],
            "tool_choice": {"type": "tool", "name": tool["name"]},
            "messages": [{"role": "user", "content": [{"type": "text", "text": user}]}],
        }

    async def batch_params(self, user_blocks: str | Sequence[str], *, shared_blocks: int = 0) -> dict[str, Any]:
        """The Messages parameters of the review's first (forced, tool-less) call, as ``review`` would send them: one
        request of a Message Batch. Its answer is read with ``answer_from``."""
        system, definitions, choice, messages = await self._first_request(user_blocks, shared_blocks, None)
        return {
            "model": self.model,
            "max_tokens": self._max_output_tokens,
            "system": system,
            "tools": definitions,
            "tool_choice": choice,
            "messages": messages,
        }

    async def _first_request(
        self, user_blocks: str | Sequence[str], shared_blocks: int, tools: ToolRunner | None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any], list[dict[str, Any]]]:
        """System blocks, tool definitions, tool choice and messages of a review's first call, cache marks placed."""
        blocks = [user_blocks] if isinstance(user_blocks, str) else list(user_blocks)
        definitions = [REVIEW_TOOL, *(tools.definitions if tools is not None else [])]
        choice = {"type": "any"} if tools is not None else {"type": "tool", "name": REVIEW_TOOL_NAME}
        system = await self._system_blocks(definitions)
        content = await self._user_content(system, definitions, blocks, shared_blocks, follow_up=tools is not None)
        return system, definitions, choice, [{"role": "user", "content": content}]

    async def _system_blocks(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The system prompt, marked for caching when the fixed prefix (tools and system) is long enough."""
        key = tuple(t["name"] for t in tools)
        if key not in self._fixed_tokens:
            probe = [{"role": "user", "content": "."}]
            self._fixed_tokens[key] = await self._count([{"type": "text", "text": SYSTEM_PROMPT}], tools, probe)
        block: dict[str, Any] = {"type": "text", "text": SYSTEM_PROMPT}
        if self._fixed_tokens[key] >= min_cacheable_tokens(self.model):
            block["cache_control"] = EPHEMERAL
        return [block]

    async def _user_content(
        self,
        system: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        blocks: list[str],
        shared_blocks: int,
        *,
        follow_up: bool,
    ) -> list[dict[str, Any]]:
        """The user turn's text blocks with cache marks where they pay: after the blocks shared with the review's other
        requests (its other parts and passes), and at the end only when a ``follow_up`` request will start with the
        whole turn (the next turn of a tool conversation). A write costs 1.25 times the input price and a read 0.1
        times, so a mark that only a retry would read (a malformed or lost answer) costs more than it saves unless
        more than about one review in four is retried: a one-request review pays the whole prompt once, unmarked."""
        content: list[dict[str, Any]] = [{"type": "text", "text": text} for text in blocks if text]
        minimum = min_cacheable_tokens(self.model)
        marks = [len(content) - 1] if content and follow_up else []
        if 0 < shared_blocks < len(content):
            marks.insert(0, shared_blocks - 1)
        for index in marks:
            if await self._count(system, tools, [{"role": "user", "content": content[: index + 1]}]) >= minimum:
                content[index] = {**content[index], "cache_control": EPHEMERAL}
        return content

    async def _count(
        self, system: list[dict[str, Any]], tools: list[dict[str, Any]], messages: list[dict[str, Any]]
    ) -> int:
        """Input tokens of a prompt: the API's count where it offers one, else an over-estimate."""
        if self._counting:
            self.count_calls += 1
            try:
                counted = await self._client.messages.count_tokens(
                    model=self.model,
                    system=system,
                    tools=tools,
                    messages=messages,  # type: ignore[arg-type]
                    extra_body=self._extra_body,
                )
                return int(counted.input_tokens)
            except (anthropic.NotFoundError, anthropic.PermissionDeniedError) as err:
                log.info("token counting is not available (%s); estimating prompt sizes", describe(err))
                self._counting = False
            except anthropic.AnthropicError as err:
                log.info("token counting failed (%s); estimating this prompt's size", type(err).__name__)
            except Exception as err:
                if (failed := credentials_error(err)) is None:
                    raise
                raise failed from err
        return estimate_tokens(json.dumps([tools, system, messages]))

    async def _call(self, meter: UsageMeter, **params: Any) -> Message:
        """One Messages call with this reviewer's model and output cap (a review's turn, or an answer), counted on
        ``meter``; an API error is mapped to the job's error kinds."""
        meter.calls += 1
        self.calls_made += 1
        try:
            response = await self._client.messages.create(
                model=self.model, max_tokens=self._max_output_tokens, extra_body=self._extra_body, **params
            )
        except anthropic.AnthropicError as err:
            raise map_api_error(err, now=self._clock()) from err
        except Exception as err:
            if (failed := credentials_error(err)) is None:
                raise
            raise failed from err
        meter.add(response.usage)
        return response


class ToolRunner(Protocol):
    """Read-only tools the model may call before it submits (reviewer_app.review.explore)."""

    definitions: list[dict[str, Any]]

    @property
    def max_turns(self) -> int: ...

    @property
    def names(self) -> frozenset[str]: ...

    async def run(self, calls: Sequence[dict[str, Any]]) -> list[dict[str, Any]]: ...


def _assistant_content(response: Message) -> list[dict[str, Any]]:
    """The model's turn as request blocks (its text and its tool calls), to send back and to checkpoint."""
    out: list[dict[str, Any]] = []
    for b in response.content:
        if b.type == "tool_use":
            out.append({"type": "tool_use", "id": b.id, "name": b.name, "input": b.input})
        elif b.type == "text" and b.text:
            out.append({"type": "text", "text": b.text})
    return out


def _tool_calls(content: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for b in content if b.get("type") == "tool_use"]


def _mark_last(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history with a cache mark on its last block, so the next turn reads every turn before it."""
    if not history:
        return history
    last = history[-1]
    blocks = list(last["content"])
    blocks[-1] = {**blocks[-1], "cache_control": EPHEMERAL}
    return [*history[:-1], {**last, "content": blocks}]
