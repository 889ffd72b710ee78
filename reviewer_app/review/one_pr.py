"""One pull request reviewed on demand (`reviewer-app review URL`): the App's review stages (gate, gather, ask,
publish), composed for a person's token, a temporary database and no webhook.

The job is the App's own kind of job, admitted to and claimed from a store that lives as long as the command: the
gate reads the pull request and .github/reviewer.yml, gather selects the files and widens their context, ask puts
the same prompt to the model (interactively: no Message Batches), and the publish stage renders the review as the App
posts it. What differs is what the command is for:

- Memory is off: no earlier findings are recalled, none are recorded and no thread is tended (the temporary store
  forgets them anyway, and a person's review should not resolve the App's threads).
- The review is always rendered as a dry run, kept on the job (``would_publish``): that is what gets printed.
- Only with ``post`` is it posted, as a review under the token's person, with the App's marker rules: when that person
  already posted a review whose marker names this head, nothing is asked or posted again (``posted_before``); and the
  publish stage itself finds its own marker before it posts. ``dry_run: true`` in .github/reviewer.yml is the App's
  setting: a person who asks to post, posts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from reviewer_app.core.admission import PRIORITY_MANUAL, Enqueue, JobSpec
from reviewer_app.core.errors import JobError
from reviewer_app.core.job_records import JobDetails, StoredAnswer, WouldPublish
from reviewer_app.core.markers import review_naming_head
from reviewer_app.core.pull_url import PullRef
from reviewer_app.core.review_model import InlineComment, ReviewCounts
from reviewer_app.dispatch.context import JobContext
from reviewer_app.github.auth import TOKEN_INSTALLATION
from reviewer_app.github.client import GitHubClient
from reviewer_app.github.scopes import acting_as
from reviewer_app.review.ask import Ask, store_answer
from reviewer_app.review.claude import ClaudeReviewer
from reviewer_app.review.gate import Gate, Wanted
from reviewer_app.review.gather import Gather
from reviewer_app.review.memory import Memory, Recall
from reviewer_app.review.publish import Publish
from reviewer_app.review.reading import ContentReader
from reviewer_app.review.settings import ReviewSettings
from reviewer_app.store.base import Attempt, Delivery, Store

log = logging.getLogger(__name__)

TRIGGER_ONE = "cli"  # the trigger of a job `reviewer-app review` admits: requested, not automatic
OWNER = "reviewer-app-review"  # the lease holder of that job


class Forgetful(Memory):
    """Memory off: no earlier findings, none recorded, no thread replied to or resolved."""

    async def recall(self, ctx: JobContext) -> Recall:
        return Recall()

    async def record(self, ctx: JobContext, review_id: int, inline: Sequence[InlineComment]) -> None:
        return None

    async def tend_threads(self, ctx: JobContext, recall: Recall, *, resolve: bool) -> int:
        return 0


@dataclass(frozen=True)
class OneReview:
    """What the command reports: the review as the App would post it, and what became of it."""

    pr: Mapping[str, Any]  # the pull request as the gate read it
    head_sha: str
    answer: StoredAnswer | None  # the model's answer (None: posted before, not asked again)
    would: WouldPublish  # the review as GitHub gets it (body and inline comments)
    counts: ReviewCounts | None
    posted_id: int | None = None  # the review posted now, or found posted (by this job's marker) on the way
    posted_before: Mapping[str, Any] | None = None  # an earlier review of this head by the token's person
    not_posted: JobError | None = None  # why posting failed (the review was written, and is printed all the same)
    attempts: tuple[Attempt, ...] = ()  # the job's attempt, with the tokens it spent
    # What the model cost, the review's requests and the verification's: the store's usage rows (kind, model, batched,
    # input, output, cache write and cache read tokens).
    usage: tuple[Mapping[str, Any], ...] = ()

    @property
    def review_url(self) -> str | None:
        review_id = self.posted_id or (self.posted_before or {}).get("id")
        if review_id is None:
            return None
        return f"{self.pr.get('html_url') or ''}#pullrequestreview-{review_id}"


class OnePullRequest:
    """The review stages, composed for one pull request and a person's token."""

    def __init__(
        self,
        github: GitHubClient,
        claude: ClaudeReviewer,
        settings: ReviewSettings,
        verifier: ClaudeReviewer | None = None,
    ) -> None:
        reader = ContentReader(github)
        memory = Forgetful(github, reader)
        self.github = github
        self.gate = Gate(github, replace(settings, dry_run=False))
        self.gather = Gather(github, reader, memory, settings)
        # Interactive (the person waits for the answer); its findings checked as the App checks them.
        self.ask = Ask(github, claude, reader=reader, verifier=verifier)
        self.render = Publish(github, memory, Gate(github, replace(settings, dry_run=True)))
        self.publish = Publish(github, memory, self.gate)

    async def __call__(self, ctx: JobContext, *, post: bool) -> OneReview:
        wanted = await self.gate(ctx)
        if post:
            earlier = await self._posted_before(ctx)
            if earlier is not None:
                log.info(
                    "review %s of %s names this head already; nothing asked or posted",
                    earlier.get("id"),
                    ctx.job.head_sha,
                )
                body = str(earlier.get("body") or "")
                return OneReview(wanted.pr, ctx.job.head_sha, None, WouldPublish(body), None, posted_before=earlier)
        change = await self.gather.change(ctx, wanted)
        question = await self.gather.question(ctx, wanted, change)
        answer = await self.ask(ctx, question, still_wanted=lambda: self.gate.recheck(ctx))
        await store_answer(ctx, answer)
        await self.render(ctx, wanted, change, answer, check_run_id=None)
        details = ctx.job.details
        assert details.would_publish is not None  # the render stage's dry run keeps it on the job
        done = OneReview(wanted.pr, ctx.job.head_sha, answer, details.would_publish, details.counts)
        if not post:
            return done
        speaks = Wanted(wanted.pr, replace(wanted.config, dry_run=False))
        try:
            await self.publish(ctx, speaks, change, answer, check_run_id=None)
        except JobError as exc:  # the review was paid for: it is printed, and why it was not posted said
            return replace(done, not_posted=exc)
        job = await ctx.store.get_job(ctx.job.id)
        return replace(done, posted_id=job.review_id if job is not None else None)

    async def _posted_before(self, ctx: JobContext) -> Mapping[str, Any] | None:
        """A review by the token's person whose marker names the head, whichever run of the command posted it."""
        job = ctx.job
        login = await self.github.bot_login()
        reviews = await self.github.list_reviews(TOKEN_INSTALLATION, job.repo_full_name, job.pr_number)
        return review_naming_head(reviews, login=login, head_sha=job.head_sha)


async def review_one(
    store: Store,
    reviewer: OnePullRequest,
    ref: PullRef,
    *,
    post: bool,
    clock: Callable[[], float],
    timeout: float,
) -> OneReview:
    """Admit the pull request's job to ``store`` (a temporary one), claim it and run it once, within ``timeout``
    seconds; the stages' errors (core/errors.py) go to the caller as they are."""
    spec = JobSpec(
        repo_id=0,  # not known before the gate reads the pull request, and not needed: nothing is remembered
        repo_full_name=ref.repo,
        installation_id=TOKEN_INSTALLATION,
        pr_number=ref.number,
        head_sha="",  # the head the gate finds
        trigger=TRIGGER_ONE,
        priority=PRIORITY_MANUAL,
        details=JobDetails(full=True),  # the whole pull request: no review of it is known here
    )
    decision = Enqueue(spec, supersede_older_heads=False, automatic=False)
    admitted = await store.admit(Delivery(f"cli:{ref.web_url}", "cli", "review"), decision, now=clock(), max_attempts=1)
    leases = await store.claim(owner=OWNER, limit=1, now=clock(), lease_seconds=timeout + 60)
    lease = next((lease for lease in leases if lease.job_id == admitted.job_id), None)
    job = await store.get_job(admitted.job_id) if admitted.job_id is not None else None
    if lease is None or job is None:
        raise RuntimeError(f"the review's job could not be started ({admitted.outcome})")
    ctx = JobContext(job=job, lease=lease, store=store, clock=clock)
    with acting_as("review"):
        async with asyncio.timeout(timeout):
            done = await reviewer(ctx, post=post)
    usage = tuple(await store.usage_by_repo(since=0))  # the temporary store holds this review alone
    return replace(done, attempts=tuple(await store.attempts_of(job.id)), usage=usage)
