"""Wiring of the review runner: the GitHub client, check runs, the Claude reviewers (the model client built at its
first use: review/sdk.py), the review pipeline and the answerer, behind the dispatcher's runner."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import cast

import aiohttp

from reviewer_app.core.admission import is_reply
from reviewer_app.core.batching import BatchPolicy
from reviewer_app.dispatch.context import JobContext, Runner
from reviewer_app.github.auth import AppCredentials
from reviewer_app.github.checks import CheckRuns
from reviewer_app.github.client import GitHubClient
from reviewer_app.github.pacing import WritePacer
from reviewer_app.metrics import Metrics
from reviewer_app.review.answer import Answerer
from reviewer_app.review.batches import Batches, BatchPoller, BatchSubmitter
from reviewer_app.review.claude import ClaudeReviewer
from reviewer_app.review.model_client import ModelClient, ModelEndpoint, make_client
from reviewer_app.review.pipeline import ReviewPipeline
from reviewer_app.review.sdk import LazyClient
from reviewer_app.review.settings import ReviewSettings
from reviewer_app.settings.config import Config
from reviewer_app.store.base import Store

log = logging.getLogger(__name__)


@dataclass
class ReviewStack:
    session: aiohttp.ClientSession
    github: GitHubClient
    checks: CheckRuns
    pipeline: ReviewPipeline
    answerer: Answerer
    model_client: LazyClient
    batch_poller: BatchPoller  # the batch duty's pass (review/batches.py)

    async def __call__(self, ctx: JobContext) -> str:
        """The dispatcher's runner: reviews to the review pipeline, answers in threads (trigger ``reply:``) to the
        answerer. The model client is ready first (built in a worker thread), so no job imports the SDK on the event
        loop."""
        await self.model_client.ready()
        return await (self.answerer if is_reply(ctx.job.trigger) else self.pipeline)(ctx)

    async def batch_pass(self) -> int:
        """The batch duty's pass, with the model client ready first (as for a job)."""
        await self.model_client.ready()
        return await self.batch_poller.run_once()

    def runner(self) -> Runner:
        return self


def model_client(cfg: Config) -> ModelClient:
    """The model provider's client (review/model_client.py), said once in the log with what the provider lacks;
    raises ModelUnavailable (no region, no credentials) with what to set."""
    provider = cfg.provider
    client = make_client(ModelEndpoint.from_config(cfg), timeout=cfg.model_timeout_seconds, max_retries=0)
    log.info("model provider: %s (%s; verification: %s)", provider.title, cfg.model, cfg.verify_model)
    if cfg.batch and not provider.batches:
        log.info(
            "%s has no Message Batches: every review is asked interactively (REVIEWER_BATCH and `batch: true` "
            "change nothing)",
            provider.title,
        )
    return client


def build_review_stack(
    cfg: Config,
    store: Store,
    metrics: Metrics | None = None,
    lazy: LazyClient | None = None,
    *,
    owner: str | None = None,
) -> ReviewStack:
    """The GitHub client, check runs and Claude reviewer behind the review runner. The model client is a LazyClient:
    it stands for the SDK's client, built (and the SDK imported) at its first use or once the server answers.
    ``owner``: this process in the worker registry, named on its check-run creation claims."""
    provider = cfg.provider
    lazy = LazyClient(lambda: model_client(cfg)) if lazy is None else lazy
    client = cast("ModelClient", lazy)
    session = aiohttp.ClientSession()
    github = GitHubClient(
        session,
        cfg.github_api_url,
        AppCredentials(cfg.app_id, cfg.private_key),
        read_retry_delays=(cfg.github_retry_seconds, cfg.github_retry_seconds * 3),
        on_response=metrics.github_response if metrics is not None else None,
        pacer=WritePacer(interval=cfg.github_write_interval_seconds, burst=cfg.github_write_burst),
    )
    checks = CheckRuns(github, store, owner=owner)

    def reviewer(model: str) -> ClaudeReviewer:
        limits = {"max_output_tokens": cfg.max_output_tokens, "malformed_retries": cfg.malformed_retries}
        return ClaudeReviewer(client, model, provider=provider, **limits)

    claude = reviewer(cfg.model)
    # The verification pass's model: built always, a repository may turn verification on where the server does not.
    verifier = reviewer(cfg.verify_model)
    settings = ReviewSettings.from_config(cfg)
    # With REVIEWER_BATCH=0 nothing new is batched, but requests already out are still collected and used (on a
    # provider without batches they are asked again interactively).
    submitter = BatchSubmitter(client, gather_seconds=cfg.batch_gather_seconds, clock=time.time)
    policy = BatchPolicy(enabled=cfg.batch and provider.batches, after_seconds=cfg.batch_after_seconds)
    batches = Batches(submitter, claude, policy)
    poller = BatchPoller(
        client,
        store,
        clock=time.time,
        on_usage=metrics.usage if metrics is not None else None,
        unavailable=None if provider.batches else f"{provider.title} has no Message Batches",
    )
    pipeline = ReviewPipeline(github, claude, checks, settings, batches, verifier)
    answerer = Answerer(github, claude, pipeline.signals, dry_run=cfg.dry_run)
    return ReviewStack(session, github, checks, pipeline, answerer, lazy, poller)


__all__ = ["ReviewStack", "model_client", "build_review_stack"]
