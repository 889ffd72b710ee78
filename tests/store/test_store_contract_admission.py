"""The store contract, continued: pauses, replies, installations, budget guard, outbox, retention, check-run sync."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from reviewer_app.core.admission import (
    Effect,
    Enqueue,
    Guard,
    InstallationChange,
    Reply,
    ReposRemoved,
    SetPause,
    pause_key,
)
from reviewer_app.core.job_records import JobDetails
from reviewer_app.core.states import JobState
from reviewer_app.store.base import Delivery, Usage
from tests.helpers import sha
from tests.store.test_store_contract import NOW, spec

_n = 0


def delivery() -> Delivery:
    global _n
    _n += 1
    return Delivery(f"c-{_n}", "issue_comment", "created")


def react(content: str = "+1", target: int = 99) -> Effect:
    return Effect("reaction", 7, "o/r", target, content)


async def admit(store, decision, now: float = NOW):
    return await store.admit(delivery(), decision, now=now, max_attempts=3)


def manual(pr: int = 1, n: int = 1, head: str = "") -> Enqueue:
    s = replace(spec(pr=pr), trigger=f"manual:{n}", priority=0, head_sha=head)
    return Enqueue(s, supersede_older_heads=False, automatic=False, effects=(react(target=n),))


async def test_a_paused_pr_skips_automatic_reviews_visibly_but_takes_requested_ones(store) -> None:
    r = await admit(store, SetPause(1, 1, True, (react(),)))
    assert r.outcome == "paused"
    skipped = await admit(store, Enqueue(spec(pr=1)))
    assert skipped.outcome == "skipped"  # recorded, so its check run can say why no review came
    job = await store.get_job(skipped.job_id)
    assert job.state == JobState.CANCELLED and job.outcome.startswith("skipped: automatic reviews are paused")
    assert (await admit(store, Enqueue(spec(pr=2)))).outcome == "enqueued"
    assert (await admit(store, manual(pr=1))).outcome == "enqueued"
    assert (await admit(store, SetPause(1, 1, False))).outcome == "resumed"
    assert (await admit(store, Enqueue(spec(pr=1, head=5)))).outcome == "enqueued"


async def test_a_pause_or_resume_applies_once_per_comment_whatever_its_delivery(store) -> None:
    pause = SetPause(1, 1, True, (react(target=5),), command_key="command:5")
    assert (await admit(store, pause)).outcome == "paused"
    assert (await admit(store, SetPause(1, 1, False, command_key="command:6"))).outcome == "resumed"
    again = await admit(store, pause)  # the same comment, under a new delivery id
    assert again.outcome == "duplicate-command" and await store.get_setting(pause_key(1, 1)) == "0"
    # A pause awaiting its permission check: sent twice at once, one effect is queued.
    verify = Reply(
        "pause awaits the permission check", (Effect("pause", 7, "o/r", 8, "1:1:bob"),), command_key="command:8"
    )
    first, second = await asyncio.gather(admit(store, verify), admit(store, verify))
    assert sorted([first.outcome, second.outcome]) == ["duplicate-command", "replied"]
    assert [e["target"] for e in await store.pending_effects() if e["kind"] == "pause"] == [8]


async def test_a_heads_pull_request_is_that_of_its_latest_job(store) -> None:
    # How a fork's check suite Re-run (GitHub lists no pull request on it) finds its pull request.
    assert await store.pull_of_head(1, sha(1)) is None
    await admit(store, Enqueue(spec(pr=3, head=1)))
    await admit(store, Enqueue(spec(pr=4, head=2)))
    assert (await store.pull_of_head(1, sha(1)), await store.pull_of_head(1, sha(2))) == (3, 4)
    assert await store.pull_of_head(2, sha(1)) is None  # another repository


async def test_effects_wait_in_the_outbox_until_marked_sent(store) -> None:
    r = await admit(store, Reply("help requested", (Effect("comment", 7, "o/r", 1, "help text"),)))
    assert r.outcome == "replied" and r.job_id is None
    await admit(store, manual(n=42))
    pending = await store.pending_effects()
    assert [(e["kind"], e["target"], e["content"], e["attempts"]) for e in pending] == [
        ("comment", 1, "help text", 0),
        ("reaction", 42, "+1", 0),
    ]
    await store.mark_effect(pending[0]["id"], now=NOW, error="502 from GitHub", done=False)
    await store.mark_effect(pending[1]["id"], now=NOW, error=None, done=True)
    [left] = await store.pending_effects()
    assert (left["id"], left["attempts"]) == (pending[0]["id"], 1)


def help_reply(pr: int = 1, repo: str = "o/r") -> Reply:
    return Reply("help command answered with help", (Effect("comment", 7, repo, pr, "help text"),), quiet_seconds=600)


async def test_a_help_answer_goes_to_a_pull_request_once_in_its_quiet_window(store) -> None:
    first, second = await asyncio.gather(admit(store, help_reply()), admit(store, help_reply()))  # asked at once
    assert sorted([first.outcome, second.outcome]) == ["ignored", "replied"]
    quiet = first if first.outcome == "ignored" else second
    assert "already answered on this pull request in the last 10 minutes" in quiet.reason
    assert (await admit(store, help_reply(), now=NOW + 599)).outcome == "ignored"
    assert (await admit(store, help_reply(pr=2), now=NOW + 1)).outcome == "replied"  # another PR
    assert (await admit(store, help_reply(repo="o/other"), now=NOW + 1)).outcome == "replied"
    assert (await admit(store, help_reply(), now=NOW + 601)).outcome == "replied"  # the window has passed
    comments = [(e["repo_full_name"], e["target"]) for e in await store.pending_effects() if e["kind"] == "comment"]
    assert comments == [("o/r", 1), ("o/r", 2), ("o/other", 1), ("o/r", 1)]
    # Refusals (reactions) are not quietened: each comment gets its own.
    for n in (1, 2):
        assert (await admit(store, Reply("not allowed", (react("-1", target=n),)))).outcome == "replied"


async def test_an_uninstalled_installation_cancels_its_work_and_admits_no_more(store) -> None:
    queued = await admit(store, Enqueue(spec(pr=1)))
    other = await admit(store, Enqueue(replace(spec(pr=2), installation_id=8)))
    gone = await admit(store, InstallationChange(7, "o", False, "installation deleted"))
    assert (gone.outcome, gone.cancelled, gone.installation_gone) == ("installation", (queued.job_id,), 7)
    assert (await store.get_job(queued.job_id)).state == JobState.CANCELLED
    assert (await store.get_job(other.job_id)).state == JobState.QUEUED
    assert not await store.installation_active(7) and await store.installation_active(8)
    late = await admit(store, Enqueue(spec(pr=3)))
    assert late.outcome == "ignored" and "installation deleted" in late.reason
    assert all(j.installation_id != 7 for j in await store.jobs_needing_check_sync())
    back = await admit(store, InstallationChange(7, "o", True, "installation unsuspend"))
    assert back.installation_gone is None and await store.installation_active(7)
    assert (await admit(store, Enqueue(spec(pr=3)))).outcome == "enqueued"


async def test_removed_repositories_cancel_only_their_pending_jobs(store) -> None:
    mine = await admit(store, Enqueue(spec(pr=1)))
    kept = await admit(store, Enqueue(replace(spec(pr=2), repo_id=2, repo_full_name="o/kept")))
    r = await admit(store, ReposRemoved(7, (1,), "repository removed from the installation"))
    assert (r.outcome, r.cancelled) == ("cancelled", (mine.job_id,))
    assert (await store.get_job(kept.job_id)).state == JobState.QUEUED


async def test_the_budget_guard_refuses_past_its_limits_and_says_so(store) -> None:
    hourly = Guard(manual_per_pr_hour=1, refusal_effects=(react("-1"),))
    first = await admit(store, replace(manual(n=1), guard=hourly))
    second = await admit(store, replace(manual(n=2), guard=hourly))
    assert first.outcome == "enqueued"
    assert second.outcome == "refused" and "per pull request per hour" in second.reason
    refused = await store.get_job(second.job_id)
    assert refused.state == JobState.CANCELLED and refused.outcome.startswith("refused: ")
    assert refused.finished_at == NOW
    assert [e["content"] for e in await store.pending_effects()] == ["+1", "-1"]
    assert (await admit(store, replace(manual(n=3), guard=hourly), now=NOW + 3601)).outcome == "enqueued"

    daily = Guard(reviews_per_day=2)
    assert (await admit(store, Enqueue(spec(pr=5), guard=daily))).outcome == "refused"
    assert (await admit(store, Enqueue(spec(pr=5, head=2), guard=daily), now=NOW + 86401)).outcome == "enqueued"


async def test_the_last_reviewed_head_is_the_latest_published_review(store) -> None:
    assert await store.last_reviewed_head(1, 1) is None
    for head in (1, 2):
        await admit(store, Enqueue(spec(head=head)))
        [lease] = await store.claim(owner="w", limit=1, now=NOW + head, lease_seconds=30)
        assert await store.save_progress_if_lease_held(lease, now=NOW + head, review_id=100 + head)
        assert await store.complete_if_lease_held(lease, now=NOW + head, outcome="review published")
    await admit(store, Enqueue(spec(head=3)))
    assert await store.last_reviewed_head(1, 1) == sha(2)


async def test_a_manual_job_learns_its_head_under_the_lease(store) -> None:
    r = await admit(store, manual())
    [lease] = await store.claim(owner="w", limit=1, now=NOW, lease_seconds=30)
    assert await store.save_progress_if_lease_held(lease, now=NOW, head_sha=sha(9), details=JobDetails(full=True))
    job = await store.get_job(r.job_id)
    assert (job.head_sha, job.details) == (sha(9), JobDetails(full=True))


async def test_check_run_sync_sees_each_phase_once(store) -> None:
    r = await admit(store, Enqueue(spec()))
    [job] = await store.jobs_needing_check_sync()
    assert job.id == r.job_id
    assert await store.set_check_run_if_unchanged(
        r.job_id, state=JobState.QUEUED, attempts=0, check_run_id=555, key="queued:0"
    )
    assert await store.jobs_needing_check_sync() == []
    [lease] = await store.claim(owner="w", limit=1, now=NOW, lease_seconds=30)
    # A running job's check run is its worker's to update: the sync leaves it alone.
    assert await store.jobs_needing_check_sync() == []
    assert await store.save_progress_if_lease_held(lease, now=NOW, check_run_status="in_progress:1")
    assert (await store.get_job(r.job_id)).check_run_id == 555
    assert await store.retry_if_lease_held(lease, now=NOW, at=NOW + 5, error="boom", counts_attempt=True)
    [job] = await store.jobs_needing_check_sync()  # back in the queue: the sync shows the retry
    assert (job.check_run_id, job.check_run_status) == (555, "in_progress:1")


async def test_a_check_run_record_made_from_a_stale_read_changes_nothing(store) -> None:
    r = await admit(store, Enqueue(spec()))
    assert await store.cancel_job(r.job_id, now=NOW, reason="closed")
    seen = await store.get_job(r.job_id)  # a sync pass reads it: cancelled, never shown, nothing to close
    # Meanwhile an operator retries the job and its worker opens the check run.
    assert await store.retry_job(r.job_id, now=NOW + 1)
    [lease] = await store.claim(owner="w", limit=1, now=NOW + 1, lease_seconds=30)
    assert await store.save_progress_if_lease_held(
        lease, now=NOW + 1, check_run_id=555, check_run_status="in_progress:1"
    )
    # The stale pass would record "completed" for a run GitHub shows in progress: no pass would ever close it.
    assert not await store.set_check_run_if_unchanged(
        r.job_id, state=seen.state, attempts=seen.attempts, check_run_id=None, key="completed"
    )
    job = await store.get_job(r.job_id)
    assert (job.check_run_id, job.check_run_status) == (555, "in_progress:1")
    # Nor is another run than the job's one recorded, even for the job's current phase.
    assert not await store.set_check_run_if_unchanged(
        r.job_id, state=JobState.RUNNING, attempts=1, check_run_id=556, key="in_progress:1"
    )
    # A record made from a read that is still current is kept.
    assert await store.complete_if_lease_held(lease, now=NOW + 2, outcome="reviewed")
    assert await store.set_check_run_if_unchanged(
        r.job_id, state=JobState.SUCCEEDED, attempts=1, check_run_id=555, key="completed"
    )
    job = await store.get_job(r.job_id)
    assert (job.check_run_id, job.check_run_status) == (555, "completed")
    assert await store.jobs_needing_check_sync() == []


async def test_a_forgotten_check_run_status_is_synced_again_and_the_run_kept(store) -> None:
    r = await admit(store, Enqueue(spec()))
    # A creator whose record was refused still records the run it created, and the job needs a sync again.
    await store.forget_check_run_status(r.job_id, check_run_id=555)
    [job] = await store.jobs_needing_check_sync()
    assert (job.id, job.check_run_id, job.check_run_status) == (r.job_id, 555, None)
    assert await store.set_check_run_if_unchanged(
        r.job_id, state=JobState.QUEUED, attempts=0, check_run_id=555, key="queued:0"
    )
    assert await store.jobs_needing_check_sync() == []
    await store.forget_check_run_status(r.job_id, check_run_id=556)  # a job keeps its one run
    [job] = await store.jobs_needing_check_sync()
    assert (job.check_run_id, job.check_run_status) == (555, None)


async def test_stats_count_states_backlog_and_expired_leases(store) -> None:
    a = await admit(store, Enqueue(spec(pr=1)), now=NOW)
    await admit(store, Enqueue(spec(pr=2)), now=NOW + 5)
    [lease] = await store.claim(owner="w", limit=1, now=NOW + 5, lease_seconds=10)
    assert lease.job_id == a.job_id
    assert await store.save_progress_if_lease_held(lease, now=NOW + 6, publish_intent_at=NOW + 6)
    stats = await store.stats(now=NOW + 20)
    assert stats.by_state == {"queued": 1, "running": 1}
    assert (stats.oldest_pending_created_at, stats.expired_leases, stats.awaiting_reconciliation) == (NOW, 1, 1)


async def test_prune_removes_old_finished_jobs_and_deliveries_only(store) -> None:
    old = await admit(store, Enqueue(spec(pr=1)), now=NOW)
    [lease] = await store.claim(owner="w", limit=1, now=NOW, lease_seconds=30)
    assert await store.complete_if_lease_held(lease, now=NOW, outcome="done")
    pending = await admit(store, Enqueue(spec(pr=2)), now=NOW)
    recent = await admit(store, Enqueue(spec(pr=3)), now=NOW + 100)
    removed = await store.prune(NOW + 50, 100)
    assert removed == 1 + 2  # one job, two deliveries
    assert await store.get_job(old.job_id) is None and await store.attempts_of(old.job_id) == []
    assert await store.get_job(pending.job_id) is not None and await store.get_job(recent.job_id) is not None
    assert await store.prune(NOW + 50, 100) == 0


async def test_prune_removes_old_effects_the_outbox_finished_with_only(store) -> None:
    await admit(
        store,
        Reply(
            "help",
            (
                Effect("comment", 7, "o/r", 1, "sent long ago"),
                Effect("comment", 7, "o/r", 2, "still failing"),
                Effect("comment", 7, "o/r", 3, "sent recently"),
            ),
        ),
        now=NOW,
    )
    sent_old, failing, sent_recently = await store.pending_effects()
    await store.mark_effect(sent_old["id"], now=NOW + 10, error=None, done=True)
    await store.mark_effect(failing["id"], now=NOW + 10, error="502 from GitHub", done=False)
    await store.mark_effect(sent_recently["id"], now=NOW + 100, error=None, done=True)
    assert await store.prune(NOW + 50, 100) == 1 + 1  # the delivery and the effect sent before the cut-off
    assert [e["content"] for e in await store.pending_effects()] == ["still failing"]  # unsent work is kept
    assert await store.prune(NOW + 200, 100) == 1  # the recent one, once it is old too
    assert [e["content"] for e in await store.pending_effects()] == ["still failing"]


async def test_usage_adds_up_per_repository_and_model_in_plain_integers(store) -> None:
    for pr in (1, 2):
        await admit(store, Enqueue(spec(pr=pr)))
    for lease in await store.claim(owner="w", limit=2, now=NOW, lease_seconds=30):
        assert await store.record_usage_if_lease_held(lease, Usage("claude-x", 100, 20, 5, 7))
        assert await store.complete_if_lease_held(lease, now=NOW, outcome="done")
    [row] = await store.usage_by_repo(since=NOW - 1)
    assert row == {
        "repo": "o/r",
        "kind": "reviews",  # answers in threads are counted apart (tests/review/test_replies.py)
        "model": "claude-x",
        "batched": False,
        "jobs": 2,
        "input_tokens": 200,
        "output_tokens": 40,
        "cache_creation_tokens": 10,
        "cache_read_tokens": 14,
    }
    assert all(type(v) is int for k, v in row.items() if k not in ("repo", "kind", "model", "batched"))
    assert await store.usage_by_repo(since=NOW + 1) == []


async def test_one_creator_of_a_check_run_at_a_time(store) -> None:
    r = await admit(store, Enqueue(spec()))
    claim = store.claim_check_run_creation
    assert await claim(r.job_id, owner="host-a", now=NOW, seconds=60)
    assert not await claim(r.job_id, owner="host-b", now=NOW + 1, seconds=60)  # host-a is creating it
    assert await claim(r.job_id, owner="host-a", now=NOW + 2, seconds=60)  # its own retry may go on
    assert await claim(r.job_id, owner="host-b", now=NOW + 63, seconds=60)  # host-a went quiet: taken over
    assert await store.set_check_run_if_unchanged(
        r.job_id, state=JobState.QUEUED, attempts=0, check_run_id=777, key="queued:0"
    )
    assert not await claim(r.job_id, owner="host-b", now=NOW + 64, seconds=60)  # it exists: nobody creates
    assert not await claim(r.job_id, owner="host-c", now=NOW + 999, seconds=60)


async def test_a_ready_for_review_job_supersedes_the_waiting_draft_job_of_the_same_head(store) -> None:
    draft = await admit(store, Enqueue(replace(spec(head=1), trigger="draft")))
    other_pr = await admit(store, Enqueue(replace(spec(pr=2, head=1), trigger="draft")))
    ready = await admit(store, Enqueue(spec(head=1), guard=None))
    assert ready.outcome == "enqueued" and ready.superseded == (draft.job_id,)
    assert (await store.get_job(draft.job_id)).superseded_by == ready.job_id
    assert (await store.get_job(other_pr.job_id)).state == JobState.QUEUED
    # A draft job of a new head still supersedes only what is older, not the ready job.
    newer = await admit(store, Enqueue(replace(spec(head=2), trigger="draft")))
    assert newer.superseded == (ready.job_id,)


async def test_a_claimed_job_superseded_later_still_counts_against_the_daily_limit(store) -> None:
    # Superseded jobs were left out of the count, so pushing right after each review began made every model call free.
    daily = Guard(reviews_per_day=2)
    first = await admit(store, Enqueue(spec(pr=9, head=1), guard=daily))
    [lease] = await store.claim(owner="w", limit=1, now=NOW, lease_seconds=30)
    assert lease.job_id == first.job_id
    pushed = Enqueue(replace(spec(pr=9, head=2), before_sha=sha(1)), guard=daily)
    assert (await admit(store, pushed)).superseded == (first.job_id,)
    again = await admit(store, Enqueue(replace(spec(pr=9, head=3), before_sha=sha(2)), guard=daily))
    assert again.outcome == "refused" and "per day" in again.reason
    # A superseded job that never ran spent nothing.
    other = Guard(reviews_per_day=2)
    waiting = await admit(store, Enqueue(spec(pr=10, head=1), guard=other), now=NOW + 86401)
    moved = Enqueue(replace(spec(pr=10, head=2), before_sha=sha(1)), guard=other)
    assert (await admit(store, moved, now=NOW + 86402)).superseded == (waiting.job_id,)
    third = Enqueue(replace(spec(pr=10, head=3), before_sha=sha(2)), guard=other)
    assert (await admit(store, third, now=NOW + 86403)).outcome == "enqueued"


async def test_an_outside_authors_automatic_reviews_have_a_daily_limit_of_their_own(store) -> None:
    # A fork author could spend an installation's whole day by opening pull requests.
    guard = Guard(author_per_day=2)

    def by(author: str, pr: int) -> Enqueue:
        return Enqueue(replace(spec(pr=pr), details=JobDetails(author=author)), guard=guard)

    assert [(await admit(store, by("mallory", pr))).outcome for pr in (20, 21)] == ["enqueued", "enqueued"]
    refused = await admit(store, by("mallory", 22))
    assert refused.outcome == "refused" and "per day of pull requests by mallory" in refused.reason
    assert (await admit(store, by("alice", 23))).outcome == "enqueued"
    assert (await admit(store, by("mallory", 24), now=NOW + 86401)).outcome == "enqueued"


async def test_admissions_of_different_pull_requests_together_each_see_what_came_before(store) -> None:
    """Committed together (PostgreSQL batches them, their pre-checks in one statement), each admission still sees
    the pull request's pending jobs, its pause, the installation's state and the live revisions committed before."""
    older = await admit(store, Enqueue(spec(pr=1, head=1)))
    await admit(store, SetPause(1, 2, True))
    live = await admit(store, Enqueue(spec(pr=4, head=4)))
    await admit(store, InstallationChange(9, "gone", False, "installation deleted"))
    batch = [
        Enqueue(spec(pr=1, head=2)),
        Enqueue(spec(pr=2, head=1)),
        Enqueue(replace(spec(pr=3, head=1), installation_id=9)),
        Enqueue(spec(pr=4, head=4)),
        Enqueue(spec(pr=5, head=1)),
    ]
    results = await asyncio.gather(*(admit(store, d) for d in batch))
    assert [r.outcome for r in results] == ["enqueued", "skipped", "ignored", "duplicate-revision", "enqueued"]
    assert results[0].superseded == (older.job_id,)
    assert (await store.get_job(older.job_id)).superseded_by == results[0].job_id
    assert results[3].job_id == live.job_id


async def test_answers_and_reviews_each_have_their_own_daily_budget(store) -> None:
    # One outside account asking questions until the installation's limit once refused a maintainer's review.
    def answer(n: int, asker: str = "mallory") -> Enqueue:
        job = replace(spec(pr=30 + n, head=""), trigger=f"reply:{1000 + n}", priority=5)
        details = JobDetails(asked_by=asker, thread=f"review:{n}", author=asker)
        return Enqueue(replace(job, details=details), guard=Guard(reviews_per_day=3, author_per_day=2))

    assert [(await admit(store, answer(n))).outcome for n in (1, 2)] == ["enqueued", "enqueued"]
    refused = await admit(store, answer(3))
    assert refused.outcome == "refused" and "answers per day to mallory" in refused.reason
    assert (await admit(store, answer(4, "alice"))).outcome == "enqueued"  # the installation's third answer
    full = await admit(store, answer(5, "bob"))
    assert full.outcome == "refused" and "3 answers per day for this installation" in full.reason
    # Three answers today, and the reviews' own limit of two is untouched by them.
    daily = Guard(reviews_per_day=2)
    reviews = [await admit(store, Enqueue(spec(pr=50 + n, head=n), guard=daily)) for n in (1, 2, 3)]
    assert [r.outcome for r in reviews] == ["enqueued", "enqueued", "refused"]
    assert "2 reviews per day" in reviews[2].reason
    # An outside author's reviews and the same account's answers are counted apart too.
    by_mallory = Enqueue(replace(spec(pr=60), details=JobDetails(author="mallory")), guard=Guard(author_per_day=1))
    assert (await admit(store, by_mallory)).outcome == "enqueued"


async def test_a_request_that_followed_a_push_counts_once_against_the_hourly_limit(store) -> None:
    # A followed request is a fresh row with the request's trigger: counted as a second request, it made the next
    # `/review` of the hour refused at a limit of 2.
    hourly = Guard(manual_per_pr_hour=2)
    requester = JobDetails(requested_by="maintainer")
    asked = replace(manual(n=1, head=sha(1)), guard=hourly)
    asked = replace(asked, job=replace(asked.job, details=requester))
    first = await admit(store, asked)
    assert first.outcome == "enqueued"
    await admit(store, Enqueue(spec(pr=1, head=2)))  # the request follows the pull request to head 2
    followed = [j for j in await store.list_jobs(pr_number=1) if j.trigger == "manual:1"]
    assert len(followed) == 2
    again = replace(manual(n=2), guard=hourly)
    again = replace(again, job=replace(again.job, details=requester))
    assert (await admit(store, again)).outcome == "enqueued"
    third = replace(manual(n=3), guard=hourly)
    third = replace(third, job=replace(third.job, details=requester))
    assert (await admit(store, third)).outcome == "refused"  # the limit still holds


async def test_a_webhook_after_the_sweep_makes_the_sweeps_queued_job_interactive(store) -> None:
    # The sweep (it runs at start-up too) admitted the head first; its job is batched ("found by the sweep"). The
    # push's own webhook, a duplicate of it, means someone is watching: the job asks interactively.
    swept = Enqueue(replace(spec(pr=1), details=JobDetails(action="sweep")), observed=True)
    first = await admit(store, swept)
    assert first.outcome == "enqueued"
    pushed = await admit(store, Enqueue(replace(spec(pr=1), details=JobDetails(action="synchronize"))))
    assert (pushed.outcome, pushed.job_id) == ("duplicate-revision", first.job_id)
    assert (await store.get_job(first.job_id)).details.action == "synchronize"
    # Another sweep, or a worker's hand-over, changes nothing back; nor does a webhook for a job already claimed.
    await admit(store, Enqueue(replace(spec(pr=1), details=JobDetails(action="handover")), observed=True))
    assert (await store.get_job(first.job_id)).details.action == "synchronize"
    later = await admit(store, Enqueue(replace(spec(pr=2), details=JobDetails(action="sweep")), observed=True))
    await store.claim(owner="w", limit=5, now=NOW, lease_seconds=30)
    await admit(store, Enqueue(replace(spec(pr=2), details=JobDetails(action="opened"))))
    assert (await store.get_job(later.job_id)).details.action == "sweep"  # its batch may be out already


async def test_a_key_is_claimed_once_across_concurrent_callers(store) -> None:
    # How two jobs of one pull request finishing together agree which of them replies in an outdated thread.
    results = await asyncio.gather(*(store.claim_once("thread_reply:T1", str(n)) for n in range(5)))
    assert sorted(results) == [False] * 4 + [True]
    winner = str(results.index(True))
    assert await store.get_setting("thread_reply:T1") == winner
    assert await store.claim_once("thread_reply:T2", "9") is True
