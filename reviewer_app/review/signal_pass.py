"""The periodic signal pass: GitHub sends no webhook for a reaction, so the team's 👍 and 👎 on the app's comments of
recently reviewed pull requests are read on a timer too, not only when a pull request is next reviewed.

Bounded: a pass goes over the pull requests of the newest finished reviews, newest first, and reads the reactions of
at most ``REVIEWER_SIGNAL_READS`` comments in all (one GitHub request each, review/signals.py); an installation GitHub
rate-limits is skipped until its reset (the others' pull requests are read), and the next pass (or the next review)
reads the rest. One host at a time runs it (a duty
lease).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from reviewer_app.core.admission import TRIGGER_REPLY
from reviewer_app.core.errors import JobError, RateLimited
from reviewer_app.core.rate_waits import RateWaits
from reviewer_app.core.states import JobState
from reviewer_app.github.scopes import as_work
from reviewer_app.review.signals import PullRef, Signals
from reviewer_app.store.base import Store

log = logging.getLogger(__name__)

JOBS_LOOKED_AT = 200  # the newest finished jobs the pass takes its pull requests from


class SignalPass:
    """One pass over recently reviewed pull requests; ``run_once`` returns the reactions recorded."""

    def __init__(self, signals: Signals, store: Store, *, clock: Callable[[], float]) -> None:
        self.signals = signals
        self.store = store
        self.clock = clock
        self.rate_waits = RateWaits()

    async def recent_pulls(self) -> list[PullRef]:
        """The pull requests of the newest finished reviews, newest first, each once."""
        jobs = await self.store.list_jobs(states=[JobState.SUCCEEDED.value], limit=JOBS_LOOKED_AT)
        seen: dict[tuple[int, int], PullRef] = {}
        for job in jobs:
            if job.installation_id is None or job.trigger.startswith(TRIGGER_REPLY) or job.review_id is None:
                continue
            key = (job.repo_id, job.pr_number)
            if key not in seen:
                seen[key] = PullRef(job.installation_id, job.repo_full_name, job.repo_id, job.pr_number, "signal pass")
        return list(seen.values())

    @as_work("signals")
    async def run_once(self) -> int:
        recorded, budget = 0, self.signals.reaction_reads
        lookups = self.signals.lookups()  # people asked about in this pass, past those known already
        confirmed: set[int] = set()  # the repositories whose pending learnings this pass read
        for pr in await self.recent_pulls():
            if pr.repo_id not in confirmed:
                confirmed.add(pr.repo_id)
                try:
                    await self.signals.confirm_pending(self.store, pr, lookups)
                except RateLimited as exc:
                    log.warning("signal pass: GitHub asks the app to wait; the pass ends here: %s", exc.reason)
                    break
                except JobError as exc:
                    log.info("signal pass: pending learnings of %s not read: %s", pr.repo, exc.reason)
            if budget <= 0:
                break
            if self.rate_waits.waiting(pr.installation_id, self.clock()):
                continue
            findings = [f for f in await self.store.open_findings(pr.repo_id, pr.number) if f.comment_id is not None]
            take = min(len(findings), budget)
            budget -= take
            try:
                recorded += await self.signals.read_reactions(
                    self.store, pr, findings, self.clock(), limit=take, budget=lookups
                )
            except RateLimited as exc:
                self.rate_waits.wait(pr.installation_id, exc.retry_at)
                log.warning("signal pass: installation %s waits for its rate limit: %s", pr.installation_id, exc.reason)
            except JobError as exc:
                log.info("signal pass: reactions of %s#%s not read: %s", pr.repo, pr.number, exc.reason)
        return recorded
