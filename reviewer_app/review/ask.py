"""The ask stage: the model, however it is reached. Callers hand it a question and get an answer; which way each part
takes is decided here. A part answered already (by an earlier attempt, or by its Message Batch) is taken as it is; a
part a batch is to answer waits on it (the job is deferred, no attempt counted); the others are asked now, with the
read-only repository tools where the repository opts in, each tool turn and finished part checkpointed on the job.
An answer in a thread is one plain question. Every token spent goes to the usage ledger as it is spent, and the
answer is stored on the job before anything is published."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from reviewer_app.core.job_records import ModelProgress, PartAnswer, StoredAnswer
from reviewer_app.core.review_model import ModelAnswer
from reviewer_app.dispatch.context import JobContext
from reviewer_app.github.client import GitHubClient
from reviewer_app.review.batches import PENDING, Batches
from reviewer_app.review.claude import ClaudeReviewer, UsageMeter
from reviewer_app.review.explore import RepositoryTools
from reviewer_app.review.gate import installation_of
from reviewer_app.review.gather import Part, Question
from reviewer_app.store.base import Usage

log = logging.getLogger(__name__)

NOTHING_REVIEWED = "There was nothing in this pull request that the reviewer reviews."


class Ask:
    """The ask stage, for review jobs (a question in parts) and answers in threads (one plain question)."""

    def __init__(self, github: GitHubClient, claude: ClaudeReviewer, batches: Batches | None = None) -> None:
        self.github = github
        self.claude = claude
        self.batches = batches  # Message Batches for work that can wait (review/batches.py); None: all interactive

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
        # A verification pass (a second model call per review that confirms or refutes each finding) goes here: it
        # takes the question and the parts' answers, and what it keeps is the answer joined and stored.
        return _joined(question, answers)

    async def plain(self, ctx: JobContext, system: str, user: str) -> StoredAnswer:
        """A plain-text answer to one question (an answer in a thread), stored as a review's summary is."""
        meter = UsageMeter()
        try:
            text, model = await self.claude.answer(system, user, meter=meter)
        finally:
            if meter.input_tokens or meter.output_tokens:  # what was paid for is on record, even on failure
                await ctx.record_usage(self._usage(meter))
        return StoredAnswer(summary=text, model=model)

    def _tools(self, ctx: JobContext, question: Question) -> RepositoryTools | None:
        """The read-only repository tools at the job's head, when the question offers them."""
        if question.tools is None:
            return None
        job = ctx.job
        return RepositoryTools(self.github, installation_of(ctx), job.repo_full_name, job.head_sha, question.tools)

    async def _ask_part(self, ctx: JobContext, part: Part, shared: bool, tools: RepositoryTools | None) -> PartAnswer:
        """Ask the model about one part. Each tool turn is checkpointed with the job as it completes (a resumed
        attempt replays the stored turns instead of paying for them again), and so is a finished part of a large
        review. Every turn's tokens go to the usage ledger as soon as they are spent."""
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
        done = PartAnswer(answer.summary, answer.comments, answer.model)
        if shared:
            await _save(ctx, _progress(ctx).with_part(part.key, done))  # a later part that fails does not cost it again
        return done

    def _usage(self, spent: UsageMeter) -> Usage:
        return Usage(
            model=self.claude.model,
            input_tokens=spent.input_tokens,
            output_tokens=spent.output_tokens,
            cache_creation_tokens=spent.cache_creation_input_tokens,
            cache_read_tokens=spent.cache_read_input_tokens,
        )


async def store_answer(ctx: JobContext, answer: StoredAnswer) -> None:
    """The answer is stored on the job before anything is published: a retry publishes it without a second model
    call. It replaces the progress it was built from (finished parts, tool turns)."""
    details = replace(ctx.job.details, model_progress=None)
    await ctx.checkpoint(answer=answer, details=details)
    ctx.job = replace(ctx.job, answer=answer, details=details)


def _joined(question: Question, answers: Sequence[PartAnswer]) -> StoredAnswer:
    """One answer, however many parts: each part's risks joined into one summary (a part is told to give only
    those), their comments together."""
    summaries = [a.summary.strip() for a in answers] if question.parts else [NOTHING_REVIEWED]
    return StoredAnswer(
        summary=" ".join(dict.fromkeys(s for s in summaries if s)),
        comments=tuple(c for a in answers for c in a.comments),
        not_covered=question.not_covered,
        files_reviewed=question.files_reviewed,
        model=answers[-1].model if answers else "",
        parts=len(question.parts),
        incremental_note=question.incremental_note,
    )


def _progress(ctx: JobContext) -> ModelProgress:
    """The job's model answer not yet stored (finished parts, tool turns), as last saved."""
    return ctx.job.details.model_progress or ModelProgress()


async def _save(ctx: JobContext, progress: ModelProgress) -> None:
    details = replace(ctx.job.details, model_progress=progress)
    await ctx.checkpoint(details=details)
    ctx.job = replace(ctx.job, details=details)
