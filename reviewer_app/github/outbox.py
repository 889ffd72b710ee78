"""The outbox duty: reactions and help replies decided at admission are sent here, never in the request."""

from __future__ import annotations

import logging
from collections.abc import Callable

from reviewer_app.core.errors import JobError, PermanentError, RateLimited
from reviewer_app.github.client import GitHubClient
from reviewer_app.store.base import Store

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5


class OutboxSender:
    def __init__(self, github: GitHubClient, store: Store, *, clock: Callable[[], float]) -> None:
        self.github = github
        self.store = store
        self.clock = clock

    async def run_once(self) -> int:
        sent = 0
        for e in await self.store.pending_effects(limit=50):
            try:
                if e["kind"] == "reaction":
                    await self.github.create_reaction(e["installation_id"], e["repo_full_name"], e["target"],
                                                      e["content"])  # fmt: skip
                else:
                    await self.github.create_issue_comment(e["installation_id"], e["repo_full_name"], e["target"],
                                                           e["content"])  # fmt: skip
            except RateLimited as exc:
                log.warning("outbox paused by a rate limit: %s", exc.reason)
                break
            except JobError as exc:
                give_up = isinstance(exc, PermanentError) or e["attempts"] + 1 >= MAX_ATTEMPTS
                log.warning("outbox %s %s on %s failed%s: %s", e["kind"], e["id"], e["repo_full_name"],
                            " (giving up)" if give_up else "", exc.reason)  # fmt: skip
                await self.store.mark_effect(e["id"], now=self.clock(), error=exc.reason, done=give_up)
                continue
            await self.store.mark_effect(e["id"], now=self.clock(), error=None, done=True)
            sent += 1
        return sent
