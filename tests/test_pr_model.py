"""Model-based test of a pull request's review work: random event sequences against the whole app, then the invariant.

hypothesis's stateful testing drives the real app in process (tests/harness.py: the real receiver, store,
dispatcher and duties) against the fake GitHub and the fake model, on SQLite and on PostgreSQL, through sequences of
pull-request events (open, push, force-push back, close, reopen, draft and ready, a new base, a title edit),
commands (`/review`, `/review full`, pause, resume, Re-run), installation changes (uninstall and reinstall, suspend
and unsuspend, a repository removed and added), the sweep of open pull requests racing the webhooks, and faults (the
same delivery twice; pushes, closes, reopens, drafts, ready and new bases held back and delivered out of order; lost
GitHub responses; a worker stopped without grace and started again; leases that expire under a live worker). GitHub's
clock moves a second per event, so its timestamps order what happened as they do on github.com. The background keeps
running while the rules fire, as in production.

After every step: nothing is published twice for one job or one request, and a repeated delivery is a duplicate.
After the sequence, once the system is quiet (every job finished, every check run synced, the outbox empty), the
invariant of docs/architecture.md: for every open pull request of an active installation, its current head has a
review by the app, or its latest check run says why not (paused and not resumed since, draft); every accepted
request whose episode did not end has exactly one review; no check run of a finished job is left queued or in
progress, whatever state its pull request ended in.

Profiles: CI runs a fixed, derandomised number of sequences; `REVIEWER_MODEL_PROFILE=long` runs many more (see the
README's testing section).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from reviewer_app.core.markers import parse_markers
from reviewer_app.core.states import JobState
from tests.fakes.github import iso
from tests.harness import REPO, SOURCE, harness
from tests.helpers import eventually, webhook_headers
from tests.pg import create_schema, drop_schema, postgres_dsn

PRS = (1, 2)
PROFILES = {
    # CI: bounded and derandomised, so a red run is the same red run on every machine.
    "ci": {"max_examples": 60, "stateful_step_count": 25},
    "long": {"max_examples": 400, "stateful_step_count": 40},
}
PROFILE = os.environ.get("REVIEWER_MODEL_PROFILE", "ci")
QUIET_TIMEOUT = 45.0
GITHUB_LAG = 900.0  # seconds GitHub's clock stays behind the app's (more than a sequence's events can add)
COVERAGE: Counter[str] = Counter()  # what the sequences covered, printed by the test (pytest -s shows it)


@dataclass
class Request:
    """A requested review the app accepted: `/review` (trigger manual:<comment>) or Re-run (rerun:<delivery>)."""

    trigger: str
    pr: int
    episode: int  # the PR's episode when it was made; a later episode (close, uninstall...) may drop it


@dataclass
class PRModel:
    number: int
    heads: list[str] = field(default_factory=list)  # every head this PR had, in order
    open: bool = True
    draft: bool = False
    paused: bool = False
    paused_on_head: bool = False  # paused at some point while the current head was current
    episode: int = 0

    @property
    def head(self) -> str:
        return self.heads[-1]


@dataclass
class Sent:
    event: str
    body: bytes
    delivery: str


class PRWorkMachine(RuleBasedStateMachine):
    """The model is deliberately dumb: what GitHub looks like, which requests were accepted, what ended them."""

    backend = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.tmp = Path(tempfile.mkdtemp(prefix="pr-model-"))
        self.schema: str | None = None
        env = {"REVIEWER_LEASE_SECONDS": "3", "REVIEWER_RENEW_SECONDS": "0.3"}
        if self.backend == "postgres":
            self.schema = self.run(create_schema(postgres_dsn()))
            dsn = postgres_dsn()
            env["DATABASE_URL"] = f"{dsn}{'&' if '?' in dsn else '?'}search_path={self.schema}"
        self._harness = harness(self.tmp, **env)
        self.h = self.run(self._harness.__aenter__())
        self.gh = self.h.github
        # GitHub's clock moves a second per event, as people and CI do: its one-second timestamps then order events
        # as they happened, and a delivery held back carries the time GitHub gave it, not the time it arrives. It
        # stays behind the app's clock (GITHUB_LAG), as a delivery always arrives after its event happened: a
        # request that carries no time of its own (a Re-run) is then known to come after every close GitHub timed.
        self.github_seconds = 0.0
        self.gh.clock = lambda: time.time() - GITHUB_LAG + self.github_seconds
        self.prs: dict[int, PRModel] = {}
        self.requests: list[Request] = []
        self.sent: list[Sent] = []
        self.held: list[Sent] = []
        self.installation_active = True
        self.lifecycle_events = False  # the sweep is needed to bring heads back
        self._n = 0
        self.attempt_faults = 0  # faults that can cost a job an attempt (an expired lease, a lost response)

    # -- plumbing ------------------------------------------------------------------------------------------

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        try:
            self.run(self._settle_and_check())
        finally:
            try:
                self.run(self._harness.__aexit__(None, None, None))
                if self.schema is not None:
                    self.run(drop_schema(postgres_dsn(), self.schema))
            finally:
                self.loop.close()
                shutil.rmtree(self.tmp, ignore_errors=True)

    def _delivery_id(self) -> str:
        self._n += 1
        return f"model-{self._n}-{uuid.uuid4().hex[:8]}"

    def _post(self, sent: Sent) -> dict[str, Any]:
        async def go() -> dict[str, Any]:
            resp = await self.h.client.post(
                "/api/github/webhooks",
                data=sent.body,
                headers=webhook_headers(sent.body, event=sent.event, delivery=sent.delivery),
            )
            assert resp.status in (200, 202), (resp.status, await resp.text())
            return await resp.json()

        return self.run(go())

    def send(self, event: str, payload: dict[str, Any], *, hold: bool = False) -> dict[str, Any] | None:
        self.github_seconds += 1.0
        if hold:
            COVERAGE.update({f"held {event}.{payload.get('action')}": 1})
        sent = Sent(event, json.dumps(payload).encode(), self._delivery_id())
        if hold:
            self.held.append(sent)
            return None
        self.sent.append(sent)
        return self._post(sent)

    def pr_payload(self, n: int, action: str, **extra: Any) -> dict[str, Any]:
        self.github_seconds += 1.0  # the event happens a second after the last one
        pull = self.gh.pulls[(REPO, n)]
        pull.updated_at = self.gh.clock()
        return self.h.pr_payload(pull, action, updated_at=iso(pull.updated_at), **extra)  # one-second resolution

    def _episode_ends(self, *prs: PRModel) -> None:
        for pr in prs:
            pr.episode += 1

    # -- pull-request events ---------------------------------------------------------------------------------

    @initialize(drafts=st.tuples(st.booleans(), st.booleans()))
    def open_prs(self, drafts: tuple[bool, bool]) -> None:
        for n, draft in zip(PRS, drafts, strict=True):
            pull = self.gh.add_pull(REPO, n, files=[SOURCE], draft=draft)
            self.prs[n] = PRModel(n, [pull.head_sha], draft=draft)
            self.send("pull_request", self.pr_payload(n, "opened"))

    def _any_open(self) -> bool:
        return any(p.open for p in self.prs.values())

    def _pr(self, data: st.DataObject, *, open_only: bool = True) -> PRModel | None:
        choices = [p for p in self.prs.values() if p.open or not open_only]
        return data.draw(st.sampled_from(choices)) if choices else None

    @precondition(lambda self: self._any_open())
    @rule(data=st.data(), hold=st.booleans())
    def push(self, data: st.DataObject, hold: bool) -> None:
        pr = self._pr(data)
        if pr is None:
            return
        before = pr.head
        pr.heads.append(self.gh.advance_head(REPO, pr.number))
        pr.paused_on_head = pr.paused
        self.send("pull_request", self.pr_payload(pr.number, "synchronize", before=before), hold=hold)

    @precondition(lambda self: self._any_open())
    @rule(data=st.data())
    def force_push_back(self, data: st.DataObject) -> None:
        pr = self._pr(data)
        if pr is None or len(set(pr.heads)) < 2:
            return
        target = data.draw(st.sampled_from([h for h in dict.fromkeys(pr.heads) if h != pr.head]))
        before = pr.head
        self.gh.advance_head(REPO, pr.number, target, force=True)
        pr.heads.append(target)
        pr.paused_on_head = pr.paused
        self.send("pull_request", self.pr_payload(pr.number, "synchronize", before=before))

    @precondition(lambda self: self._any_open())
    @rule(data=st.data(), hold=st.booleans())
    def close(self, data: st.DataObject, hold: bool) -> None:
        pr = self._pr(data)
        if pr is None:
            return
        self.gh.close_pull(REPO, pr.number)
        pr.open = False
        self._episode_ends(pr)
        self.send("pull_request", self.pr_payload(pr.number, "closed"), hold=hold)

    @precondition(lambda self: not all(p.open for p in self.prs.values()))
    @rule(data=st.data(), hold=st.booleans())
    def reopen(self, data: st.DataObject, hold: bool) -> None:
        closed = [p for p in self.prs.values() if not p.open]
        if not closed:
            return
        pr = data.draw(st.sampled_from(closed))
        pull = self.gh.pulls[(REPO, pr.number)]
        pull.state = "open"
        pr.open = True
        pr.paused_on_head = pr.paused
        self.send("pull_request", self.pr_payload(pr.number, "reopened"), hold=hold)

    @precondition(lambda self: self._any_open())
    @rule(data=st.data(), hold=st.booleans())
    def toggle_draft(self, data: st.DataObject, hold: bool) -> None:
        pr = self._pr(data)
        if pr is None:
            return
        pull = self.gh.pulls[(REPO, pr.number)]
        pull.draft = pr.draft = not pr.draft
        action = "converted_to_draft" if pr.draft else "ready_for_review"
        self.send("pull_request", self.pr_payload(pr.number, action), hold=hold)

    @precondition(lambda self: self._any_open())
    @rule(data=st.data(), hold=st.booleans(), base=st.sampled_from(["main", "release"]))
    def retarget(self, data: st.DataObject, hold: bool, base: str) -> None:
        pr = self._pr(data)
        if pr is None:
            return
        pull = self.gh.pulls[(REPO, pr.number)]
        old, pull.base_ref = pull.base_ref, base
        payload = self.pr_payload(pr.number, "edited")
        payload["changes"] = {"base": {"ref": {"from": old}, "sha": {"from": "0" * 40}}}
        pr.paused_on_head = pr.paused_on_head or pr.paused
        self.send("pull_request", payload, hold=hold)

    @precondition(lambda self: self._any_open())
    @rule(data=st.data())
    def edit_title(self, data: st.DataObject) -> None:
        pr = self._pr(data)
        if pr is None:
            return
        pull = self.gh.pulls[(REPO, pr.number)]
        pull.title = f"{pull.title}!"
        payload = self.pr_payload(pr.number, "edited")
        payload["changes"] = {"title": {"from": pull.title[:-1]}}
        answer = self.send("pull_request", payload)
        assert answer is not None and answer["outcome"] == "ignored", answer

    # -- commands -----------------------------------------------------------------------------------------------

    @precondition(lambda self: self._any_open())
    @rule(data=st.data(), words=st.sampled_from(["/review", "/review full", "/review pause", "/review resume"]))
    def comment(self, data: st.DataObject, words: str) -> None:
        pr = self._pr(data)
        if pr is None:
            return
        pull = self.gh.pulls[(REPO, pr.number)]
        # pause and resume by the repository's owner take effect at admission, which this model's bookkeeping needs;
        # anyone else's wait for the outbox's permission check (tests/test_commands.py covers that path).
        owner = {"login": "octo-org", "association": "OWNER"} if words in ("/review pause", "/review resume") else {}
        payload = self.h.comment_payload(pull, words, **owner)
        self.github_seconds += 1.0
        payload["comment"]["created_at"] = payload["comment"]["updated_at"] = iso(self.gh.clock())
        answer = self.send("issue_comment", payload)
        assert answer is not None
        if words == "/review pause":
            pr.paused = pr.paused_on_head = True
        elif words == "/review resume":
            pr.paused = False
            pr.paused_on_head = False  # a resume reviews the head skipped while paused
        elif answer["outcome"] == "enqueued" and self.installation_active:
            self.requests.append(Request(f"manual:{payload['comment']['id']}", pr.number, pr.episode))

    @precondition(lambda self: self._any_open())
    @rule(data=st.data())
    def rerun(self, data: st.DataObject) -> None:
        pr = self._pr(data)
        if pr is None:
            return
        # Which check runs exist depends on how far the background got: draw an index first, whatever exists.
        index = data.draw(st.integers(0, 7))
        runs = [r for h in dict.fromkeys(pr.heads) for r in self.gh.check_runs_for(REPO, h)]
        if not runs:
            return
        run = runs[index % len(runs)]
        answer = self.send("check_run", self.h.rerun_payload(self.gh.pulls[(REPO, pr.number)], run))
        assert answer is not None
        if answer["outcome"] == "enqueued" and self.installation_active:
            self.requests.append(Request(f"rerun:{self.sent[-1].delivery}", pr.number, pr.episode))

    # -- installation lifecycle -----------------------------------------------------------------------------

    @precondition(lambda self: self.installation_active)
    @rule(action=st.sampled_from(["suspend", "deleted"]))
    def installation_goes(self, action: str) -> None:
        self.gh.suspend_installation(self.h.installation_id)  # no API access either way
        self.installation_active = False
        self.lifecycle_events = True
        self._episode_ends(*self.prs.values())
        self.send("installation", self.h.installation_payload(action))

    @precondition(lambda self: not self.installation_active)
    @rule(action=st.sampled_from(["unsuspend", "created"]))
    def installation_comes_back(self, action: str) -> None:
        self.gh.suspend_installation(self.h.installation_id, False)
        self.installation_active = True
        self.send("installation", self.h.installation_payload(action))

    @rule()
    def repository_removed_and_added(self) -> None:
        self.lifecycle_events = True
        self._episode_ends(*self.prs.values())
        self.send("installation_repositories", self.h.repositories_payload("removed", removed=[REPO]))
        self.send("installation_repositories", self.h.repositories_payload("added", added=[REPO]))

    # -- faults ---------------------------------------------------------------------------------------------------

    @precondition(lambda self: bool(self.sent))
    @rule(data=st.data())
    def same_delivery_again(self, data: st.DataObject) -> None:
        # What was sent depends on the background (a Re-run needs a check run): draw an index, not from the list.
        again = self.sent[data.draw(st.integers(0, 63)) % len(self.sent)]
        answer = self._post(again)
        # GitHub's retry or redelivery keeps the delivery id: nothing new happens.
        assert answer["outcome"] in ("duplicate-delivery", "ignored"), answer

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def deliver_held(self, data: st.DataObject) -> None:
        sent = self.held.pop(data.draw(st.integers(0, len(self.held) - 1)))
        self.sent.append(sent)
        self._post(sent)

    @rule(
        where=st.sampled_from(
            [r"/pulls/\d+/reviews$", r"/check-runs$", r"/check-runs/\d+$", r"/comments$", r"/reactions$"]
        ),
        mode=st.sampled_from(["drop", "502"]),
    )
    def lose_a_response(self, where: str, mode: str) -> None:
        self.attempt_faults += 1
        method = "PATCH" if where.endswith(r"\d+$") and "check-runs" in where else "POST"
        self.gh.inject(method, where, "lost_response", mode=mode)

    @rule()
    def kill_the_worker(self) -> None:
        dispatcher = self.h.svc.dispatcher
        assert dispatcher is not None

        async def restart() -> None:
            await dispatcher.stop(0)
            dispatcher.start()

        self.run(restart())

    @rule()
    def leases_expire(self) -> None:
        self.attempt_faults += 1
        self.run(self._sql("UPDATE jobs SET lease_expires_at = 0 WHERE state = 'running'"))
        self.h.svc.dispatcher.wake()

    @precondition(lambda self: self.installation_active)
    @rule()
    def sweep(self) -> None:
        # The sweep of open pull requests (it runs at start-up and every hour) racing the webhooks.
        from tests.test_recovery import recovery

        self.run(recovery(self.h).sweep_once())

    @rule()
    def let_it_work(self) -> None:
        # Time passing is the rule itself: the background gets a turn between bursts of events.
        self.run(asyncio.sleep(0.05))

    async def _sql(self, statement: str) -> None:
        if self.schema is None:
            with sqlite3.connect(self.tmp / "reviewer.db", timeout=10) as conn:
                conn.execute(statement)
            return
        conn = await asyncpg.connect(postgres_dsn(), server_settings={"search_path": self.schema})
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    # -- invariants ----------------------------------------------------------------------------------------------

    def _bot_reviews(self, n: int) -> list[dict[str, Any]]:
        return [r for r in self.gh.reviews_for(REPO, n) if r["user"]["login"] == f"{self.gh.app_slug}[bot]"]

    @invariant()
    def nothing_published_twice_for_one_job(self) -> None:
        for n in self.prs:
            job_ids = Counter(m.job_id for r in self._bot_reviews(n) for m in parse_markers(r["body"]))
            assert all(c == 1 for c in job_ids.values()), (n, job_ids)

    async def _settle_and_check(self) -> None:
        self.gh.clear_faults()
        for sent in self.held:  # what GitHub still owed is delivered, late
            self.sent.append(sent)
            await self._deliver(sent)
        self.held.clear()
        await self._quiet()
        if self.lifecycle_events and self.installation_active:
            from tests.test_recovery import recovery

            await recovery(self.h).sweep_once()
            await self._quiet()
        await self._check_invariant()

    async def _deliver(self, sent: Sent) -> None:
        resp = await self.h.client.post(
            "/api/github/webhooks",
            data=sent.body,
            headers=webhook_headers(sent.body, event=sent.event, delivery=sent.delivery),
        )
        assert resp.status in (200, 202), await resp.text()

    async def _quiet(self) -> None:
        """Every job of an active installation finished with its check run synced, and the outbox empty."""
        store = self.h.store

        async def quiet() -> bool:
            jobs = await store.list_jobs(limit=10000)
            active = self.installation_active
            # A requested review cancelled before it read a head never had a check run to sync.
            busy = [
                j
                for j in jobs
                if j.state in (JobState.QUEUED, JobState.RUNNING)
                or (active and j.head_sha and j.check_run_status != "completed")
            ]
            effects = await store.pending_effects() if active else []
            self.h.svc.dispatcher.wake()
            return not busy and not effects

        try:
            await eventually(quiet, timeout=QUIET_TIMEOUT, interval=0.05)
        except AssertionError:
            jobs = await store.list_jobs(limit=10000)
            busy = [
                (j.id, j.pr_number, j.head_sha[:7], j.trigger, j.state.value, j.check_run_status, j.last_error)
                for j in jobs
                if j.state in (JobState.QUEUED, JobState.RUNNING) or j.check_run_status != "completed"
            ]
            raise AssertionError(f"not quiet: {busy}; effects {await store.pending_effects()}") from None

    async def _check_invariant(self) -> None:
        jobs = await self.h.store.list_jobs(limit=10000)
        COVERAGE.update(
            sequences=1,
            jobs=len(jobs),
            requests=len(self.requests),
            reviews=sum(len(self._bot_reviews(n)) for n in self.prs),
            deliveries=self._n,
        )
        by_id = {j.id: j for j in jobs}
        for pr in self.prs.values():
            reviews = self._bot_reviews(pr.number)
            reviewed_heads = {r["commit_id"] for r in reviews}
            marked = [m.job_id for r in reviews for m in parse_markers(r["body"])]
            # Every requested review of this PR: at most one review, exactly one if its episode is still on.
            for req in (r for r in self.requests if r.pr == pr.number):
                answered = [j for j in marked if j in by_id and by_id[j].trigger == req.trigger]
                assert len(answered) <= 1, (req, answered)
                exhausted = [
                    j
                    for j in jobs
                    if j.trigger == req.trigger and j.state == JobState.FAILED and j.attempts >= j.max_attempts
                ]
                if not answered and exhausted and self.attempt_faults >= exhausted[0].max_attempts:
                    COVERAGE.update(exhausted=1)  # a visible failure after the faults used up its attempts
                    continue
                if pr.open and self.installation_active and req.episode == pr.episode:
                    assert len(answered) == 1, (
                        req,
                        [(j.id, j.state, j.outcome) for j in jobs if j.trigger == req.trigger],
                    )
            runs = [r for h in dict.fromkeys(pr.heads) for r in self.gh.check_runs_for(REPO, h)]
            # No check run of a finished job is left queued or in progress (every job is finished now), whatever
            # state the pull request ended in.
            if self.installation_active:
                assert all(r["status"] == "completed" for r in runs), [
                    (r["id"], r["status"], r["external_id"]) for r in runs
                ]
            if not (pr.open and self.installation_active):
                continue
            if pr.head in reviewed_heads:
                continue
            # No review of the current head: its check run must say why, truthfully.
            # The head's latest check run says why: an older run's word no longer stands.
            on_head = sorted(self.gh.check_runs_for(REPO, pr.head), key=lambda r: r["id"])[-1:]
            reasons = " ".join(r["output"]["summary"] for r in on_head if r["status"] == "completed")
            explained = (pr.draft and "draft" in reasons) or (pr.paused_on_head and "paused" in reasons)
            # Bounded retries end in a visible failure: acceptable only when the sequence injected enough faults to
            # use up a job's attempts (REVIEWER_MAX_ATTEMPTS, 5), and only for a job that did use them up.
            exhausted = [
                j
                for j in jobs
                if j.pr_number == pr.number
                and j.head_sha == pr.head
                and j.state == JobState.FAILED
                and j.attempts >= j.max_attempts
            ]
            if exhausted and self.attempt_faults >= exhausted[0].max_attempts and "attempt" in reasons:
                COVERAGE.update(exhausted=1)
                explained = True
            assert explained, (
                pr,
                reasons,
                [(j.id, j.head_sha[:7], j.trigger, j.state, j.outcome) for j in jobs if j.pr_number == pr.number],
            )


class PostgresPRWorkMachine(PRWorkMachine):
    backend = "postgres"


def _settings() -> settings:
    profile = PROFILES[PROFILE]
    return settings(
        max_examples=profile["max_examples"],
        stateful_step_count=profile["stateful_step_count"],
        deadline=None,
        derandomize=PROFILE == "ci" or os.environ.get("CI") == "true",
        suppress_health_check=list(HealthCheck),
        print_blob=True,
        # REVIEWER_MODEL_NO_SHRINK=1: report the first failing sequence as found (a quick look).
        phases=[Phase.explicit, Phase.reuse, Phase.generate]
        if os.environ.get("REVIEWER_MODEL_NO_SHRINK")
        else list(Phase),
    )


@pytest.mark.parametrize("machine", [PRWorkMachine, PostgresPRWorkMachine], ids=["sqlite", "postgres"])
def test_every_head_gets_its_review_whatever_the_sequence(machine: type[PRWorkMachine]) -> None:
    if machine.backend == "postgres":
        from tests.pg import fresh_schema

        async def reachable() -> None:
            async with fresh_schema():
                pass

        asyncio.run(reachable())  # skips (or fails on CI) with a clear message when there is no server
    COVERAGE.clear()
    run_state_machine_as_test(machine, settings=_settings())
    print(f"\n{machine.backend}: {dict(COVERAGE)}")
