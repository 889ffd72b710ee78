"""Model-based test of a pull request's review work: random event sequences against the whole app, then the invariant.

hypothesis's stateful testing drives the real app in process (tests/harness.py: the real receiver, store,
dispatcher and duties, Message Batches and debounce on) against the fake GitHub and the fake model, on SQLite and on
PostgreSQL. A sequence starts in a repository with the default configuration, automatic reviews off, drafts reviewed
or `batch: true`, and goes through pull-request events (open, push, some rewriting the line the app commented on,
force-push back, close, reopen, draft and ready, a new base, a title edit), commands (`/review`, `/review full`,
pause and resume by the owner, a member and an outsider, Re-run), questions to the app and replies in its threads,
installation changes (uninstall and reinstall, suspend and unsuspend, a repository removed and added), the sweep of
open pull requests racing the webhooks, and faults: the same delivery twice; pushes, closes, reopens, drafts, ready,
new bases and comments held back and delivered out of order; lost GitHub responses and failed GitHub reads; model
errors; a worker stopped without grace and started again; leases that expire under a live worker; the host's clock
jumping past its leases; and on PostgreSQL, the app's connections dropped by the server and a second host sharing
the store, stopped with a short grace whatever it is doing. The fake model raises a finding on a changed line of
every review and answers every question, so memory, thread resolution and answers run. GitHub's clock moves a second
per event, so its timestamps order what happened as they do on github.com. The background keeps running while the
rules fire, as in production.

After every step: one review per job, one answer per question, one reply per thread the app resolved. After the
sequence, once the system is quiet (every job finished, every check run synced, the outbox empty), the invariant of
docs/architecture.md: for every open pull request of an active installation, its current head has a review by the
app, or its latest check run says why not (paused and not resumed since, draft, automatic reviews off, attempts used
up by faults); every accepted request whose episode did not end has exactly one review; a job is superseded only by
a head the app took work for; the model was paid twice for a part only after a fault or for a job stopped after it
started; no check run of a finished job is left queued or in progress, whatever state its pull request ended in.

Profiles: CI runs a fixed, derandomised number of sequences; `REVIEWER_MODEL_PROFILE=long` runs many more (see the
README's testing section).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import sqlite3
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
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

from reviewer_app.core.markers import answer_marker_of, parse_markers
from reviewer_app.core.states import JobState
from reviewer_app.dispatch.duty import DUTY_LEASE_SECONDS
from reviewer_app.review.batches import BatchPoller
from reviewer_app.service import Service, build_service
from reviewer_app.store.base import StoreUnavailable
from tests.e2e.model_dead_and_limited import DeadAndLimited
from tests.fakes.github import added_file, iso
from tests.fakes.github.routes.threads import add_review_reply
from tests.harness import REPO, SOURCE, harness
from tests.helpers import eventually, webhook_headers
from tests.payloads import review_comment_event
from tests.pg import create_schema, drop_schema, postgres_dsn

PRS = (1, 2)
PAGE = 100  # items of a list page the app asks GitHub for (github/api_transport.PER_PAGE)
BATCH_OUT_WAIT = 1.5  # seconds an edit waits for a batch to be out (past the debounce and the batch's gathering)
VERIFICATION_OUT_WAIT = 2.0  # and for the verification's, once the review's batch ended (polled, resumed, sent)
PROFILES = {
    # CI: bounded and derandomised, so a red run is the same red run on every machine.
    "ci": {"max_examples": 60, "stateful_step_count": 25},
    "long": {"max_examples": 400, "stateful_step_count": 40},
}
PROFILE = os.environ.get("REVIEWER_MODEL_PROFILE", "ci")
QUIET_TIMEOUT = 45.0
# A host stopped while it held a duty's lease (check-run sync, outbox) leaves it to the others only when the lease
# expires (DUTY_LEASE_SECONDS) if it could not release it: quiet then comes that much later, by design.
QUIET_TIMEOUT_AFTER_A_SECOND_HOST = QUIET_TIMEOUT + DUTY_LEASE_SECONDS
LEASE_SECONDS = 3
REDELIVERIES = 5  # a delivery answered 503 is redelivered: at most this many tries in all
GITHUB_LAG = 900.0  # seconds GitHub's clock stays behind the app's (more than a sequence's events can add)
PATH = SOURCE["filename"]
LINES = [line for i in range(1, 6) for line in (f"def f{i}():", f"    return {i}")]
FINDING_LINE = 2  # the fake model raises one finding on this line of every version: memory and threads get to work
CONFIG_PATH = ".github/reviewer.yml"
BOT = "reviewer-app[bot]"
PEOPLE = {"owner": ("octo-org", "OWNER"), "maintainer": ("maintainer", "MEMBER"), "outsider": ("drive-by", "NONE")}
# What a repository says in its configuration: the defaults, automatic reviews off, drafts reviewed, batched reviews.
CONFIGS = {"default": "", "manual": "auto: false\n", "drafts": "drafts: true\n", "batched": "batch: true\n"}
BY_JOB, BY_SHA = re.compile(r"by job (\d+)"), re.compile(r"[0-9a-f]{40}")  # what a superseded job's outcome names
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
    answered: Callable[[dict[str, Any]], None] | None = None  # the model's bookkeeping of the app's answer


def reviews(body: dict[str, Any]) -> bool:
    """A request for a review (the review tool offered), not for an answer in a thread (the answer tool)."""
    return any(tool.get("name") == "submit_review" for tool in body.get("tools") or ())


def verifies(body: dict[str, Any]) -> bool:
    """A request of the verification pass (its tool forced), not a review's or an answer's."""
    return (body.get("tool_choice") or {}).get("name") == "submit_verdicts"


def fake_model(body: dict[str, Any]) -> dict[str, Any] | str:
    """The stand-in model: a review raises one finding on a changed line; a question gets a short answer (the fake
    puts it in the answer tool's call, saying it disputes nothing)."""
    if reviews(body):
        comment = {"path": PATH, "line": FINDING_LINE, "side": "RIGHT", "severity": "warning"}
        return {"summary": "One thing to look at.", "comments": [{**comment, "body": "f1 returns a constant."}]}
    return "It returns a constant on purpose, as far as this pull request shows."


class PRWorkMachine(DeadAndLimited, RuleBasedStateMachine):
    """The model is deliberately dumb: what GitHub looks like, which requests were accepted, what ended them."""

    backend = "sqlite"
    coverage = COVERAGE

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.tmp = Path(tempfile.mkdtemp(prefix="pr-model-"))
        self.schema: str | None = None
        env = {
            "REVIEWER_LEASE_SECONDS": str(LEASE_SECONDS),
            "REVIEWER_RENEW_SECONDS": "0.3",
            # Message Batches on, as in production: the sweep's heads and `batch: true` repositories wait on a batch.
            "REVIEWER_BATCH": "1",
            "REVIEWER_BATCH_GATHER_SECONDS": "0.05",
            "REVIEWER_BATCH_POLL_SECONDS": "0.1",
            # Automatic reviews wait a moment after a push, as in production (30 s there): a push in the window
            # replaces the waiting one.
            "REVIEWER_DEBOUNCE_SECONDS": "0.2",
            # The verification pass on, as in production: a batched review's verification waits on a batch of its own.
            "REVIEWER_VERIFY": "1",
        }
        if self.backend == "postgres":
            self.schema = self.run(create_schema(postgres_dsn()))
            dsn = postgres_dsn()
            env["DATABASE_URL"] = f"{dsn}{'&' if '?' in dsn else '?'}search_path={self.schema}"
        self._harness = harness(self.tmp, **env)
        self.h = self.run(self._harness.__aenter__())
        self.gh = self.h.github
        self.h.anthropic.responder = fake_model
        self.second: Service | None = None  # a second host on the same PostgreSQL store, while it runs
        self.hosts_stopped = 0
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
        # Model calls a fault may have made worthless: one for a fault that stops one request, a host's every slot for
        # one that stops every job running there (a kill, leases expired, connections dropped, a host stopped).
        self.calls_at_risk = 0
        self.config = "default"
        self.clock_offset = 0.0  # how far this host's clock jumped ahead
        self.versions = 0  # versions of the file pushed so far (a new version changes the finding's line)
        self.questions: list[int] = []  # comment ids of questions (in the conversation or in a thread) admitted
        self.lost_reviews: list[Any] = []  # faults losing the answer to a review POST on a PR with full pages
        self._init_dead_and_limited()

    # -- plumbing ------------------------------------------------------------------------------------------

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        try:
            self.run(self._settle_and_check())
        finally:
            try:
                if self.second is not None:
                    self.run(self.second.stop())
                self.run(self._stop_replacements())
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
        return self.run(self._deliver(sent))

    def send(
        self,
        event: str,
        payload: dict[str, Any],
        *,
        hold: bool = False,
        answered: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any] | None:
        self.github_seconds += 1.0
        if hold:
            COVERAGE.update({f"held {event}.{payload.get('action')}": 1})
        sent = Sent(event, json.dumps(payload).encode(), self._delivery_id(), answered)
        if hold:
            self.held.append(sent)
            return None
        return self._send_now(sent)

    def _send_now(self, sent: Sent) -> dict[str, Any]:
        self.sent.append(sent)
        answer = self._post(sent)
        if sent.answered is not None:
            sent.answered(answer)
        return answer

    def pr_payload(self, n: int, action: str, **extra: Any) -> dict[str, Any]:
        self.github_seconds += 1.0  # the event happens a second after the last one
        pull = self.gh.pulls[(REPO, n)]
        pull.updated_at = self.gh.clock()
        return self.h.pr_payload(pull, action, updated_at=iso(pull.updated_at), **extra)  # one-second resolution

    def _text_at(self, sha: str) -> str:
        return self.gh.repos[REPO].contents[sha][PATH]

    def _episode_ends(self, *prs: PRModel) -> None:
        for pr in prs:
            pr.episode += 1

    # -- pull-request events ---------------------------------------------------------------------------------

    @initialize(drafts=st.tuples(st.booleans(), st.booleans()), config=st.sampled_from(sorted(CONFIGS)))
    def open_prs(self, drafts: tuple[bool, bool], config: str) -> None:
        self.config = config
        COVERAGE.update({f"config {config}": 1})
        for base in ("main", "release"):  # read from the base branch, whichever the PR targets
            self.gh.set_file(REPO, CONFIG_PATH, CONFIGS[config], ref=base)
        for n, draft in zip(PRS, drafts, strict=True):
            pull = self.gh.add_pull(REPO, n, files=[SOURCE], draft=draft)
            self.gh.set_file(REPO, PATH, "\n".join(LINES), ref=pull.head_sha)
            self.prs[n] = PRModel(n, [pull.head_sha], draft=draft)
            self.send("pull_request", self.pr_payload(n, "opened"))

    def _any_open(self) -> bool:
        return any(p.open for p in self.prs.values())

    def _pr(self, data: st.DataObject, *, open_only: bool = True) -> PRModel | None:
        choices = [p for p in self.prs.values() if p.open or not open_only]
        return data.draw(st.sampled_from(choices)) if choices else None

    @precondition(lambda self: self._any_open())
    @rule(data=st.data(), hold=st.booleans(), change=st.booleans())
    def push(self, data: st.DataObject, hold: bool, change: bool) -> None:
        """A new commit; ``change``: it rewrites the line the app commented on (its thread becomes outdated)."""
        pr = self._pr(data)
        if pr is None:
            return
        before = pr.head
        lines = list(LINES)
        if change:
            self.versions += 1
            lines[FINDING_LINE - 1] = f"    return 1  # version {self.versions}"
        pull = self.gh.pulls[(REPO, pr.number)]
        files = [added_file(PATH, lines)] if change else pull.files_by_sha[pull.head_sha]
        pr.heads.append(self.gh.advance_head(REPO, pr.number, files=files))
        self.gh.set_file(REPO, PATH, "\n".join(lines) if change else self._text_at(before), ref=pr.head)
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
    @rule(data=st.data(), words=st.sampled_from(["/review", "/review full"]), hold=st.booleans())
    def comment(self, data: st.DataObject, words: str, hold: bool) -> None:
        pr = self._pr(data)
        if pr is None:
            return
        payload = self._comment(pr, words, "maintainer")
        episode = pr.episode

        def answered(answer: dict[str, Any]) -> None:
            if answer["outcome"] == "enqueued" and self.installation_active:
                self.requests.append(Request(f"manual:{payload['comment']['id']}", pr.number, episode))

        self.send("issue_comment", payload, hold=hold, answered=answered)

    @precondition(lambda self: self._any_open())
    @rule(
        data=st.data(),
        pause=st.booleans(),
        who=st.sampled_from(["owner", "maintainer", "outsider"]),
        hold=st.booleans(),
    )
    def pause_or_resume(self, data: st.DataObject, pause: bool, who: str, hold: bool) -> None:
        """``/review pause`` or ``resume``: the owner's applies at admission, a maintainer's once the outbox has
        confirmed their access, an outsider's never. Whichever way, the one written last is the one that holds."""
        pr = self._pr(data)
        if pr is None:
            return
        payload = self._comment(pr, "/review pause" if pause else "/review resume", who)
        COVERAGE.update({f"{'pause' if pause else 'resume'} by {who}{' held' if hold else ''}": 1})
        if who != "outsider":
            pr.paused = pause
            # Paused: the current head may go unreviewed. Resumed: the head skipped while paused is reviewed.
            pr.paused_on_head = pause
        self.send("issue_comment", payload, hold=hold)

    def _comment(self, pr: PRModel, words: str, who: str) -> dict[str, Any]:
        login, association = PEOPLE[who]
        payload = self.h.comment_payload(self.gh.pulls[(REPO, pr.number)], words, login=login, association=association)
        self.github_seconds += 1.0
        payload["comment"]["created_at"] = payload["comment"]["updated_at"] = iso(self.gh.clock())
        return payload

    @precondition(lambda self: self._any_open())
    @rule(data=st.data())
    def ask(self, data: st.DataObject) -> None:
        """A question to the app in the conversation: answered once."""
        pr = self._pr(data)
        if pr is None:
            return
        payload = self._comment(pr, f"@{self.gh.app_slug} why does f1 return a constant?", "maintainer")
        self.send("issue_comment", payload, answered=self._question(payload["comment"]["id"]))

    @precondition(lambda self: self._any_open())
    @rule(data=st.data())
    def reply_in_thread(self, data: st.DataObject) -> None:
        """The author replies in a thread the app started: answered once, in the thread."""
        pr = self._pr(data)
        if pr is None:
            return
        roots = [c for c in self._bot_review_comments(pr.number) if not c.get("in_reply_to_id")]
        index = data.draw(st.integers(0, 7))  # which threads exist depends on how far the background got
        if not roots:
            return
        root = roots[index % len(roots)]
        pull = self.gh.pulls[(REPO, pr.number)]
        self.github_seconds += 1.0
        comment = add_review_reply(self.gh, REPO, pr.number, root["id"], pull.user, "Why is that a problem?")
        payload = review_comment_event(
            comment,
            login=pull.user,
            number=pr.number,
            head=pull.head_sha,
            base_sha=pull.base_sha,
            base_ref=pull.base_ref,
            repo=REPO,
            repo_id=self.gh.repos[REPO].id,
            installation_id=self.h.installation_id,
            author=pull.user,
            state=pull.state,
        )
        self.send("pull_request_review_comment", payload, answered=self._question(comment["id"]))

    def _question(self, comment_id: int) -> Callable[[dict[str, Any]], None]:
        def answered(answer: dict[str, Any]) -> None:
            COVERAGE.update({f"question {answer['outcome']}": 1})
            if answer["outcome"] == "enqueued":
                self.questions.append(comment_id)

        return answered

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
        self._send_now(self.held.pop(data.draw(st.integers(0, len(self.held) - 1))))

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

    @rule(
        where=st.sampled_from([r"/pulls/\d+$", r"/pulls/\d+/files", r"/contents/", r"/pulls/\d+/reviews$"]),
        status=st.sampled_from([500, 502]),
    )
    def fail_a_read(self, where: str, status: int) -> None:
        """GitHub answers one read with a server error (the next request to the same route may succeed)."""
        self.attempt_faults += 1
        self.gh.inject("GET", where, "error", status=status)

    @rule(kind=st.sampled_from(["server_error", "overloaded", "disconnect", "lost_answer", "malformed"]))
    def model_fails(self, kind: str) -> None:
        """The next model request (a review's or an answer's, interactive or in a batch) fails."""
        self.attempt_faults += 1
        anthropic = self.h.anthropic
        {
            "server_error": anthropic.script_server_error,
            "overloaded": anthropic.script_overloaded,
            "disconnect": anthropic.script_disconnect,
            "lost_answer": anthropic.script_lost_answer,
            "malformed": anthropic.script_malformed_answer,
        }[kind]()

    @property
    def slots_per_host(self) -> int:
        """Jobs one host runs at once: its review slots and its answer slots (a queue each)."""
        return self.h.svc.cfg.concurrency + self.h.svc.cfg.answer_concurrency

    @rule()
    def kill_the_worker(self) -> None:
        self.attempt_faults += 1  # a runner killed after the model answered, before the answer was stored, asks again
        self.calls_at_risk += self.slots_per_host
        dispatcher = self.h.svc.dispatcher
        assert dispatcher is not None

        async def restart() -> None:
            await dispatcher.stop(0)
            dispatcher.start()

        self.run(restart())

    # Leases are compared on the hosts' clocks: two hosts whose clocks disagree by more than a lease are outside
    # what the app promises, so the clock jumps only while one host runs, and no second host joins a jumped one.
    @precondition(lambda self: self.second is None)
    @rule()
    def clock_jumps(self) -> None:
        """The host's clock jumps forward past every lease it holds (a paused VM resumed): it must not rescue its own
        healthy jobs, and everything it does from then on runs on the jumped clock."""
        self.clock_offset += 2 * LEASE_SECONDS
        offset = self.clock_offset
        dispatcher = self.h.svc.dispatcher
        assert dispatcher is not None
        dispatcher.clock = dispatcher.rescuer.clock = lambda: time.time() + offset
        # The host's batch poller reads the same clock: a result it records is timed as the host's attempts are.
        poll = self.h.svc.batch_poll
        for duty_part in vars(poll).values() if poll is not None else ():
            poller = getattr(duty_part, "__self__", None)
            if isinstance(poller, BatchPoller):
                poller._clock = dispatcher.clock
        dispatcher.wake()

    @rule()
    def leases_expire(self) -> None:
        self.attempt_faults += 1
        self.calls_at_risk += self.slots_per_host * (2 if self.second is not None else 1)
        self.run(self._sql("UPDATE jobs SET lease_expires_at = 0 WHERE state = 'running'"))
        self.h.svc.dispatcher.wake()

    @precondition(lambda self: self.backend == "postgres")
    @rule()
    def drop_database_connections(self) -> None:
        """PostgreSQL drops every connection the app holds (a failover, a restart, an idle timeout)."""
        self.attempt_faults += 1
        self.calls_at_risk += self.slots_per_host
        self.run(self._terminate_connections(self.h.svc))

    async def _terminate_connections(self, svc: Service) -> None:
        store = svc.store  # the app's own connections only: other tests share the server
        holders = store._pool._holders
        pids = [h._con.get_server_pid() for h in holders if h._con is not None and not h._con.is_closed()]
        if store._wakeups is not None and store._wakeups.server_pid is not None:
            pids.append(store._wakeups.server_pid)
        conn = await asyncpg.connect(postgres_dsn())
        try:
            await conn.execute("SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid", pids)
        finally:
            await conn.close()

    @precondition(lambda self: self.backend == "postgres" and self.second is None and not self.clock_offset)
    @rule()
    def second_host_starts(self) -> None:
        """A second host (a deploy's new process) starts on the same PostgreSQL store and shares the work."""
        COVERAGE.update(second_host=1)

        async def start() -> Service:
            svc = await build_service(self.h.svc.cfg)
            svc.start_background()
            return svc

        self.second = self.run(start())

    @precondition(lambda self: self.second is not None)
    @rule(grace=st.sampled_from([0.0, 0.05, 0.5]))
    def second_host_stops(self, grace: float) -> None:
        """The deploy ends: the second host stops with a short grace, whatever it is doing (publishing, too)."""
        self.attempt_faults += 1
        self.calls_at_risk += self.slots_per_host
        second, self.second = self.second, None
        self.hosts_stopped += 1
        assert second is not None and second.dispatcher is not None

        async def stop() -> None:
            await second.dispatcher.stop(grace)
            await second.stop()

        self.run(stop())

    @precondition(lambda self: self.installation_active)
    @rule()
    def sweep(self) -> None:
        # The sweep of open pull requests (it runs at start-up and every hour) racing the webhooks.
        from tests.github.test_recovery import recovery

        with contextlib.suppress(StoreUnavailable):  # the duty, too, tries again at its next pass
            self.run(recovery(self.h).sweep_once())

    @rule(seconds=st.sampled_from([0.05, 0.5]))
    def let_it_work(self, seconds: float) -> None:
        # Time passing is the rule itself: the background gets a turn between bursts of events (the longer pause
        # outlasts the debounce, so reviews land between pushes and the next review meets their threads).
        self.run(asyncio.sleep(seconds))

    async def _sql(self, statement: str) -> None:
        if self.schema is None:
            with sqlite3.connect(self.tmp / "reviewer.db", timeout=10) as conn:
                conn.execute(statement)
            return
        conn = await asyncpg.connect(postgres_dsn(), server_settings={"search_path": self.schema})
        try:
            for _ in range(5):  # a deadlock with the app's own multi-row transactions rolls this one back: again
                try:
                    await conn.execute(statement)
                    return
                except asyncpg.TransactionRollbackError:
                    continue
            raise AssertionError(f"{statement!r} kept deadlocking")
        finally:
            await conn.close()

    # -- published or paid twice (#38): long lists, lost answers, edits while a batch is out -----------------------

    @precondition(lambda self: self._any_open())
    @rule(data=st.data(), lose_the_review=st.booleans())
    def fill_a_page_of_reviews(self, data: st.DataObject, lose_the_review: bool) -> None:
        """People review the pull request until its reviews fill whole pages: the app's next review starts a page
        its kept copy of the last full one never named (GitHub's ETag does not cover ``Link``). ``lose_the_review``:
        the answer to the app's next review POST is lost too, so the marker lookup must find it on that new page."""
        pr = self._pr(data)
        if pr is None:
            return
        COVERAGE.update({f"full page of reviews{', review answer lost' if lose_the_review else ''}": 1})
        for n in range(PAGE - len(self.gh.reviews_for(REPO, pr.number)) % PAGE):
            self.gh.add_review_by(REPO, pr.number, f"reviewer{n}", f"Looks fine to me ({n}).")
        if lose_the_review:
            self.attempt_faults += 1
            self.lost_reviews.append(
                self.gh.inject("POST", rf"/pulls/{pr.number}/reviews$", "lost_response", mode="drop")
            )

    def _keep_lost_reviews(self) -> None:
        """The lost review answers not met yet stay through the settling: one lost answer never costs an attempt, and
        most reviews are posted then."""
        self.gh.faults.extend(f for f in self.lost_reviews if not f.hits)

    @rule(release=st.booleans())
    def end_batches(self, release: bool) -> None:
        """The batches out end now; ``release``: later ones end as soon as they are sent, else they are held too."""
        self.h.anthropic.hold_batches = self.h.anthropic.hold_batches and not release
        self.h.anthropic.end_batches()

    @precondition(lambda self: self._any_open())
    @rule(data=st.data(), what=st.sampled_from(["title", "description"]))
    def edit_while_a_batch_is_out(self, data: st.DataObject, what: str) -> None:
        """A person (or a bot) edits the title or the description while batches are held: the pull request of a
        review's batch out, then, once that batch ends, of its verification's. Nothing new is asked, nothing already
        asked for is asked again (a request keeps its name whatever the edit)."""
        pr = self._pr(data)
        if pr is None:
            return
        self.h.anthropic.hold_batches = True  # what is sent from now on stays out until it is ended or released
        if self.config == "batched" and self._batch_out(0) is None and not (pr.draft or pr.paused):
            self._push_same_text(pr)  # a new head of a repository that batches: its review goes to a batch
        for wait in (BATCH_OUT_WAIT, VERIFICATION_OUT_WAIT):  # the review's batch, then its verification's
            out = self._batch_out(wait)
            if out is None:
                break
            COVERAGE.update({f"{what} edited while a batch is out": 1})
            self._edit(self.prs[out], what)
            self.h.anthropic.end_batches()
        else:
            return
        COVERAGE.update({f"{what} edited": 1})
        self._edit(pr, what)

    def _push_same_text(self, pr: PRModel) -> None:
        before = pr.head
        pull = self.gh.pulls[(REPO, pr.number)]
        pr.heads.append(self.gh.advance_head(REPO, pr.number, files=pull.files_by_sha[pull.head_sha]))
        self.gh.set_file(REPO, PATH, self._text_at(before), ref=pr.head)
        pr.paused_on_head = pr.paused
        self.send("pull_request", self.pr_payload(pr.number, "synchronize", before=before))

    def _batch_out(self, wait: float) -> int | None:
        """The pull request of a job whose request is in a batch out, waited for a moment where reviews are batched."""

        async def out() -> int | None:
            for batch in self.h.anthropic.batches.values():
                if batch.processing_status == "in_progress" and batch.requests:
                    job = await self.h.store.get_job(int(batch.requests[0]["custom_id"].split("-")[1]))
                    return job.pr_number
            return None

        with contextlib.suppress(AssertionError):  # none came
            return self.run(eventually(out, timeout=wait if self.config == "batched" else 0, interval=0.02))
        return None

    def _edit(self, pr: PRModel, what: str) -> None:
        pull = self.gh.pulls[(REPO, pr.number)]
        if what == "title":
            old, pull.title = pull.title, f"{pull.title}!"
        else:
            old, pull.body = pull.body or "", f"{pull.body or ''} Rewritten by a bot."
        payload = self.pr_payload(pr.number, "edited")
        payload["changes"] = {what.replace("description", "body"): {"from": old}}
        answer = self.send("pull_request", payload)
        assert answer is not None and answer["outcome"] == "ignored", answer

    # -- invariants ----------------------------------------------------------------------------------------------

    def _bot_reviews(self, n: int) -> list[dict[str, Any]]:
        return [r for r in self.gh.reviews_for(REPO, n) if r["user"]["login"] == f"{self.gh.app_slug}[bot]"]

    def _bot_review_comments(self, n: int) -> list[dict[str, Any]]:
        return [c for c in self.gh.review_comments_for(REPO, n) if c["user"]["login"] == BOT]

    @invariant()
    def nothing_said_twice(self) -> None:
        """One review per job, one answer per question, one reply per resolved thread: after every step."""
        for n in self.prs:
            job_ids = Counter(m.job_id for r in self._bot_reviews(n) for m in parse_markers(r["body"]))
            assert all(c == 1 for c in job_ids.values()), (n, job_ids)
            said = [c["body"] for c in self._bot_review_comments(n)]
            said += [c["body"] for c in self.gh.issue_comments_for(REPO, n) if c["user"]["login"] == BOT]
            answers = Counter(answer_marker_of(body) for body in said)
            answers.pop(None, None)
            assert all(c == 1 for c in answers.values()), (n, answers)
            replies = Counter(
                c["in_reply_to_id"]
                for c in self._bot_review_comments(n)
                if c.get("in_reply_to_id") and answer_marker_of(c["body"]) is None
            )
            assert all(c == 1 for c in replies.values()), (n, replies)  # a resolved thread's one "changed in" reply

    async def _settle_and_check(self) -> None:
        self.gh.clear_faults()
        self._keep_lost_reviews()
        self.end_batches(release=True)
        for sent in self.held:  # what GitHub still owed is delivered, late
            self.sent.append(sent)
            answer = await self._deliver(sent)
            if sent.answered is not None:
                sent.answered(answer)
        self.held.clear()
        await self._quiet()
        if self.lifecycle_events and self.installation_active:
            from tests.github.test_recovery import recovery

            await recovery(self.h).sweep_once()
            await self._quiet()
        await self._check_invariant()
        await self._check_the_other_installation()

    async def _deliver(self, sent: Sent) -> dict[str, Any]:
        """Deliver as GitHub does: a 503 (the job could not be stored) is a failed delivery, redelivered with the same
        delivery id (by the recovery duty, or by hand) until it is accepted."""
        for _ in range(REDELIVERIES):
            resp = await self.h.client.post(
                "/api/github/webhooks",
                data=sent.body,
                headers=webhook_headers(sent.body, event=sent.event, delivery=sent.delivery),
            )
            if resp.status != 503:
                break
            COVERAGE.update(redelivered_after_503=1)
        assert resp.status in (200, 202), await resp.text()
        return await resp.json()

    async def _quiet(self) -> None:
        """Every job of an active installation finished with its check run synced, and the outbox empty."""
        store = self.h.store

        async def quiet() -> bool:
            try:
                jobs = await store.list_jobs(limit=10000)
            except StoreUnavailable:  # a connection the sequence dropped: the pool opens another
                return False
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
            timeout = QUIET_TIMEOUT_AFTER_A_SECOND_HOST if self.hosts_stopped else QUIET_TIMEOUT
            await eventually(quiet, timeout=timeout, interval=0.05)
        except AssertionError:
            jobs = await store.list_jobs(limit=10000)
            busy = [
                (j.id, j.pr_number, j.head_sha[:7], j.trigger, j.state.value, j.check_run_status, j.last_error)
                for j in jobs
                if j.state in (JobState.QUEUED, JobState.RUNNING) or j.check_run_status != "completed"
            ]
            raise AssertionError(
                f"not quiet: {busy}; effects {await store.pending_effects()}\n{await self._why_busy(jobs)}"
            ) from None

    async def _why_busy(self, jobs) -> str:
        """What a job left running or queued is doing: its attempts (owner, lease, outcome) and, for this process's
        runners of it, where each one waits (a long profile's failure is timing-dependent: the replay may pass)."""
        lines = [f"wall={time.time():.1f} clock_offset={self.clock_offset}"]
        for j in jobs:
            if j.state not in (JobState.QUEUED, JobState.RUNNING):
                continue
            lines.append(f"job {j.id}: {j.state.value} next_attempt_at={j.next_attempt_at} attempts={j.attempts}")
            for a in await self.h.store.attempts_of(j.id):
                lines.append(f"  attempt {a}")
        # Every task of the app's code, each with its whole chain of awaits (a shielded write runs in a task of its own).
        for task in asyncio.all_tasks(self.loop):
            chain, coro = [], task.get_coro()
            while coro is not None:
                frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None)
                if frame is not None:
                    chain.append(
                        f"{frame.f_code.co_filename.split('/work/main/')[-1]}:{frame.f_lineno} {frame.f_code.co_name}"
                    )
                coro = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None)
            if any("reviewer_app/" in c for c in chain):
                lines.append(f"task {task.get_name()}: " + " > ".join(chain))
        return "\n".join(lines)

    async def _check_invariant(self) -> None:
        jobs = await self.h.store.list_jobs(limit=10000)
        COVERAGE.update(
            sequences=1,
            jobs=len(jobs),
            requests=len(self.requests),
            reviews=sum(len(self._bot_reviews(n)) for n in self.prs),
            deliveries=self._n,
            questions=len(self.questions),
            answers=sum(
                1
                for n in self.prs
                for c in self._bot_review_comments(n) + self.gh.issue_comments_for(REPO, n)
                if answer_marker_of(c["body"]) is not None
            ),
            threads_resolved=len(self.gh.review_threads.resolved),
        )
        by_id = {j.id: j for j in jobs}
        self._check_model_calls(jobs)
        self._check_verified_once()
        for pr in self.prs.values():
            self._check_superseded_by_known_heads(pr, [j for j in jobs if j.pr_number == pr.number])
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
            explained = (
                (pr.draft and "draft" in reasons)
                or (pr.paused_on_head and "paused" in reasons)
                or (self.config == "manual" and "automatic reviews are turned off" in reasons)
            )
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
            assert explained, "\n".join(
                [
                    f"PR {pr.number} head {pr.head[:7]} draft={pr.draft} paused={pr.paused}/{pr.paused_on_head}: {reasons}"
                ]
                + [
                    f"  job {j.id} {j.head_sha[:7]} {j.trigger} {j.state.value} {j.outcome}"
                    for j in sorted(jobs, key=lambda j: j.id)
                    if j.pr_number == pr.number
                ]
            )

    def _check_model_calls(self, jobs: list[Any]) -> None:
        """One model call per review (these PRs fit in one part), unless an attempt failed before its answer was
        stored: every fault the sequence injected, and every job stopped after it started, may have cost one call at
        most. A batched request is named by its
        job and part, so a second one of the same name is a call paid twice; an interactive call is counted against
        the jobs that stored an interactive answer."""
        anthropic = self.h.anthropic
        names = Counter(
            item["custom_id"] for b in anthropic.batches.values() for item in b.requests if reviews(item["params"])
        )
        batched_jobs = {int(name.split("-")[1]) for name in names}
        asked_again = sum(c - 1 for c in names.values())
        interactive = sum(1 for r in anthropic.message_requests if reviews(r.body))
        answered = sum(1 for j in jobs if j.answer is not None and j.id not in batched_jobs)
        COVERAGE.update(model_calls=interactive + sum(names.values()), batched=sum(names.values()))
        # A job stopped while it waited on the model (superseded by a push, cancelled by a close or an uninstall)
        # never stores that answer: the call was for a head no longer wanted.
        stopped = sum(
            1
            for j in jobs
            if j.answer is None and j.attempts >= 1 and j.state in (JobState.SUPERSEDED, JobState.CANCELLED)
        )
        allowed = self.attempt_faults + self.calls_at_risk + stopped
        assert asked_again + max(0, interactive - answered) <= allowed, (names, interactive, answered, allowed)

    def _check_verified_once(self) -> None:
        """A job's findings are verified once: a batched verification is named by its job, so a second one for the
        same job (an edit while the first was out renamed it) is paid twice, allowed only after a fault."""
        per_job = Counter(
            int(item["custom_id"].split("-")[1])
            for b in self.h.anthropic.batches.values()
            for item in b.requests
            if verifies(item["params"])
        )
        COVERAGE.update(batched_verifications=sum(per_job.values()))
        again = sum(c - 1 for c in per_job.values())
        assert again <= self.attempt_faults + self.calls_at_risk, (dict(per_job), self.attempt_faults)

    def _check_superseded_by_known_heads(self, pr: PRModel, jobs: list[Any]) -> None:
        """A job is superseded only by a head of its pull request that the app took work for: a job of that head
        exists, and it was reviewed or its work ended for a reason of its own (never lost in between)."""
        reviewed = {r["commit_id"] for r in self._bot_reviews(pr.number)}
        for job in jobs:
            if job.state != JobState.SUPERSEDED:
                continue
            by_job, by_sha = BY_JOB.search(job.outcome or ""), BY_SHA.search(job.outcome or "")
            assert by_job or by_sha, (job.id, job.outcome)
            if by_job:
                newer = next((j for j in jobs if j.id == int(by_job.group(1))), None)
                assert newer is not None, (job.id, job.outcome)
                head = newer.head_sha
            else:
                head = by_sha.group(0)
            of_head = [j for j in jobs if j.head_sha == head]
            assert head in pr.heads and of_head, (job.id, job.outcome, pr.heads)
            assert head in reviewed or any(j.state != JobState.SUCCEEDED for j in of_head), (job.id, job.outcome)


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
