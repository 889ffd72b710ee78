"""The team's signals on the app's findings, turned into feedback and learnings (core/learnings.py holds the records).

Three signals, each only from a person with write access to the repository (the gate's permission check, kept for a
minute): an outside account's or a bot's reaction, reply or resolution is never one.

Each dismissing signal (a 👎, a disputing reply, a resolved thread) also gives the finding its fate, ``dismissed``
(core/outcomes.py), from what is read here anyway: no request is made for it.

- A 👍 or 👎 on one of the app's review comments. GitHub sends no webhook for a reaction: they are read for the pull
  request's open findings when it is next reviewed (and by the periodic pass, review/signal_pass.py), a bounded
  number of comments each time, and kept with ``record_finding_feedback`` on the finding's content key, so a 👎
  pattern across pull requests is visible. A reaction proposes no learning: the model has not phrased one.
- A reply in the app's thread that disputes its finding: the answer the app writes classifies the reply
  (review/answer.py) and, when it disputes and states a rule in the reply's own words, the rule becomes a **pending**
  learning bound to the thread's file (source: the reply), with a preview of what it would have withheld; a 👍 by a
  person with write access on the app's acknowledgement (or `/review learn confirm ID`) makes it active.
- A thread of the app resolved by someone else while the code it pointed at did not change: a do-not-flag learning
  from the finding, bound to exactly its file (source: the thread). Each thread is taken once, so a learning the team
  forgot is not learned again from the same thread.

Everything here is best effort: GitHub failing costs a signal until the next pass, never a review.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reviewer_app.core.commands import WRITE_PERMISSIONS
from reviewer_app.core.errors import JobError, PermanentError
from reviewer_app.core.globs import exact_glob
from reviewer_app.core.learnings import (
    MAX_TEXT,
    PENDING,
    PREVIEW_FINDINGS,
    Learning,
    LearningLimitReached,
    drawn_from,
    finding_key,
    glob_in,
    make_draft,
    preview_text,
    withheld_by,
)
from reviewer_app.core.markers import strip_markers
from reviewer_app.core.outcomes import Event
from reviewer_app.core.timestamps import parse_time
from reviewer_app.dispatch.context import JobContext
from reviewer_app.github.client import GitHubClient, Json
from reviewer_app.github.graphql import full_database_id
from reviewer_app.review.permissions import Permissions, installation_of
from reviewer_app.store.base import FateEvent, Finding, Store

log = logging.getLogger(__name__)

SIGNALS = ("+1", "-1")  # the reactions that are feedback; GitHub's others (heart, eyes, ...) say nothing of a finding
DEFAULT_REACTION_READS = 20  # review comments whose reactions one review (or one PR of the pass) reads at most
DEFAULT_LEARNINGS_LIMIT = 100
# People whose permission one review (or one signal pass) asks GitHub about, past those it knows already: a crowd of
# accounts reacting on the app's comments costs a bounded number of lookups, the rest wait for a later pass.
DEFAULT_NEW_LOOKUPS = 5
PENDING_READS = 5  # pending learnings whose acknowledgement one review (or pass) reads for a 👍, newest first


def _login(user: object) -> str:
    return str(user.get("login") or "") if isinstance(user, Mapping) else ""


def comment_url(repo: str, number: int, comment_id: int) -> str:
    return f"https://github.com/{repo}/pull/{number}#discussion_r{comment_id}"


def resolved_text(finding: Finding) -> str:
    """The do-not-flag learning a resolved thread teaches (pure): the finding's title as its subject, which the cover
    rule reads up to a colon (core/learnings.subject_of), so the same finding is what it covers."""
    title = " ".join(finding.title.split()) or "this finding"
    return f"Do not flag {title}"[:MAX_TEXT]


@dataclass(frozen=True)
class PullRef:
    """The pull request signals are read for: in a job, or in the periodic pass (review/signal_pass.py)."""

    installation_id: int
    repo: str  # owner/name
    repo_id: int
    number: int
    who: str  # whose work it is, for the log: "job 12", "signal pass"

    @classmethod
    def of_job(cls, ctx: JobContext) -> PullRef:
        job = ctx.job
        return cls(installation_of(ctx), job.repo_full_name, job.repo_id, job.pr_number, f"job {job.id}")


def proposal_note(learning: Learning, preview: str) -> str:
    """What an answer adds when the reply it answers proposed a learning: the learning, pending, what it would have
    withheld, and how a person with write access confirms it (pure)."""
    where = f" (files `{learning.path_glob}`)" if learning.path_glob else ""
    return (
        f"Proposed learning {learning.id} of this repository{where}, **pending**: {learning.text}\n\n{preview}\n\n"
        f"It applies once someone with write access confirms it: a 👍 on this comment, or "
        f"`/review learn confirm {learning.id}`. (`/review forget {learning.id}` drops it.)"
    )


@dataclass
class Lookups:
    """How many more people's permissions may be asked of GitHub in one review or pass."""

    left: int

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True


class Signals:
    """Reads the team's signals for a job's pull request and records what they teach."""

    def __init__(
        self,
        github: GitHubClient,
        permissions: Permissions,
        *,
        reaction_reads: int = DEFAULT_REACTION_READS,
        learnings_limit: int = DEFAULT_LEARNINGS_LIMIT,
        max_chars: int = MAX_TEXT,
        new_lookups: int = DEFAULT_NEW_LOOKUPS,
    ) -> None:
        self.github = github
        self.permissions = permissions
        self.reaction_reads = reaction_reads
        self.learnings_limit = learnings_limit
        self.max_chars = max_chars
        self.new_lookups = new_lookups

    async def may_teach(self, pr: PullRef, login: str, bot: str, budget: Lookups | None = None) -> bool:
        """Whether ``login`` gives signals in ``pr``'s repository: a person (no bot, not the app) with write access.
        With a ``budget``, someone whose permission is not known already is asked about only while it lasts (False
        after: a later pass asks)."""
        if not login or login.endswith("[bot]") or login.casefold() in (bot.casefold(), bot.removesuffix("[bot]")):
            return False
        known = self.permissions.known(pr.installation_id, pr.repo, login)
        if known is None and budget is not None and not budget.take():
            return False
        if known is not None:
            return known in WRITE_PERMISSIONS
        return await self.permissions.lookup(pr.installation_id, pr.repo, login, pr.who) in WRITE_PERMISSIONS

    def lookups(self) -> Lookups:
        """A fresh budget of permission lookups, for one review's or one pass's reactions."""
        return Lookups(self.new_lookups)

    async def _learn(self, ctx: JobContext, **fields: Any) -> Learning | None:
        """A learning kept for the job's repository (the one kept already when it is there); None when the text is
        not a learning or the repository holds its limit (logged: the team forgets one first)."""
        job = ctx.job
        try:
            draft = make_draft(
                repo=job.repo_id, created_at=datetime.fromtimestamp(ctx.clock(), UTC), max_text=self.max_chars, **fields
            )
            return await ctx.store.add_learning(draft, limit=self.learnings_limit)
        except ValueError as exc:
            log.info("job %s: no learning from %s: %s", job.id, fields.get("source_url"), exc)
        except LearningLimitReached as exc:
            log.warning("job %s: no learning from %s: %s", job.id, fields.get("source_url"), exc)
        return None

    # -- a disputing reply ------------------------------------------------------------------------------------

    async def learn_from_reply(self, ctx: JobContext, reply: Mapping[str, Any], sentence: str, path: str) -> str | None:
        """The learning a reply that disputes the app's finding on ``path`` proposes, kept **pending** when its author
        has write access and ``sentence`` (phrased by the model) says nothing the reply does not (core/learnings.
        drawn_from); bound to the file (its exact path, unless the reply names a glob). Returns the answer's note on
        it (with its preview), or None."""
        login = _login(reply.get("user"))
        if not await self.may_teach(PullRef.of_job(ctx), login, await self.github.bot_login()):
            log.info("job %s: %s disputes a finding without write access: no learning", ctx.job.id, login or "?")
            return None
        own = strip_markers(str(reply.get("body") or ""))
        if not drawn_from(sentence, own):
            log.info("job %s: the proposed learning says more than %s's reply: no learning", ctx.job.id, login)
            return None
        if not path:
            return None
        url = reply.get("html_url")
        learning = await self._learn(
            ctx,
            text=sentence,
            kind="do-not-flag",
            path_glob=glob_in(own) or exact_glob(path),
            source_kind="reply",
            source_url=url if isinstance(url, str) else None,
            author=login,
            status=PENDING,
        )
        if learning is None:
            return None
        if learning.active:  # the same learning was taught already (kept once per repository, glob and text)
            return f"This is learning {learning.id} of this repository already: {learning.text}"
        return proposal_note(learning, await self.preview(ctx.store, ctx.job.repo_id, learning))

    async def preview(self, store: Store, repo_id: int, learning: Learning) -> str:
        """What ``learning`` would have withheld of the repository's most recent findings, as its acknowledgement
        says it."""
        recent = await store.recent_findings(repo_id, limit=PREVIEW_FINDINGS)
        return preview_text(withheld_by(learning, recent), len(recent))

    async def dismiss_by_reply(self, ctx: JobContext, reply: Mapping[str, Any], root_comment_id: int) -> bool:
        """A reply disputing the app's finding (review comment ``root_comment_id``) by a person with write access
        dismisses it (core/outcomes.py); whether it changed the finding's fate."""
        login = _login(reply.get("user"))
        if not await self.may_teach(PullRef.of_job(ctx), login, await self.github.bot_login()):
            return False
        at = parse_time(reply.get("created_at")) or ctx.clock()
        changed = await ctx.store.settle_finding_of_comment(
            ctx.job.repo_id, root_comment_id, Event.DISMISSED, at=at, source=f"reply by {login}"
        )
        return bool(changed)

    # -- reactions ---------------------------------------------------------------------------------------------

    async def read_reactions(
        self,
        store: Store,
        pr: PullRef,
        findings: Sequence[Finding],
        now: float,
        *,
        limit: int | None = None,
        budget: Lookups | None = None,
    ) -> int:
        """Record the 👍 and 👎 of people with write access on the app's comments of ``findings`` (at most ``limit``
        comments, by default ``reaction_reads``, newest first); returns how many were recorded (again: the store keeps
        one per person, signal and finding)."""
        bot = await self.github.bot_login()
        budget = budget if budget is not None else self.lookups()
        commented = sorted((f for f in findings if f.comment_id is not None), key=lambda f: -(f.comment_id or 0))
        recorded = 0
        dismissals: list[FateEvent] = []
        for f in commented[: self.reaction_reads if limit is None else limit]:
            assert f.comment_id is not None
            try:
                reactions = await self.github.list_review_comment_reactions(pr.installation_id, pr.repo, f.comment_id)
            except PermanentError as exc:  # the comment was deleted: its reactions went with it
                log.info("%s: reactions on comment %s not read: %s", pr.who, f.comment_id, exc.reason)
                continue
            key = finding_key(f.path, f.line_text, f.body_digest)
            url = comment_url(pr.repo, pr.number, f.comment_id)
            for reaction in reactions:
                signal, login = reaction.get("content"), _login(reaction.get("user"))
                if signal not in SIGNALS or not await self.may_teach(pr, login, bot, budget):
                    continue
                at = datetime.fromtimestamp(parse_time(reaction.get("created_at")) or now, UTC)
                await store.record_finding_feedback(str(pr.repo_id), key, str(signal), login, url, at)
                recorded += 1
                if signal == "-1" and f.id is not None:  # a writer's 👎 dismisses it (core/outcomes.py)
                    dismissals.append(FateEvent(f.id, Event.DISMISSED, at.timestamp(), f"👎 by {login}"))
        await store.settle_findings(dismissals)
        if recorded:
            log.info("%s: %d reaction(s) of the team on the app's findings read", pr.who, recorded)
        return recorded

    async def confirm_pending(self, store: Store, pr: PullRef, budget: Lookups | None = None) -> list[Learning]:
        """The repository's pending learnings whose acknowledgement someone with write access gave a 👍, made
        active (the newest PENDING_READS with an acknowledgement, one GitHub request each)."""
        bot = await self.github.bot_login()
        budget = budget if budget is not None else self.lookups()
        confirmed: list[Learning] = []
        for learning in await store.pending_learnings_with_ack(str(pr.repo_id), limit=PENDING_READS):
            assert learning.ack_comment_id is not None
            try:
                reactions = await self.github.list_review_comment_reactions(
                    pr.installation_id, pr.repo, learning.ack_comment_id
                )
            except PermanentError as exc:  # the acknowledgement was deleted: `/review learn confirm` still works
                log.info("%s: reactions on comment %s not read: %s", pr.who, learning.ack_comment_id, exc.reason)
                continue
            for reaction in reactions:
                login = _login(reaction.get("user"))
                if reaction.get("content") == "+1" and await self.may_teach(pr, login, bot, budget):
                    active = await store.activate_learning(str(pr.repo_id), learning.id)
                    if active is not None:
                        log.info("%s: learning %s confirmed by %s's 👍", pr.who, learning.id, login)
                        confirmed.append(active)
                    break
        return confirmed

    # -- threads resolved by someone else ------------------------------------------------------------------------

    async def learn_from_resolved(
        self, ctx: JobContext, unchanged: Sequence[Finding], threads: Sequence[Json]
    ) -> list[Learning]:
        """A do-not-flag learning for each finding of ``unchanged`` (its code did not change at this head) whose
        thread someone with write access resolved; each thread is taken once, on any host."""
        bot = await self.github.bot_login()
        ours = {bot.casefold(), bot.removesuffix("[bot]").casefold()}
        by_comment: dict[int, Json] = {}
        for thread in threads:
            nodes = (thread.get("comments") or {}).get("nodes") or []
            first = full_database_id(nodes[0].get("fullDatabaseId")) if nodes else None
            if first is not None:
                by_comment[first] = thread
        learned: list[Learning] = []
        for f in unchanged:
            thread = by_comment.get(f.comment_id or -1)
            resolver = _login((thread or {}).get("resolvedBy"))
            if thread is None or not thread.get("isResolved") or not resolver or resolver.casefold() in ours:
                continue
            if not await self.may_teach(PullRef.of_job(ctx), resolver, bot):
                log.info(
                    "job %s: thread %s resolved by %s, who has no write access", ctx.job.id, thread["id"], resolver
                )
                continue
            if f.id is not None:  # resolved by a writer with the code unchanged: dismissed (core/outcomes.py)
                event = FateEvent(f.id, Event.DISMISSED, ctx.clock(), f"thread resolved by {resolver}")
                await ctx.store.settle_findings([event])
            if not await ctx.store.claim_once(f"resolved_signal:{thread.get('id')}", str(ctx.job.id)):
                continue  # taken already (by an earlier review, or another host): a forgotten learning stays forgotten
            learning = await self._learn(
                ctx,
                text=resolved_text(f),
                kind="do-not-flag",
                path_glob=exact_glob(f.path),  # that file only: a top-level config.py is not every config.py
                source_kind="resolved",
                source_url=comment_url(ctx.job.repo_full_name, ctx.job.pr_number, f.comment_id or 0),
                author=resolver,
            )
            if learning is not None:
                learned.append(learning)
        return learned

    # -- at a review -----------------------------------------------------------------------------------------------

    async def at_review(self, ctx: JobContext, unchanged_ids: Sequence[int]) -> None:
        """After a review is published: the reactions on the pull request's earlier findings, and the threads of
        those whose code did not change (``unchanged_ids``) that someone resolved. GitHub failing is logged."""
        job = ctx.job
        try:
            earlier = [f for f in await ctx.store.open_findings(job.repo_id, job.pr_number) if f.job_id != job.id]
            budget = self.lookups()
            await self.read_reactions(ctx.store, PullRef.of_job(ctx), earlier, ctx.clock(), budget=budget)
            await self.confirm_pending(ctx.store, PullRef.of_job(ctx), budget)
            unchanged = [f for f in earlier if f.id in set(unchanged_ids) and f.comment_id is not None]
            if unchanged:
                threads = await self.github.review_threads(installation_of(ctx), job.repo_full_name, job.pr_number)
                await self.learn_from_resolved(ctx, unchanged, threads)
        except JobError as exc:
            log.warning("job %s: the team's signals not read (the next pass tries again): %s", job.id, exc.reason)
