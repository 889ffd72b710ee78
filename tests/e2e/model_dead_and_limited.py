"""Rules of the model-based test of a pull request's review work (test_pr_model.py) for issue #38: a process dies
without its clean stop, holding duty leases and check-run claims as after kill -9, and another starts on the same
store; another installation is rate-limited for a while. And the invariant's part about them: once quiet, no check
run is left queued or in progress and no reply unsent, in either installation."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import TYPE_CHECKING

from aiohttp.test_utils import TestClient, TestServer
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from reviewer_app.dispatch.duty import DUTY_LEASE_SECONDS
from reviewer_app.github.checks import CREATION_CLAIM_SECONDS
from reviewer_app.service import Service, build_service
from tests.harness import SOURCE
from tests.helpers import eventually
from tests.payloads import issue_comment_event, pull_request_event

if TYPE_CHECKING:
    from tests.fakes.github import FakeGitHub
    from tests.harness import Harness

OTHER_REPO = "other-org/gadgets"
OTHER_FIRST_PR = 100  # its pull requests' numbers are apart from the model's own (the invariant goes by number)
OTHER_LIMIT_SECONDS = (0.5, 1.5)  # how long the other installation waits out its limit: short, the suite stays fast
# The passes a process may die in the middle of (a duty's lease is held during its pass).
DUTIES = ("duty:check-sync", "duty:outbox", "duty:batches")


class DeadAndLimited:
    """Mixed into the state machine, which supplies ``h``, ``gh``, ``run``, ``send``, ``_sql``, the fault counters
    and ``coverage``."""

    h: Harness
    gh: FakeGitHub
    attempt_faults: int
    calls_at_risk: int
    clock_offset: float
    coverage: Counter[str]

    def _init_dead_and_limited(self) -> None:
        self.replacements: list[tuple[Service, TestClient]] = []  # processes started in place of a dead one
        self.other_installation: int | None = None
        self.other_prs = 0

    # -- a process dies (kill -9) and another starts on its store ----------------------------------------------

    # On the jumped clock, the dead process's leases would be compared with a new process's true clock: outside what
    # the app promises (test_pr_model.py's clock_jumps).
    @precondition(lambda self: not self.clock_offset)
    @rule()
    def a_process_dies_and_another_starts(self) -> None:
        self.coverage.update(process_died=1)
        self.attempt_faults += 1
        self.calls_at_risk += self.slots_per_host  # type: ignore[attr-defined]
        self.run(self._die_and_replace())  # type: ignore[attr-defined]

    async def _die_and_replace(self) -> None:
        dead = self.h.svc
        assert dead.registration is not None and dead.dispatcher is not None
        owner = dead.registration.info.id
        # A process holds nothing before its first beat has registered it (its work starts after): one that dies
        # sooner leaves nothing behind.
        held = dead.registration.beats > 0
        # Its tasks stop where they are; none of its clean stop runs (no hand-back, no final sync, no deregistration).
        dispatcher = dead.dispatcher
        tasks = [*dead.background, *dispatcher.tasks.values()]
        tasks += [t for t in (dispatcher._loop_task, dispatcher._renewer) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # Its connections close as a dead process's do (the database server would run out of them otherwise), and
        # nothing of it is left to stop: the harness's clean stop of the first process then does nothing.
        if self.replacements and self.replacements[-1][0] is dead:
            await self.replacements.pop()[1].close()
        await dead.store.close()
        for closing in (dead.session, dead.model_client):
            if closing is not None:
                await closing.close()
        dead.dispatcher = dead.check_sync = dead.registration = dead.session = dead.model_client = None
        dead.background.clear()
        # What it held when it died: a cancelled pass releases its duty's lease on the way out, which kill -9 never
        # lets it do; so the lease is held again in its name, as is the creation claim of every run not made yet.
        now = time.time()
        for duty in DUTIES if held else ():
            await self._sql(  # type: ignore[attr-defined]
                "INSERT INTO duty_leases (duty, owner, expires_at)"
                f" VALUES ('{duty}', '{owner}', {now + DUTY_LEASE_SECONDS})"
                " ON CONFLICT (duty) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at"
            )
        if held:
            await self._sql(  # type: ignore[attr-defined]
                f"UPDATE jobs SET check_run_claim = '{owner}', check_run_claim_until = {now + CREATION_CLAIM_SECONDS}"
                " WHERE check_run_id IS NULL"
            )
        svc = await build_service(dead.cfg)
        client = TestClient(TestServer(svc.app))
        await client.start_server()
        svc.start_background()
        self.replacements.append((svc, client))
        self.h.svc, self.h.client = svc, client

    async def _stop_replacements(self) -> None:
        """At the end of a sequence: the process started in place of a dead one stops (the harness stops the first)."""
        for svc, client in reversed(self.replacements):
            await svc.stop()
            await client.close()
        self.replacements.clear()

    # -- another installation is rate-limited for a while -------------------------------------------------------

    @rule(seconds=st.sampled_from(OTHER_LIMIT_SECONDS))
    def another_installation_is_rate_limited(self, seconds: float) -> None:
        """Another installation's pull request is opened and asked for help while GitHub limits that installation:
        its check run and reply wait until the reset; this repository's must not wait with them."""
        self.coverage.update(other_installation_limited=1)
        if self.other_installation is None:
            installation = self.gh.add_installation(account=OTHER_REPO.split("/")[0])
            self.gh.add_repo(OTHER_REPO, installation.id)
            self.gh.set_permission(OTHER_REPO, "maintainer", "write")
            self.other_installation = installation.id
        self.gh.inject("*", rf"^/repos/{OTHER_REPO}/", "primary_rate_limit", times=4, reset=int(time.time() + seconds))
        self.other_prs += 1
        n = OTHER_FIRST_PR + self.other_prs
        pull = self.gh.add_pull(OTHER_REPO, n, files=[SOURCE])
        where = {
            "repo": OTHER_REPO,
            "repo_id": self.gh.repos[OTHER_REPO].id,
            "installation_id": self.other_installation,
        }
        opened = pull_request_event(number=n, head=pull.head_sha, base_sha=pull.base_sha, **where)
        self.send("pull_request", opened)  # type: ignore[attr-defined]
        comment = self.gh.add_issue_comment(OTHER_REPO, n, "maintainer", "/review help")
        asked = issue_comment_event("/review help", comment_id=comment["id"], number=n, **where)
        self.send("issue_comment", asked)  # type: ignore[attr-defined]

    async def _check_the_other_installation(self) -> None:
        """Its limit long over: each of its pull requests has its check run completed and its one help reply, and none
        of its effects (replies, reactions) is left unsent."""

        async def settled() -> bool:
            if [e for e in await self.h.store.pending_effects() if e["repo_full_name"] == OTHER_REPO]:
                return False
            for n in range(OTHER_FIRST_PR + 1, OTHER_FIRST_PR + self.other_prs + 1):
                head = self.gh.pulls[(OTHER_REPO, n)].head_sha
                runs = self.gh.check_runs_for(OTHER_REPO, head)
                bot = [c for c in self.gh.issue_comments_for(OTHER_REPO, n) if c["user"]["type"] == "Bot"]
                if not runs or any(r["status"] != "completed" for r in runs) or len(bot) != 1:
                    return False
            return True

        try:
            await eventually(settled, timeout=max(OTHER_LIMIT_SECONDS) + 30)
        except AssertionError:
            raise AssertionError(await self._other_installation_state()) from None

    async def _other_installation_state(self) -> str:
        """What the other installation's pull requests show, for a failure's message."""
        lines = ["the other installation did not settle:"]
        for n in range(OTHER_FIRST_PR + 1, OTHER_FIRST_PR + self.other_prs + 1):
            head = self.gh.pulls[(OTHER_REPO, n)].head_sha
            runs = [(r["id"], r["status"], r["external_id"]) for r in self.gh.check_runs_for(OTHER_REPO, head)]
            bot = [c["body"][:60] for c in self.gh.issue_comments_for(OTHER_REPO, n) if c["user"]["type"] == "Bot"]
            lines.append(f"  #{n}: runs {runs}; bot comments {bot}")
        for job in await self.h.store.list_jobs(limit=10000):
            if job.repo_full_name == OTHER_REPO:
                lines.append(
                    f"  job {job.id} #{job.pr_number} {job.state.value} check {job.check_run_id} "
                    f"{job.check_run_status} {job.last_error}"
                )
        effects = [e for e in await self.h.store.pending_effects() if e["repo_full_name"] == OTHER_REPO]
        return "\n".join([*lines, f"  effects {effects}"])
