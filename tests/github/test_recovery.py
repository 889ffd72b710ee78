"""No missed reviews: failed webhooks are redelivered once, and a sweep admits open PR heads no webhook brought."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from reviewer_app.core.admission import JobSpec
from reviewer_app.core.markers import make_marker, reviewed_by_bot
from reviewer_app.core.states import JobState
from reviewer_app.github.recovery import (
    DAY,
    Recovery,
    attempt_failed,
    failed_deliveries,
    sweep_delivery_id,
)
from reviewer_app.settings.config import ConfigError, load_config
from reviewer_app.store.base import Delivery, Enqueue, Ignore
from tests.harness import REPO, SOURCE, Harness, harness
from tests.helpers import SECRET, eventually, sha
from tests.payloads import issue_comment_event
from tests.serve_process import free_port

NOW = 1_800_000_000.0
BOT = "reviewer-app[bot]"


def recovery(h: Harness, *, owner: str = "host-a", window_days: float = 3.0) -> Recovery:
    """A Recovery wired like the service's (the harness keeps the service's own duty switched off)."""
    assert h.svc.github is not None and h.svc.dispatcher is not None
    dispatcher = h.svc.dispatcher
    return Recovery(
        h.svc.github,
        h.store,
        owner=owner,
        clock=time.time,
        recovery_interval=0,
        sweep_interval=0,
        window_days=window_days,
        max_attempts=5,
        on_admitted=lambda _r: dispatcher.wake(),
    )


async def all_reviewed(h: Harness, numbers: list[int]) -> None:
    """Wait until every job is terminal and each listed PR has at least one review."""

    async def done() -> bool:
        jobs = await h.store.list_jobs()
        return all(j.state not in (JobState.QUEUED, JobState.RUNNING) for j in jobs) and all(
            h.reviews(n) for n in numbers
        )

    await eventually(done, timeout=20)


def bot_reviews(h: Harness, number: int) -> list[dict[str, Any]]:
    return [r for r in h.reviews(number) if r["user"]["login"] == BOT]


# ------------------------------------------------------------------------------------------- pure parts


def attempt(guid: str, status_code: int, *, id: int, status: str | None = None) -> dict[str, Any]:
    ok = 200 <= status_code < 300
    return {"id": id, "guid": guid, "status_code": status_code, "status": status or ("OK" if ok else "Failed")}


@pytest.mark.parametrize(
    "code,status,failed",
    [
        (200, "OK", False),
        (202, "OK", False),
        (500, "Failed", True),
        (503, "Invalid HTTP Response: 503", True),
        (0, "Timed out", True),
        (200, "failed", True),
        (None, "timed out", True),
        (404, "Not Found", True),
    ],
)
def test_which_attempts_failed(code: int | None, status: str, failed: bool) -> None:
    assert attempt_failed({"status_code": code, "status": status}) is failed


def test_failed_deliveries_are_grouped_by_guid_and_settled_by_any_success() -> None:
    attempts = [
        attempt("a", 500, id=1),
        attempt("a", 0, id=5, status="Timed out"),  # failed twice: newest attempt kept
        attempt("b", 502, id=2),
        attempt("b", 200, id=6),  # a redelivery succeeded
        attempt("c", 200, id=3),
        attempt("d", 503, id=4),
        {"id": 7, "status_code": 500},  # no guid: nothing to key on
    ]
    failed = failed_deliveries(attempts)
    assert sorted(failed) == ["a", "d"] and failed["a"]["id"] == 5


def test_only_the_bots_own_review_of_the_head_counts() -> None:
    head, other = sha("head"), sha("other")
    marker = make_marker(7, head)
    assert reviewed_by_bot([{"user": {"login": BOT}, "body": marker, "commit_id": other}], bot_login=BOT, head_sha=head)
    assert reviewed_by_bot(
        [{"user": {"login": "Reviewer-App[bot]"}, "body": "", "commit_id": head}], bot_login=BOT, head_sha=head
    )
    assert not reviewed_by_bot(
        [{"user": {"login": "mallory"}, "body": marker, "commit_id": head}], bot_login=BOT, head_sha=head
    )
    assert not reviewed_by_bot(
        [{"user": {"login": BOT}, "body": make_marker(7, other), "commit_id": other}], bot_login=BOT, head_sha=head
    )


# ------------------------------------------------------------------------------------- the store's part


async def test_a_guid_is_claimed_once_and_never_when_it_was_admitted(store) -> None:
    spec = JobSpec(repo_id=1, repo_full_name="o/r", installation_id=7, pr_number=1, head_sha=sha(1))
    await store.admit(Delivery("admitted", "pull_request", "opened"), Enqueue(spec), now=NOW, max_attempts=3)
    assert await store.deliveries_to_recover(["admitted", "lost", "other"]) == {"lost", "other"}
    assert not await store.claim_redelivery("admitted", 1, owner="a", now=NOW, stale_before=NOW - 300)
    assert await store.claim_redelivery("lost", 2, owner="a", now=NOW, stale_before=NOW - 300)
    assert not await store.claim_redelivery("lost", 2, owner="b", now=NOW + 1, stale_before=NOW + 1 - 300)
    await store.mark_redelivery_requested("lost", owner="a", now=NOW + 2, error=None)
    assert await store.deliveries_to_recover(["lost", "other"]) == {"other"}
    # Asked for: never claimable again, however old the claim.
    assert not await store.claim_redelivery("lost", 2, owner="b", now=NOW + 9999, stale_before=NOW + 9000)
    assert await store.deliveries_to_recover([]) == set()


async def test_a_released_or_abandoned_claim_can_be_taken_again(store) -> None:
    assert await store.claim_redelivery("g1", 1, owner="a", now=NOW, stale_before=NOW - 300)
    await store.release_redelivery("g1", owner="a", error="GitHub answered 502")
    assert await store.claim_redelivery("g1", 1, owner="b", now=NOW + 1, stale_before=NOW + 1 - 300)
    # b dies between claiming and asking: after the stale time, a may take it over.
    assert not await store.claim_redelivery("g1", 1, owner="a", now=NOW + 2, stale_before=NOW + 2 - 300)
    assert await store.claim_redelivery("g1", 1, owner="a", now=NOW + 400, stale_before=NOW + 100)
    await store.mark_redelivery_requested("g1", owner="b", now=NOW + 401, error=None)  # b lost it: no effect
    assert await store.deliveries_to_recover(["g1"]) == {"g1"}
    assert await store.forget_redeliveries(NOW + 500) == 1


async def test_a_duty_lease_has_one_holder_until_it_expires_or_is_released(store) -> None:
    assert await store.take_duty_lease("duty:sweep", owner="a", now=NOW, seconds=60)
    assert not await store.take_duty_lease("duty:sweep", owner="b", now=NOW + 1, seconds=60)
    assert await store.take_duty_lease("duty:recovery", owner="b", now=NOW + 1, seconds=60)  # another duty
    assert await store.take_duty_lease("duty:sweep", owner="a", now=NOW + 2, seconds=60)  # its holder renews
    assert await store.take_duty_lease("duty:sweep", owner="b", now=NOW + 62, seconds=60)  # expired
    await store.release_duty_lease("duty:sweep", owner="a", now=NOW + 63)  # not a's any more: no effect
    assert not await store.take_duty_lease("duty:sweep", owner="a", now=NOW + 63, seconds=60)
    await store.release_duty_lease("duty:sweep", owner="b", now=NOW + 64)
    assert await store.take_duty_lease("duty:sweep", owner="a", now=NOW + 64, seconds=60)


# ----------------------------------------------------------------------------------- (a) redelivery


async def test_failed_deliveries_are_redelivered_once_and_never_one_the_app_admitted(tmp_path) -> None:
    async with harness(tmp_path) as h:
        gh = h.github
        # GitHub redelivers to an app that is still down: every redelivery fails again.
        gh.webhook_url, gh.webhook_secret = f"http://127.0.0.1:{free_port()}/api/github/webhooks", SECRET
        pull = gh.add_pull(REPO, 1, files=[SOURCE])
        payload = h.pr_payload(pull)
        admitted = str(uuid.uuid4())
        await h.deliver("pull_request", payload, delivery=admitted)  # committed, but GitHub saw a timeout
        gh.add_delivery("pull_request", "opened", status_code=0, guid=admitted, payload=payload)
        lost_1 = gh.add_delivery("pull_request", "opened", status_code=502, payload=payload)
        comment = issue_comment_event(
            "/review", repo=REPO, repo_id=gh.repos[REPO].id, installation_id=h.installation_id
        )
        lost_2 = gh.add_delivery("issue_comment", "created", status_code=0, payload=comment)
        settled = gh.add_delivery("pull_request", "synchronize", status_code=500, payload=payload)
        gh.add_delivery("pull_request", "synchronize", status_code=202, guid=settled["guid"], redelivery=True)
        gh.add_delivery("ping", status_code=200)
        gh.add_delivery("pull_request", "opened", status_code=500, delivered_at=time.time() - 4 * DAY)  # too old

        r = recovery(h)
        assert await r.redeliver_failed_once() == 2
        assert sorted(gh.redelivery_requests) == sorted([lost_1["id"], lost_2["id"]])
        await eventually(lambda: _redelivered_attempts(h, 2))  # GitHub tried, and failed again
        assert await r.redeliver_failed_once() == 0
        assert await recovery(h, owner="host-b").redeliver_failed_once() == 0  # another host: nothing either
        assert len(gh.redelivery_requests) == 2


async def _redelivered_attempts(h: Harness, n: int) -> bool:
    return len([d for d in h.github.deliveries if d["redelivery"] and d["status_code"] == 0]) >= n


async def test_a_redelivered_pull_request_is_admitted_and_reviewed_once(tmp_path) -> None:
    async with harness(tmp_path) as h:
        gh = h.github
        gh.webhook_url, gh.webhook_secret = str(h.client.make_url("/api/github/webhooks")), SECRET
        pull = gh.add_pull(REPO, 1, files=[SOURCE])
        lost = gh.add_delivery("pull_request", "opened", status_code=503, payload=h.pr_payload(pull))
        assert await recovery(h).redeliver_failed_once() == 1
        await all_reviewed(h, [1])
        assert len(bot_reviews(h, 1)) == 1
        [job] = await h.store.list_jobs()
        assert job.state == JobState.SUCCEEDED
        assert [d["status_code"] for d in gh.deliveries if d["guid"] == lost["guid"]] == [503, 202]
        assert await recovery(h).redeliver_failed_once() == 0


async def test_the_walk_follows_cursor_pages_back_to_the_window_and_no_further(tmp_path) -> None:
    async with harness(tmp_path) as h:
        gh = h.github
        for _ in range(150):  # older than GitHub keeps them (here: than the window); pages 4 and 5 are not read
            gh.add_delivery("pull_request", "opened", status_code=500, delivered_at=time.time() - 3.5 * DAY)
        lost = gh.add_delivery("pull_request", "opened", status_code=500, delivered_at=time.time() - 2 * DAY)
        for _ in range(250):
            gh.add_delivery("pull_request", "synchronize", status_code=202)
        assert await recovery(h).redeliver_failed_once() == 1
        assert gh.redelivery_requests == [lost["id"]]
        pages = gh.requests_matching("GET", r"^/app/hook/deliveries$")
        assert len(pages) == 3 and all(p.auth == "jwt" for p in pages)


async def test_a_failed_request_for_a_redelivery_is_asked_again_next_pass(tmp_path) -> None:
    async with harness(tmp_path) as h:
        lost = h.github.add_delivery("pull_request", "opened", status_code=500)
        h.github.inject("POST", r"/app/hook/deliveries/\d+/attempts", "error", times=1, status=502)
        r = recovery(h)
        assert await r.redeliver_failed_once() == 0
        assert h.github.redelivery_requests == []
        assert await r.redeliver_failed_once() == 1
        assert h.github.redelivery_requests == [lost["id"]]


async def test_the_duty_runs_at_start_and_skips_a_pass_another_host_is_running(tmp_path) -> None:
    async with harness(tmp_path) as h:
        lost = h.github.add_delivery("pull_request", "opened", status_code=500)
        assert await h.store.take_duty_lease("duty:recovery", owner="host-b", now=time.time(), seconds=60)
        assert await recovery(h).duty("recovery").run_pass() is None
        await h.store.release_duty_lease("duty:recovery", owner="host-b", now=time.time())

        r = recovery(h)
        r.recovery_interval = 3600
        task = asyncio.create_task(r.run())
        try:
            await eventually(lambda: _async(h.github.redelivery_requests == [lost["id"]]))
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _async(value: Any) -> Any:
    return value


# ----------------------------------------------------------------------------------------- (b) sweep


async def test_the_sweep_reviews_only_heads_nobody_reviewed(tmp_path) -> None:
    async with harness(tmp_path) as h:
        gh = h.github
        gh.add_pull(REPO, 1, files=[SOURCE])  # never delivered
        _, delivered = await h.open_pr(2)  # delivered and reviewed the usual way
        await h.wait_state(delivered, JobState.SUCCEEDED)
        three = gh.add_pull(REPO, 3, files=[SOURCE])  # reviewed by the bot, but the database forgot the job
        gh.add_review_by(REPO, 3, BOT, "Earlier review.\n" + make_marker(99, three.head_sha))
        four = gh.add_pull(REPO, 4, files=[SOURCE])  # someone pasted a marker: not our review
        gh.add_review_by(REPO, 4, "mallory", make_marker(99, four.head_sha))
        gh.add_pull(REPO, 5, files=[SOURCE], draft=True)  # queued as a draft job, skipped (no `drafts: true`)

        r = recovery(h)
        assert await r.sweep_once() == 3
        await all_reviewed(h, [1, 4])
        jobs = {j.pr_number: j for j in await h.store.list_jobs()}
        draft = await h.wait_state(jobs[5].id, JobState.CANCELLED)
        assert draft.trigger == "draft" and "draft pull request" in draft.outcome
        assert [len(bot_reviews(h, n)) for n in (1, 2, 3, 4, 5)] == [1, 1, 1, 1, 0]
        assert sorted(jobs) == [1, 2, 4, 5] and jobs[1].details.action == "sweep"
        assert await r.sweep_once() == 0


async def test_a_draft_marked_ready_while_its_webhook_went_missing_is_swept(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull, draft_job = await h.open_pr(draft=True)
        assert (await h.wait_state(draft_job, JobState.CANCELLED)).trigger == "draft"
        pull.draft = False  # marked ready; the ready_for_review webhook never arrived
        r = recovery(h)
        assert await r.sweep_once() == 1
        await all_reviewed(h, [1])
        assert await r.sweep_once() == 0
        assert len(bot_reviews(h, 1)) == 1 and len(h.anthropic.message_requests) == 1


async def test_after_an_outage_every_open_head_is_reviewed_exactly_once(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pulls = [h.github.add_pull(REPO, n, files=[SOURCE]) for n in range(1, 6)]
        other = h.github.add_installation(account="other-org")
        h.github.add_repo("other-org/gadgets", other.id)
        h.github.add_pull("other-org/gadgets", 1, files=[SOURCE])
        # Two hosts sweep at the same moment, then again: the database keeps it to one job per head.
        first = await asyncio.gather(recovery(h).sweep_once(), recovery(h, owner="host-b").sweep_once())
        assert sum(first) == 6
        await all_reviewed(h, [p.number for p in pulls])
        assert await recovery(h).sweep_once() == 0
        assert [len(bot_reviews(h, p.number)) for p in pulls] == [1] * 5
        assert len([r for r in h.github.reviews_for("other-org/gadgets", 1) if r["user"]["login"] == BOT]) == 1
        assert len(h.anthropic.message_requests) == 6

        # A push nobody told us about: the sweep reviews the new head, once.
        new_head = h.github.advance_head(REPO, 1)
        assert await recovery(h).sweep_once() == 1
        assert await recovery(h).sweep_once() == 0
        await eventually(lambda: _async(len(bot_reviews(h, 1)) == 2), timeout=20)
        assert bot_reviews(h, 1)[-1]["commit_id"] == new_head


async def test_the_sweep_admits_through_the_webhook_path(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        assert await recovery(h).sweep_once() == 1
        repo_id = h.github.repos[REPO].id
        # The same head delivered later by a webhook is a duplicate revision; the sweep's delivery id is recorded.
        answer = await h.deliver("pull_request", h.pr_payload(pull))
        assert answer["outcome"] == "duplicate-revision"
        again = await h.store.admit(
            Delivery(sweep_delivery_id(repo_id, 1, pull.head_sha), "pull_request", "sweep"),
            Ignore("probe"),
            now=time.time(),
            max_attempts=5,
        )
        assert again.outcome == "duplicate-delivery"


async def test_the_sweep_skips_paused_prs_suspended_installations_and_prs_older_than_the_install(tmp_path) -> None:
    async with harness(tmp_path) as h:
        gh = h.github
        paused = gh.add_pull(REPO, 1, files=[SOURCE])
        assert (
            await h.deliver(
                "issue_comment", h.comment_payload(paused, "/review pause", login="octo-org", association="OWNER")
            )
        )["outcome"] == "paused"
        other = gh.add_installation(account="suspended-org")
        gh.add_repo("suspended-org/x", other.id)
        gh.add_pull("suspended-org/x", 1, files=[SOURCE])
        gh.suspend_installation(other.id)
        late = gh.add_installation(account="late-org")
        gh.add_repo("late-org/y", late.id)
        gh.add_pull("late-org/y", 1, files=[SOURCE])
        late.created_at = time.time() + 60  # installed after the PR was last touched: no webhook was missed
        assert await recovery(h).sweep_once() == 0
        # The paused PR's head is recorded as skipped (its check run says why), once; nothing else is admitted.
        [skipped] = await h.store.list_jobs()
        assert skipped.pr_number == 1 and skipped.outcome.startswith("skipped: automatic reviews are paused")
        assert await recovery(h).sweep_once() == 0 and len(await h.store.list_jobs()) == 1


# ---------------------------------------------------------------------------------------------- wiring


def test_settings_have_their_defaults_and_zero_disables() -> None:
    cfg = load_config({"GITHUB_WEBHOOK_SECRET": "s"})
    assert (cfg.recovery_seconds, cfg.sweep_seconds, cfg.delivery_window_days) == (600.0, 3600.0, 3.0)
    off = load_config(
        {
            "GITHUB_WEBHOOK_SECRET": "s",
            "REVIEWER_RECOVERY_SECONDS": "0",
            "REVIEWER_SWEEP_SECONDS": "0",
            "REVIEWER_DELIVERY_WINDOW_DAYS": "7",
        }
    )
    assert (off.recovery_seconds, off.sweep_seconds, off.delivery_window_days) == (0.0, 0.0, 7.0)
    with pytest.raises(ConfigError, match="REVIEWER_DELIVERY_WINDOW_DAYS=7 is longer than REVIEWER_RETENTION_DAYS=5"):
        load_config(
            {"GITHUB_WEBHOOK_SECRET": "s", "REVIEWER_DELIVERY_WINDOW_DAYS": "7", "REVIEWER_RETENTION_DAYS": "5"}
        )


async def test_the_service_starts_the_duty_when_enabled(tmp_path) -> None:
    async with harness(tmp_path) as h:
        assert h.svc.recovery is None  # the harness turns it off
    async with harness(tmp_path, REVIEWER_SWEEP_SECONDS="3600") as h:
        assert h.svc.recovery is not None and h.svc.recovery.sweep_interval == 3600
        # The duties start once the first heartbeat has ended what this host's dead processes held.
        await eventually(lambda: asyncio.sleep(0, any(t.get_name() == "recovery" for t in h.svc.background)))
