"""The ask stage: the model, however it is reached, and its findings checked. Callers hand it a question and get an
answer; which way each part takes is decided here. A part answered already (by an earlier attempt, or by its Message
Batch) is taken as it is; a part a batch is to answer waits on it (the job is deferred, no attempt counted); the others
are asked now, with the read-only repository tools where the repository opts in, each tool turn and finished part
checkpointed on the job. Then each finding's quote is checked against the code (core/evidence.py), and the findings
that hold go to the verification pass (review/verify.py): one more request, batched when the review is, checkpointed
like a part, whose verdicts decide what is published (core/precision.py). An answer in a thread is one question, answered through its own tool.
Every token spent goes to the usage ledger as it is spent (the verification's as its own kind), and the answer is
stored on the job before anything is published."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from reviewer_app.core.anchoring import resolve_path
from reviewer_app.core.evidence import FileText, added_lines, base_lines, check_evidence
from reviewer_app.core.job_records import ModelProgress, PartAnswer, StoredAnswer, VerifyAnswer
from reviewer_app.core.passes import merge_passes, outvoted
from reviewer_app.core.precision import INVENTED, OUTVOTED, Withheld, apply_verdicts, withhold_covered
from reviewer_app.core.review_model import ModelAnswer, ModelComment
from reviewer_app.dispatch.context import JobContext
from reviewer_app.github.client import GitHubClient
from reviewer_app.review.batches import PENDING, Batches, BatchRoute
from reviewer_app.review.claude import ClaudeReviewer, MalformedAnswers, UsageMeter
from reviewer_app.review.claude_parse import parse_tool_answer
from reviewer_app.review.explore import RepositoryTools
from reviewer_app.review.gate import installation_of
from reviewer_app.review.gather import Part, Question, Sources
from reviewer_app.review.reading import ContentReader
from reviewer_app.review.verify import (
    MAX_FINDINGS,
    VERIFY_TOOL_NAME,
    VerifyRequest,
    parse_verdicts,
    verify_request,
)
from reviewer_app.review.verify_context import finding_context, look_up
from reviewer_app.store.base import REVIEW, VERIFICATION, Usage

if TYPE_CHECKING:
    from anthropic.types import Message

log = logging.getLogger(__name__)
T = TypeVar("T")

NOTHING_REVIEWED = "There was nothing in this pull request that the reviewer reviews."


class Ask:
    """The ask stage, for review jobs (a question in parts) and answers in threads (one question, through its own tool)."""

    def __init__(
        self,
        github: GitHubClient,
        claude: ClaudeReviewer,
        batches: Batches | None = None,
        *,
        reader: ContentReader | None = None,
        verifier: ClaudeReviewer | None = None,
    ) -> None:
        self.github = github
        self.claude = claude
        self.batches = batches  # Message Batches for work that can wait (review/batches.py); None: all interactive
        self.reader = reader  # files for the evidence check; None: findings are not checked against the code
        self.verifier = verifier  # the verification pass's model; None: no verification

    async def __call__(
        self, ctx: JobContext, question: Question, *, still_wanted: Callable[[], Awaitable[None]]
    ) -> StoredAnswer:
        """The model's whole answer to ``question``; raises Deferred while a part waits on a batch. ``still_wanted`` is
        awaited before each part is asked (it raises when the review is no longer wanted)."""
        tools = self._tools(ctx, question)
        # [batches] A part may be answered by a Message Batch (half price) instead of a call now.
        route = (
            await self.batches.route(ctx, repo_batch=question.batch, tools=tools is not None) if self.batches else None
        )
        answers: list[PartAnswer] = []
        for part in question.parts:
            done = _progress(ctx).parts.get(part.key)
            if done is None:
                await still_wanted()
                # [batches] the batch's answer, checkpointed like a finished part; PENDING: it waits on a batch.
                batched = await route.answer(part.key, part.blocks, shared=question.shared) if route else None
                if batched is PENDING:
                    continue
                if isinstance(batched, PartAnswer):
                    done = batched
                    await _save(ctx, _progress(ctx).with_part(part.key, done))
                else:
                    done = await self._ask_part(ctx, part, question.shared, tools)
            answers.append(done)
        if route is not None:
            await route.defer()  # [batches] sends what is to be sent; raises Deferred while a part waits on a batch
        checked = await self._checked(ctx, question, _joined(question, answers), route, still_wanted)
        voted = _voted(checked, question)
        if outvoted_count := len(voted.withheld) - len(checked.withheld):
            log.info("job %s: %d finding(s) found by too few passes withheld", ctx.job.id, outvoted_count)
        return _with_learnings(voted, question)

    async def thread_answer(
        self, ctx: JobContext, system: str, user: str, tool: dict[str, Any], parse: Callable[[Any], T]
    ) -> tuple[T, str]:
        """One answer in a thread through its forced ``tool`` (the answer and how it classifies the reply): ``parse``
        of the tool's input, and the model that gave it."""
        meter = UsageMeter()
        try:
            return await self.claude.ask_tool(system, user, tool, parse, meter=meter)
        finally:
            if meter.input_tokens or meter.output_tokens:  # what was paid for is on record, even on failure
                await ctx.record_usage(self._usage(meter))

    def _tools(self, ctx: JobContext, question: Question) -> RepositoryTools | None:
        """The read-only repository tools at the job's head, when the question offers them."""
        if question.tools is None:
            return None
        job = ctx.job
        return RepositoryTools(
            self.github, installation_of(ctx), job.repo_full_name, job.head_sha, question.tools, question.codebase
        )

    async def _ask_part(self, ctx: JobContext, part: Part, shared: bool, tools: RepositoryTools | None) -> PartAnswer:
        """Ask the model about one part. Each tool turn is checkpointed with the job as it completes (a resumed
        attempt replays the stored turns instead of paying for them again), and so is the finished part, before any
        later step that can fail (another part, the evidence check's reads, the verification). Every turn's tokens go
        to the usage ledger as soon as they are spent."""
        meter, recorded = UsageMeter(), UsageMeter()

        async def record() -> None:
            nonlocal recorded
            spent = meter.since(recorded)
            recorded = replace(meter)
            if spent.calls or spent.input_tokens or spent.output_tokens:
                await ctx.record_usage(self._usage(spent))

        async def on_turn(turn: dict[str, Any]) -> None:
            await record()
            await _save(ctx, _progress(ctx).with_turn(part.key, turn))

        try:
            # The first block (framing, description, file list) is the same in every part: cached once for all.
            answer: ModelAnswer = await self.claude.review(
                part.blocks,
                meter=meter,
                shared_blocks=1 if shared else 0,
                tools=tools,
                turns=_progress(ctx).turns.get(part.key, ()),
                on_turn=on_turn,
            )
        finally:
            # What was paid for is on record, even when the call failed or the process dies next.
            await record()
        done = PartAnswer(answer.summary, answer.comments, answer.model, *_tokens(meter))
        await _save(ctx, _progress(ctx).with_part(part.key, done))  # a later step that fails does not cost it
        return done

    async def _checked(
        self,
        ctx: JobContext,
        question: Question,
        answer: StoredAnswer,
        route: BatchRoute | None,
        still_wanted: Callable[[], Awaitable[None]],
    ) -> StoredAnswer:
        """The answer with its findings checked: those whose quote is not in the code withheld, the rest (when the
        review verifies) put to the verification pass, refuted and unconfident ones withheld."""
        sources = question.sources
        comments = [replace(c, path=resolve_path(c.path, sources.diffs)) for c in answer.comments]
        # What the team said not to flag is withheld first (the pure rule, core/learnings.covers); the verifier, where
        # it runs, is shown the same learnings for what the rule misses.
        do_not_flag = [x for x in question.learnings if x.kind == "do-not-flag"]
        comments, covered = withhold_covered(comments, do_not_flag)
        if covered:
            log.info("job %s: %d finding(s) withheld by the team's learnings", ctx.job.id, len(covered))
        if not comments or self.reader is None:
            return (
                replace(answer, comments=tuple(comments), withheld=(*answer.withheld, *covered)) if covered else answer
            )
        texts = await self._texts(ctx, sources, comments)
        evidence = check_evidence(comments, texts)
        withheld = (*covered, *(Withheld(c, INVENTED) for c in evidence.invented))
        if evidence.invented or evidence.reanchored:
            log.info(
                "job %s: evidence check: %d finding(s) kept (%d moved onto their quote, %d unchecked), %d invented",
                ctx.job.id,
                len(evidence.kept),
                evidence.reanchored,
                evidence.unchecked,
                len(evidence.invented),
            )
        kept = evidence.kept
        if question.verify is None or self.verifier is None or not kept:
            return replace(answer, comments=kept, withheld=withheld)
        # Read and parsed off the event loop, as the prompt's cross-file context is (review/crossfile.py).
        related = await asyncio.to_thread(finding_context, question.codebase, kept[:MAX_FINDINGS])

        def request_of(findings: Sequence[ModelComment], **extra: Any) -> VerifyRequest:
            return verify_request(
                sources.title,
                sources.description,
                findings,
                texts,
                sources.diffs,
                learnings=do_not_flag,
                can_look_up=question.codebase is not None,
                **extra,
            )

        request = request_of(kept, related=related)
        verified = await self._verified(ctx, request, route, still_wanted)
        needs = {i: v.need for i, v in verified.verdicts.items() if v.need}
        if needs and question.codebase is not None:
            # One bounded lookup per finding that was uncertain for lack of code, then one more look at those.
            codebase, asked = question.codebase, sorted(needs)
            follow = request_of(
                [request.findings[i] for i in asked],
                related={j: related[i] for j, i in enumerate(asked) if i in related},
                lookups={
                    j: (
                        needs[i],
                        await asyncio.to_thread(
                            look_up,
                            codebase,
                            needs[i],
                            _pointers(verified, request.findings, i),
                            at=(request.findings[i].path, request.findings[i].line),
                        ),
                    )
                    for j, i in enumerate(asked)
                },
            )
            again = await self._verified(ctx, follow, route, still_wanted)
            log.info("job %s: %d finding(s) looked up for the verifier", ctx.job.id, len(asked))
            verdicts = {**verified.verdicts, **{asked[j]: v for j, v in again.verdicts.items()}}
            verified = VerifyAnswer(verdicts, verified.model)
        shown = [x for x in do_not_flag if x.id in request.learnings]  # a verdict may name only what it was shown
        judged, refused = apply_verdicts(
            request.findings, verified.verdicts, min_confidence=question.verify.min_confidence, learnings=shown
        )
        log.info(
            "job %s: verification by %s: %d of %d finding(s) kept",
            ctx.job.id,
            verified.model or "(none)",
            len(judged),
            len(request.findings),
        )
        return replace(
            answer,
            comments=(*judged, *kept[len(request.findings) :]),  # past the request's limit: published unverified
            withheld=(*withheld, *refused),
            verified_by=verified.model,
        )

    async def _texts(self, ctx: JobContext, sources: Sources, comments: Sequence[ModelComment]) -> dict[str, FileText]:
        """Each commented file at the head (read, cached by blob) and at the base (rebuilt from the head and its
        diff), as far as they are known."""
        assert self.reader is not None
        job = ctx.job
        out: dict[str, FileText] = {}
        for path in dict.fromkeys(c.path for c in comments):
            diff = sources.diffs.get(path)
            head = [] if diff is not None and diff.status == "removed" else added_lines(diff)
            if head is None:
                text, _ = await self.reader.try_read(
                    installation_of(ctx), job.repo_full_name, path, job.head_sha, blob_sha=sources.blobs.get(path)
                )
                head = text.split("\n") if text is not None else None
            base = base_lines(diff, None if diff is not None and diff.status == "removed" else head)
            out[path] = FileText(head, base)
        return out

    async def _verified(
        self,
        ctx: JobContext,
        request: VerifyRequest,
        route: BatchRoute | None,
        still_wanted: Callable[[], Awaitable[None]],
    ) -> VerifyAnswer:
        """The verifier's answer to ``request``: checkpointed already, from its Message Batch (sent when the review is
        batched; the job waits on it), or asked now; checkpointed before it is used."""
        done = _progress(ctx).verified.get(request.key)
        if done is not None:
            return done
        await still_wanted()
        verifier = self.verifier
        assert verifier is not None
        count = len(request.findings)
        system, tool = request.system_and_tool

        async def params() -> dict[str, Any]:
            return verifier.tool_params(system, request.user, tool)

        def read(message: Message) -> VerifyAnswer:
            verdicts = parse_tool_answer(
                message,
                VERIFY_TOOL_NAME,
                lambda data: parse_verdicts(data, count, request.learnings, needs=request.needs_allowed),
            )
            return VerifyAnswer(verdicts, str(message.model))

        batched = await route.request(request.key, params, read, model=verifier.model) if route else None
        if batched is PENDING and route is not None:
            await route.defer()  # raises Deferred: the verification waits on its batch
        done = batched if isinstance(batched, VerifyAnswer) else await self._verify_now(ctx, request)
        await _save(ctx, _progress(ctx).with_verified(request.key, done))
        return done

    async def _verify_now(self, ctx: JobContext, request: VerifyRequest) -> VerifyAnswer:
        """The verification asked interactively. An answer that never fits the tool publishes the findings unverified
        (the check is a filter, not a gate): a review is not lost to its verifier."""
        verifier = self.verifier
        assert verifier is not None
        meter = UsageMeter()
        count = len(request.findings)
        try:
            system, tool = request.system_and_tool
            verdicts, model = await verifier.ask_tool(
                system,
                request.user,
                tool,
                lambda data: parse_verdicts(data, count, request.learnings, needs=request.needs_allowed),
                meter=meter,
            )
        except MalformedAnswers as exc:
            log.warning("job %s: verification not usable (%s); the findings are published unverified", ctx.job.id, exc)
            return VerifyAnswer({}, "")
        finally:
            if meter.input_tokens or meter.output_tokens:
                await ctx.record_usage(_usage(meter, verifier.model, VERIFICATION))
        return VerifyAnswer(verdicts, model)

    def _usage(self, spent: UsageMeter) -> Usage:
        return _usage(spent, self.claude.model, REVIEW)


def _usage(spent: UsageMeter, model: str, kind: str) -> Usage:
    return Usage(
        model=model,
        input_tokens=spent.input_tokens,
        output_tokens=spent.output_tokens,
        cache_creation_tokens=spent.cache_creation_input_tokens,
        cache_read_tokens=spent.cache_read_input_tokens,
        kind=kind,
    )


async def store_answer(ctx: JobContext, answer: StoredAnswer) -> None:
    """The answer is stored on the job before anything is published: a retry publishes it without a second model
    call. It replaces the progress it was built from (finished parts, tool turns)."""
    details = replace(ctx.job.details, model_progress=None)
    await ctx.checkpoint(answer=answer, details=details)
    ctx.job = replace(ctx.job, answer=answer, details=details)


def _joined(question: Question, answers: Sequence[PartAnswer]) -> StoredAnswer:
    """One answer, however many parts and passes: the first pass's risks joined into one summary (a part is told to
    give only those), each pass's comments together, and the passes' findings merged (core/passes.py) with what
    each pass cost."""
    by_pass: dict[int, list[PartAnswer]] = {}
    for part, answer in zip(question.parts, answers, strict=True):
        by_pass.setdefault(part.review_pass, []).append(answer)
    first = by_pass.get(1, [])
    summaries = [a.summary.strip() for a in first] if question.parts else [NOTHING_REVIEWED]
    merged = merge_passes([[c for a in done for c in a.comments] for _, done in sorted(by_pass.items())])
    several = len(by_pass) > 1
    comments = (
        tuple(replace(c, votes=v) for c, v in zip(merged.comments, merged.votes, strict=True))
        if several
        else merged.comments
    )
    return StoredAnswer(
        summary=" ".join(dict.fromkeys(s for s in summaries if s)),
        comments=comments,
        not_covered=question.not_covered,
        files_reviewed=question.files_reviewed,
        model=answers[-1].model if answers else "",
        parts=len(first),
        incremental_note=question.incremental_note,
        passes=tuple(_pass_cost(done) for _, done in sorted(by_pass.items())) if several else (),
    )


def _voted(answer: StoredAnswer, question: Question) -> StoredAnswer:
    """A review of several passes after the vote (core/passes.outvoted): what too few passes found, and the verifier
    is not sure of, is withheld."""
    if not question.vote or len(answer.passes) < 2:
        return answer
    kept, out = outvoted(answer.comments, len(answer.passes))
    if not out:
        return answer
    return replace(answer, comments=tuple(kept), withheld=(*answer.withheld, *(Withheld(c, OUTVOTED) for c in out)))


def _pass_cost(answers: Sequence[PartAnswer]) -> tuple[int, int, int]:
    """One pass's input and output tokens and findings."""
    return (
        sum(a.input_tokens for a in answers),
        sum(a.output_tokens for a in answers),
        sum(len(a.comments) for a in answers),
    )


def _tokens(meter: UsageMeter) -> tuple[int, int]:
    """Every input token a request took (cached or not), and its output tokens."""
    taken = meter.input_tokens + meter.cache_creation_input_tokens + meter.cache_read_input_tokens
    return taken, meter.output_tokens


def _with_learnings(answer: StoredAnswer, question: Question) -> StoredAnswer:
    """The answer naming the learnings the review used: those in its prompt, and those that withheld a finding."""
    withholding = (w.learning for w in answer.withheld if w.learning is not None)
    return replace(answer, learnings=tuple(sorted({*question.in_prompt, *withholding})))


def _progress(ctx: JobContext) -> ModelProgress:
    """The job's model answer not yet stored (finished parts, tool turns), as last saved."""
    return ctx.job.details.model_progress or ModelProgress()


async def _save(ctx: JobContext, progress: ModelProgress) -> None:
    details = replace(ctx.job.details, model_progress=progress)
    await ctx.checkpoint(details=details)
    ctx.job = replace(ctx.job, details=details)


def _pointers(verified: VerifyAnswer, findings: Sequence[ModelComment], index: int) -> tuple[str, ...]:
    """What says which definition a finding's lookup is about, most telling first: the verifier's reason for asking,
    then the finding's own words and quote."""
    finding = findings[index]
    return verified.verdicts[index].reason, " ".join(x for x in (finding.body, finding.failure, finding.quote) if x)
