"""Half-price reviews for work that can wait: model requests sent through Anthropic's Message Batches API.

A job the policy batches (core/batching.py) sends each part of its review as one request of a batch (jobs ready
together share one), records the batch and request ids, and is deferred (no attempt counted) while the batch runs.
The batch duty (``BatchPoller``) asks Anthropic about open batches, records each result with its request and wakes
the job; the job's next run reads the result as the model's answer and checkpoints it like an interactive one, so
publication, retries and supersession are unchanged. A result that is not a usable answer (errored, expired,
canceled, malformed) is asked again interactively. A job that ended while batched has its requests withdrawn, and a
batch left with nothing pending is cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from reviewer_app.core.batching import SUCCEEDED, WAITING_PREFIX, BatchPolicy, batch_reason, custom_id
from reviewer_app.core.errors import Deferred, PermanentError, TransientError
from reviewer_app.core.job_records import PartAnswer
from reviewer_app.dispatch.context import JobContext
from reviewer_app.review.claude import ClaudeReviewer
from reviewer_app.review.claude_errors import map_api_error
from reviewer_app.review.claude_parse import MalformedAnswer, answer_from
from reviewer_app.review.model_client import ModelClient
from reviewer_app.review.sdk import anthropic
from reviewer_app.store.base import BatchRequest, Store, Usage

if TYPE_CHECKING:
    from anthropic.types import Message

log = logging.getLogger(__name__)
T = TypeVar("T")

# A deferred job runs again when the duty records its result (it wakes the job); this is only the net under that,
# for a wake-up lost with a crashed process: the job looks at its requests again after this long.
RECHECK_SECONDS = 900.0
_MAX_ERROR_CHARS = 200


class Pending:
    """A part whose answer comes from a batch that has not ended (or is about to be sent)."""


PENDING = Pending()


class BatchSubmitter:
    """Sends the requests that are ready together as one Message Batch: each ``submit`` waits up to
    ``gather_seconds`` for others to join, then one ``batches.create`` carries them all."""

    def __init__(self, client: ModelClient, *, gather_seconds: float, clock: Callable[[], float]) -> None:
        self._client = client
        self.gather_seconds = gather_seconds
        self._clock = clock
        self._waiting: list[tuple[list[dict[str, Any]], asyncio.Future[str]]] = []
        self._flush: asyncio.Task[None] | None = None
        self.unavailable: str | None = None  # why batches cannot be used here (a permanent refusal), once seen
        self.batches_created = 0

    async def submit(self, requests: list[dict[str, Any]]) -> str:
        """The id of the batch that carries ``requests``; raises a JobError when the batch could not be created."""
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting.append((requests, future))
        if self._flush is None or self._flush.done():
            self._flush = asyncio.create_task(self._send_later(), name="batch-submit")
        return await asyncio.shield(future)

    async def _send_later(self) -> None:
        # Rounds until one gathers nothing: a request submitted while a create was in flight found this task running
        # and started none of its own, so it goes in the next round (it was left waiting until the job timed out).
        while True:
            await asyncio.sleep(self.gather_seconds)
            waiting, self._waiting = self._waiting, []
            if not waiting:
                return
            try:
                await self._send(waiting)
            finally:  # cancelled (shutdown): no submitter is left waiting on a future nobody will settle
                for _, future in waiting:
                    if not future.done():
                        future.set_exception(TransientError("the batch was not sent (its sender stopped)"))

    async def _send(self, waiting: list[tuple[list[dict[str, Any]], asyncio.Future[str]]]) -> None:
        requests = [r for rs, _ in waiting for r in rs]
        try:
            batch = await self._client.messages.batches.create(requests=requests)  # type: ignore[arg-type]
        except anthropic.AnthropicError as err:
            error = map_api_error(err, now=self._clock())
            if isinstance(error, PermanentError):
                self.unavailable = error.reason
                log.warning("Message Batches refused (%s): reviews run interactively from now on", error.reason)
                error = TransientError(f"Message Batches refused ({error.reason}); asking interactively next")
            for _, future in waiting:
                if not future.done():
                    future.set_exception(error)
            return
        self.batches_created += 1
        log.info("sent Message Batch %s with %d request(s) from %d job(s)", batch.id, len(requests), len(waiting))
        for _, future in waiting:
            if not future.done():
                future.set_result(batch.id)


@dataclass(frozen=True)
class Batches:
    """What the review pipeline needs to batch: the policy, the submitter and the reviewer that builds requests."""

    submitter: BatchSubmitter
    claude: ClaudeReviewer
    policy: BatchPolicy

    async def route(self, ctx: JobContext, *, repo_batch: bool | None, tools: bool) -> BatchRoute:
        """This attempt's way to the model: the job's batched requests so far, and whether new ones are batched."""
        job = ctx.job
        reason = batch_reason(
            trigger=job.trigger,
            action=job.details.action,
            repo_batch=repo_batch,
            waited_seconds=ctx.clock() - job.created_at,
            tools=tools,
            policy=self.policy,
        )
        if self.submitter.unavailable is not None:
            reason = None
        requests = {r.custom_id: r for r in await ctx.store.batch_requests_of(job.id)}
        return BatchRoute(self, ctx, reason, requests)


class BatchRoute:
    """One attempt's batched parts: answers that came back, requests still out, and requests to send."""

    def __init__(self, batches: Batches, ctx: JobContext, reason: str | None, requests: dict[str, BatchRequest]):
        self._batches = batches
        self._ctx = ctx
        self.reason = reason
        self._requests = requests
        self._to_send: list[tuple[str, str, str, dict[str, Any]]] = []  # (custom_id, part key, model, request)
        self._out: set[str] = set()  # batch ids a part waits on

    async def answer(self, key: str, blocks: Sequence[str], *, shared: bool) -> PartAnswer | Pending | None:
        """The part's answer from its batch, PENDING while it is out (or about to be sent), or None: ask it now."""
        claude = self._batches.claude

        async def params() -> dict[str, Any]:
            return await claude.batch_params(list(blocks), shared_blocks=1 if shared else 0)

        def read(message: Message) -> PartAnswer:
            answer = answer_from(message)
            taken = answer.input_tokens + answer.cache_creation_input_tokens + answer.cache_read_input_tokens
            return PartAnswer(answer.summary, answer.comments, answer.model, taken, answer.output_tokens)

        return await self.request(key, params, read, model=claude.model)

    async def request(
        self, key: str, params: Callable[[], Awaitable[dict[str, Any]]], read: Callable[[Message], T], *, model: str
    ) -> T | Pending | None:
        """The answer to request ``key`` from its batch (``read`` of its Message; it raises MalformedAnswer or
        ValueError for one that is not usable), PENDING while it is out (or about to be sent with ``params``), or None:
        ask it now."""
        job = self._ctx.job
        name = custom_id(job.id, key)
        request = self._requests.get(name)
        if request is None:
            if self.reason is None:
                return None
            self._to_send.append((name, key, model, {"custom_id": name, "params": await params()}))
            return PENDING
        if request.state == "pending":
            self._out.add(request.batch_id)
            return PENDING
        if request.state != SUCCEEDED or request.result is None:
            log.info(
                "job %s: batched request %s ended %s (%s); asking interactively",
                job.id,
                name,
                request.state,
                request.error or "no answer",
            )
            return None
        try:
            answer = read(anthropic.types.Message.model_validate_json(request.result))
        except (MalformedAnswer, ValueError) as exc:
            log.warning(
                "job %s: the batch's answer to %s is not a usable answer (%s); asking interactively", job.id, name, exc
            )
            return None
        log.info("job %s: answer for %s came from Message Batch %s", job.id, key, request.batch_id)
        return answer

    async def defer(self) -> None:
        """Send what is to be sent, record it with the job, and defer the job while any part waits on a batch."""
        ctx = self._ctx
        if self._to_send:
            to_send, self._to_send = list(self._to_send), []

            async def send_and_record() -> str:
                batch_id = await self._batches.submitter.submit([r for _, _, _, r in to_send])
                for model in dict.fromkeys(m for _, _, m, _ in to_send):
                    await ctx.store.record_batch_requests(
                        ctx.job.id,
                        batch_id=batch_id,
                        model=model,
                        parts=[(name, key) for name, key, m, _ in to_send if m == model],
                        now=ctx.clock(),
                    )
                return batch_id

            # Seen through to its record even if the runner is cancelled while the batch gathers (a lost lease, a
            # shutdown): a batch created at Anthropic is always known, so the next attempt waits on it instead of
            # sending another (and the poller can withdraw it if the job ends).
            batch_id = await ctx.write_through(send_and_record())
            self._out.add(batch_id)
        if self._out:
            raise Deferred(
                f"{WAITING_PREFIX} {', '.join(sorted(self._out))} ({self.reason or 'sent earlier'}); "
                "reviewed when it ends, within 24 hours",
                retry_at=ctx.clock() + RECHECK_SECONDS,
            )


class BatchPoller:
    """The batch duty's pass: withdraw requests of jobs that ended (cancel a batch left with nothing pending), then
    ask about each open batch and record the results of those that ended."""

    def __init__(
        self,
        client: ModelClient,
        store: Store,
        *,
        clock: Callable[[], float] = time.time,
        on_usage: Callable[[Usage], None] | None = None,
        unavailable: str | None = None,
    ) -> None:
        self._client = client
        self._store = store
        self._clock = clock
        self._on_usage = on_usage
        # Why this client reaches no Message Batches (a provider without them), or None. Batches sent before the
        # provider changed cannot be asked about: their requests are settled as errored, so each is asked again.
        self._unavailable = unavailable
        self.cancelled: list[str] = []  # batches this poller cancelled, for tests and logs

    async def run_once(self) -> int:
        """One pass; how many requests' results were recorded."""
        for batch_id in await self._store.withdraw_requests_of_ended_jobs():
            await self._cancel(batch_id)
        recorded = 0
        for batch_id in await self._store.open_batches():
            recorded += await self._poll(batch_id)
        return recorded

    async def _cancel(self, batch_id: str) -> None:
        if self._unavailable is not None:
            return
        try:
            await self._client.messages.batches.cancel(batch_id)
        except anthropic.AnthropicError as err:
            # Not fatal: the batch runs to its end, and its results are recorded (for their tokens) but used by no job.
            log.warning("could not cancel Message Batch %s: %s", batch_id, type(err).__name__)
            return
        self.cancelled.append(batch_id)
        log.info("cancelled Message Batch %s: every job that waited on it ended", batch_id)

    async def _poll(self, batch_id: str) -> int:
        if self._unavailable is not None:
            return await self._settle_rest(batch_id, "errored", self._unavailable)
        try:
            batch = await self._client.messages.batches.retrieve(batch_id)
        except anthropic.NotFoundError:
            # Gone (deleted in the Console, or the workspace changed): its requests are asked interactively.
            return await self._settle_rest(batch_id, "errored", "the batch is gone (HTTP 404)")
        except anthropic.AnthropicError as err:
            log.warning(
                "Message Batch %s: could not ask about it (%s); trying again next pass", batch_id, type(err).__name__
            )
            return 0
        if batch.processing_status != "ended":
            return 0
        recorded = 0
        try:
            results = await self._client.messages.batches.results(batch_id)
            async for item in results:
                recorded += await self._settle(item)
        except anthropic.AnthropicError as err:
            log.warning(
                "Message Batch %s: reading its results failed (%s); trying again next pass",
                batch_id,
                type(err).__name__,
            )
            return recorded
        # A request of ours the results did not name cannot be answered any more: asked interactively.
        return recorded + await self._settle_rest(batch_id, "errored", "missing from the batch's results")

    async def _settle(self, item: Any) -> int:
        result = item.result
        usage: Usage | None = None
        message_json: str | None = None
        error: str | None = None
        if result.type == SUCCEEDED:
            message: Message = result.message
            message_json = message.model_dump_json()
            u = message.usage
            usage = Usage(
                model=str(message.model),
                input_tokens=u.input_tokens or 0,
                output_tokens=u.output_tokens or 0,
                cache_creation_tokens=u.cache_creation_input_tokens or 0,
                cache_read_tokens=u.cache_read_input_tokens or 0,
            )
        elif result.type == "errored":
            inner = getattr(result.error, "error", None)
            kind, text = getattr(inner, "type", "error"), str(getattr(inner, "message", "") or "")
            error = f"{kind}: {text}"[:_MAX_ERROR_CHARS]
        job_id = await self._store.settle_batch_request(
            item.custom_id, state=str(result.type), result=message_json, error=error, usage=usage, now=self._clock()
        )
        if job_id is None:
            return 0
        if usage is not None and self._on_usage is not None:
            self._on_usage(usage)
        log.info("job %s: batched request %s %s", job_id, item.custom_id, result.type)
        return 1

    async def _settle_rest(self, batch_id: str, state: str, error: str) -> int:
        settled = 0
        for name in await self._store.open_requests_of_batch(batch_id):
            if await self._store.settle_batch_request(
                name, state=state, result=None, error=error, usage=None, now=self._clock()
            ):
                settled += 1
        return settled
