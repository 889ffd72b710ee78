"""The review runner: one job read top to bottom, as four stages with typed hand-offs.

    gate     is the review still wanted, and for whom          -> Wanted (the pull request, the repository's settings)
    gather   what changed, and what the model is asked about it -> Change, then Question (only without a stored answer)
    ask      the model, however it is reached, and its findings checked (evidence, verification)
                                                                -> StoredAnswer (stored on the job before publishing)
    publish  rank and cap, render, post once (reconciled by marker), record, tend the PR's threads -> the outcome

A stage imports only the stages above it in this list (a later stage takes an earlier one's hand-off, and asks the
gate again before each model call and before it posts); none imports this module. Every external write is
recoverable: the model's answer is stored before publication, and publication reconciles against the marker first.
"""

from __future__ import annotations

import logging

from reviewer_app.dispatch.context import JobContext
from reviewer_app.github.check_run_text import desired_check
from reviewer_app.github.checks import CheckRuns
from reviewer_app.github.client import GitHubClient
from reviewer_app.github.scopes import as_work
from reviewer_app.review.ask import Ask, store_answer
from reviewer_app.review.batches import Batches
from reviewer_app.review.claude import ClaudeReviewer
from reviewer_app.review.gate import Gate, ends_without_access
from reviewer_app.review.gather import Gather
from reviewer_app.review.memory import Memory
from reviewer_app.review.publish import Publish
from reviewer_app.review.reading import ContentReader
from reviewer_app.review.settings import ReviewSettings
from reviewer_app.review.signals import Signals

log = logging.getLogger(__name__)


class ReviewPipeline:
    """The dispatcher's runner for review jobs."""

    def __init__(
        self,
        github: GitHubClient,
        claude: ClaudeReviewer,
        checks: CheckRuns,
        settings: ReviewSettings,
        batches: Batches | None = None,
        verifier: ClaudeReviewer | None = None,
    ) -> None:
        reader = ContentReader(github)
        memory = Memory(github, reader)
        self.checks = checks
        self.gate = Gate(github, settings)
        # The team's signals share the gate's permission check (and its minute of memory) with `/review`.
        self.signals = Signals(
            github,
            self.gate.permissions,
            reaction_reads=settings.signal_reads,
            learnings_limit=settings.learnings_per_repo,
            max_chars=settings.learning_max_chars,
        )
        self.gather = Gather(github, reader, memory, settings)
        self.ask = Ask(github, claude, batches, reader=reader, verifier=verifier)
        self.publish = Publish(github, memory, self.gate, self.signals)

    @as_work("review")
    async def __call__(self, ctx: JobContext) -> str:
        with ends_without_access(ctx):
            return await self._review(ctx)

    async def _review(self, ctx: JobContext) -> str:
        wanted = await self.gate(ctx)
        async with self.checks.lock(ctx.job.id):
            check_run_id = await self.checks.show_for_attempt(ctx, desired_check(ctx.job))
        ctx.ensure_held()
        change = await self.gather.change(ctx, wanted)
        answer = ctx.job.answer
        if answer is None:
            question = await self.gather.question(ctx, wanted, change)
            answer = await self.ask(ctx, question, still_wanted=lambda: self.gate.recheck(ctx))
            await store_answer(ctx, answer)
        else:
            log.info("job %s: publishing the stored model answer (no new model call)", ctx.job.id)
        return await self.publish(ctx, wanted, change, answer, check_run_id=check_run_id)
