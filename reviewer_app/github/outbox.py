"""The outbox duty: reactions and help replies decided at admission are sent here, never in the request."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from reviewer_app.core.admission import (
    REVIEW_COMMENT_REACTION,
    SUSPENDED,
    UNINSTALLED,
    InstallationChange,
    SetPause,
    parse_pause_request,
)
from reviewer_app.core.commands import WRITE_PERMISSIONS
from reviewer_app.core.errors import JobError, PermanentError, RateLimited
from reviewer_app.core.markers import answer_marker_of, find_posted_reply, make_reply_marker
from reviewer_app.core.rate_waits import RateWaits
from reviewer_app.github.client import GitHubClient
from reviewer_app.github.scopes import as_work
from reviewer_app.github.team_commands import LearningLimits, apply_team_command
from reviewer_app.store.base import Delivery, Store

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5


class OutboxSender:
    def __init__(
        self,
        github: GitHubClient,
        store: Store,
        *,
        clock: Callable[[], float],
        learnings: LearningLimits | None = None,
    ) -> None:
        self.github = github
        self.store = store
        self.clock = clock
        self.learnings = learnings or LearningLimits()
        self.rate_waits = RateWaits()  # installations whose effects wait for their rate limit's reset

    @as_work("outbox")
    async def run_once(self) -> int:
        sent = 0
        for e in await self.store.pending_effects(limit=50, skip=self.rate_waits.skipped(self.clock())):
            if self.rate_waits.waiting(e["installation_id"], self.clock()):
                continue  # limited earlier in this pass: its effects keep their order and wait
            try:
                if e["kind"] in ("reaction", REVIEW_COMMENT_REACTION):
                    # GitHub keeps one reaction per content and user: sending it twice is harmless.
                    await self.github.create_reaction(
                        e["installation_id"],
                        e["repo_full_name"],
                        e["target"],
                        e["content"],
                        review_comment=e["kind"] == REVIEW_COMMENT_REACTION,
                    )
                elif e["kind"] in ("pause", "resume"):
                    await self._pause_if_permitted(e)
                elif e["kind"] in ("learn", "forget"):
                    await self._team_command(e)
                elif e["kind"] == "installation":
                    await self._installation_if_confirmed(e)
                else:
                    await self._reply_once(e)
            except RateLimited as exc:
                self.rate_waits.wait(e["installation_id"], exc.retry_at)
                log.warning(
                    "outbox of installation %s waits for its rate limit (the others go on): %s",
                    e["installation_id"],
                    exc.reason,
                )
                continue
            except JobError as exc:
                give_up = isinstance(exc, PermanentError) or e["attempts"] + 1 >= MAX_ATTEMPTS
                log.warning(
                    "outbox %s %s on %s failed%s: %s",
                    e["kind"],
                    e["id"],
                    e["repo_full_name"],
                    " (giving up)" if give_up else "",
                    exc.reason,
                )
                await self.store.mark_effect(e["id"], now=self.clock(), error=exc.reason, done=give_up)
                continue
            await self.store.mark_effect(e["id"], now=self.clock(), error=None, done=True)
            sent += 1
        return sent

    async def _pause_if_permitted(self, e: dict[str, Any]) -> None:
        """``/review pause`` or ``resume`` by someone whose association does not prove write access: applied only when
        GitHub says the commenter may write to the repository, answered with a reaction either way. Both steps are
        idempotent, so a retry after a lost answer changes nothing twice."""
        repo = e["repo_full_name"]
        repo_id, number, login, written = parse_pause_request(e["content"])
        permission = await self._permission(e, login)
        allowed = permission in WRITE_PERMISSIONS
        if allowed:
            # Applied as the owner's command is (store/procedures/admission.py): a resume queues the head skipped while paused.
            # The delivery id is the effect's, so a retry after a lost answer applies nothing twice.
            change = SetPause(repo_id, number, e["kind"] == "pause", at=written)
            await self.store.admit(
                Delivery(f"{e['kind']}:{e['id']}", "issue_comment", e["kind"]), change, now=self.clock(), max_attempts=1
            )
        log.info(
            "outbox: %s of %s#%s by %s (%s access) %s",
            e["kind"],
            repo,
            number,
            login,
            permission,
            "applied" if allowed else "refused",
        )
        await self._react(e, "+1" if allowed else "-1")

    async def _react(self, e: dict[str, Any], content: str) -> None:
        """The answer to a command that waited on a permission check, as a reaction on its comment."""
        try:
            await self.github.create_reaction(e["installation_id"], e["repo_full_name"], e["target"], content)
        except PermanentError as exc:  # the comment was deleted meanwhile: the answer still stands
            log.info("outbox: no reaction on comment %s: %s", e["target"], exc.reason)

    async def _permission(self, e: dict[str, Any], login: str) -> str:
        """GitHub's word on what ``login`` may do in the effect's repository; "unknown" (no write access) when GitHub
        cannot say, e.g. 404 for an account that no longer exists: fail closed."""
        try:
            return await self.github.collaborator_permission(e["installation_id"], e["repo_full_name"], login)
        except PermanentError as exc:
            log.info(
                "outbox %s on %s: permission of %s not known: %s", e["kind"], e["repo_full_name"], login, exc.reason
            )
            return "unknown"

    async def _team_command(self, e: dict[str, Any]) -> None:
        """``/review learn`` or ``forget`` (github/team_commands.py), through the same permission check as pause."""

        async def permitted(login: str) -> bool:
            return await self._permission(e, login) in WRITE_PERMISSIONS

        async def answer(number: int, text: str) -> None:
            await self._reply_once({**e, "target": number, "content": text})

        async def react(content: str) -> None:
            await self._react(e, content)

        await apply_team_command(
            e,
            store=self.store,
            permitted=permitted,
            answer=answer,
            react=react,
            limits=self.learnings,
            now=self.clock(),
        )

    async def _installation_if_confirmed(self, e: dict[str, Any]) -> None:
        """An ``installation`` deleted or suspended webhook, applied (pending work cancelled, the installation marked
        inactive) only as far as GitHub confirms it: gone, or suspended now. A replayed or relabelled body about an
        installation that is fine changes nothing."""
        inst = e["target"]
        found = await self.github.get_app_installation(inst)
        if found is None:
            reason = UNINSTALLED
        elif found.get("suspended_at"):
            reason = SUSPENDED
        else:
            log.warning(
                "installation %s: %s webhook not confirmed by GitHub (it is active); nothing cancelled",
                inst,
                e["content"],
            )
            return
        change = InstallationChange(inst, e["repo_full_name"], False, reason)
        result = await self.store.admit(
            Delivery(f"confirmed:{e['id']}", "installation", e["content"]), change, now=self.clock(), max_attempts=1
        )
        self.github.tokens.invalidate(inst)
        log.info(
            "installation %s: %s confirmed by GitHub; %d pending job(s) cancelled", inst, reason, len(result.cancelled)
        )

    async def _reply_once(self, e: dict[str, Any]) -> None:
        """Post the reply with its marker, unless the app's bot already posted it.

        Always look first, not only on a retry: a try whose POST reached GitHub may have ended before it could
        record anything (its answer lost, the process killed, the pass stopped at shutdown or when its duty lease
        was taken over), and such a try leaves the row looking untried."""
        inst, repo, number = e["installation_id"], e["repo_full_name"], e["target"]
        # A reply to a comment carries the comment it answers (so a replayed comment gets no second reply); others
        # are keyed on their outbox row.
        answers = answer_marker_of(e["content"])
        marker = answers or make_reply_marker(e["id"], e["created_at"])
        comments = await self.github.list_issue_comments(inst, repo, number)
        posted = find_posted_reply(comments, bot_login=await self.github.bot_login(), marker=marker)
        if posted is not None:
            log.info(
                "outbox reply %s on %s#%s was posted already (comment %s); not posting it again",
                e["id"],
                repo,
                number,
                posted.get("id"),
            )
            return
        body = e["content"] if answers else f"{e['content']}\n\n{marker}"
        await self.github.create_issue_comment(inst, repo, number, body)
