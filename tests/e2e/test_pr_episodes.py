"""Every head a pull request ends on gets its review: the ordinary workflows that used to lose one (issue 13).

Each test drives the whole app in process (tests/harness.py) against the fake GitHub and the fake model. The queue is
paused while a sequence of webhooks arrives, so jobs are still waiting when the next event lands, as on a busy app.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from reviewer_app.core.markers import parse_markers
from reviewer_app.core.states import JobState
from tests.harness import REPO, SOURCE, Harness, harness
from tests.helpers import eventually
from tests.payloads import DEFAULT_STAMP, stamp


def push_payload(
    h: Harness, pull: Any, *, before: str | None, updated_at: str = DEFAULT_STAMP, action: str = "synchronize"
) -> dict[str, Any]:
    return h.pr_payload(pull, action, updated_at=updated_at, **({"before": before} if before is not None else {}))


async def pause_queue(h: Harness) -> None:
    await h.store.set_setting("queue_paused", "1")


async def resume_queue(h: Harness) -> None:
    await h.store.set_setting("queue_paused", "0")
    h.svc.dispatcher.wake()


def bot_reviews(h: Harness, number: int = 1) -> list[dict[str, Any]]:
    return [r for r in h.reviews(number) if r["user"]["login"] == f"{h.github.app_slug}[bot]"]


async def quiet(h: Harness, timeout: float = 20) -> None:
    """No job pending and every check run up to date."""

    async def settled() -> bool:
        jobs = await h.store.list_jobs(limit=1000)
        return all(
            j.state not in (JobState.QUEUED, JobState.RUNNING) and j.check_run_status == "completed" for j in jobs
        )

    await eventually(settled, timeout=timeout)


async def _async(value: Any) -> Any:
    return value


async def test_close_and_reopen_at_the_same_head_reviews_it(tmp_path) -> None:
    async with harness(tmp_path) as h:
        await pause_queue(h)
        pull, first = await h.open_pr()
        h.github.close_pull(REPO, 1)
        closed = await h.deliver("pull_request", h.pr_payload(pull, "closed"))
        assert closed["cancelled"] == [first]
        pull.state = "open"
        reopened = await h.deliver("pull_request", h.pr_payload(pull, "reopened"))
        # Not a duplicate of the cancelled job: that one is history of the earlier episode.
        assert reopened["outcome"] == "enqueued" and reopened["job_id"] != first
        await resume_queue(h)
        await h.wait_state(reopened["job_id"], JobState.SUCCEEDED)
        [review] = bot_reviews(h)
        assert review["commit_id"] == pull.head_sha
        # A reopen of a head that was reviewed is a duplicate: the head has its review.
        h.github.close_pull(REPO, 1)
        await h.deliver("pull_request", h.pr_payload(pull, "closed"))
        pull.state = "open"
        again = await h.deliver("pull_request", h.pr_payload(pull, "reopened"))
        assert again["outcome"] == "duplicate-revision" and again["job_id"] == reopened["job_id"]


async def test_an_installation_suspended_and_back_gets_its_heads_reviewed_by_the_sweep(tmp_path) -> None:
    async with harness(tmp_path) as h:
        await pause_queue(h)
        pull, first = await h.open_pr()
        await suspend(h)
        h.github.suspend_installation(h.installation_id, False)
        await h.deliver("installation", h.installation_payload("unsuspend"))
        await resume_queue(h)
        # No webhook brings the PR back: the sweep finds its head, whose only job ended with the suspension.
        from tests.github.test_recovery import recovery

        assert await recovery(h).sweep_once() == 1
        assert await recovery(h).sweep_once() == 0
        await quiet(h)
        assert [r["commit_id"] for r in bot_reviews(h)] == [pull.head_sha]


async def test_a_force_push_back_to_an_earlier_head_reviews_that_head(tmp_path) -> None:
    async with harness(tmp_path) as h:
        await pause_queue(h)
        pull, job_a = await h.open_pr()
        a = pull.head_sha
        b = h.github.advance_head(REPO, 1)
        pushed_b = await h.deliver("pull_request", push_payload(h, pull, before=a))
        assert pushed_b["superseded"] == [job_a]
        h.github.advance_head(REPO, 1, a, force=True)  # back to A
        back = await h.deliver("pull_request", push_payload(h, pull, before=b))
        assert back["outcome"] == "enqueued" and back["superseded"] == [pushed_b["job_id"]]
        await resume_queue(h)
        await quiet(h)
        assert [r["commit_id"] for r in bot_reviews(h)] == [a]
        [run] = [r for r in h.check_runs(a) if r["conclusion"] == "success"]
        assert run["external_id"].endswith(str(back["job_id"]))


async def test_two_pushes_in_one_second_arriving_out_of_order_review_the_newer_head(tmp_path) -> None:
    async with harness(tmp_path) as h:
        await pause_queue(h)
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        base = pull.head_sha
        a = h.github.advance_head(REPO, 1)
        a_payload = push_payload(h, pull, before=base)
        b = h.github.advance_head(REPO, 1)
        b_payload = push_payload(h, pull, before=a)  # the same updated_at second as A's
        newer = await h.deliver("pull_request", b_payload)
        older = await h.deliver("pull_request", a_payload)  # late (redelivered after a 503, say)
        assert newer["outcome"] == "enqueued"
        # B names A as the head it replaced: A's late job is recorded superseded by B's, and B's job stays.
        assert older["outcome"] == "superseded" and older.get("superseded") is None
        assert (await h.job(older["job_id"])).superseded_by == newer["job_id"]
        assert (await h.job(newer["job_id"])).state == JobState.QUEUED
        await resume_queue(h)
        await quiet(h)
        assert [r["commit_id"] for r in bot_reviews(h)] == [b]


async def test_a_tie_on_updated_at_with_no_link_supersedes_nothing_and_the_worker_sorts_it_out(tmp_path) -> None:
    async with harness(tmp_path) as h:
        await pause_queue(h)
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        a = pull.head_sha
        b = h.github.advance_head(REPO, 1)
        newer = await h.deliver("pull_request", push_payload(h, pull, before=None, action="opened"))
        late = push_payload(h, pull, before=None, action="reopened")
        late["pull_request"]["head"]["sha"] = a  # an event of head A, in the same second, arriving second
        older = await h.deliver("pull_request", late)
        assert older["outcome"] == "enqueued" and not older.get("superseded")
        assert (await h.job(newer["job_id"])).state == JobState.QUEUED
        await resume_queue(h)
        await quiet(h)
        # A's job ran, found B and ended superseded; B was reviewed once.
        assert (await h.job(older["job_id"])).state == JobState.SUPERSEDED
        assert [r["commit_id"] for r in bot_reviews(h)] == [b]


async def test_a_rerun_of_an_old_head_does_not_supersede_the_newer_head(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull, job_a = await h.open_pr()
        await h.wait_check_synced(job_a)
        [run_a] = h.check_runs(pull.head_sha)
        await pause_queue(h)
        a = pull.head_sha
        b = h.github.advance_head(REPO, 1)
        pushed = await h.deliver("pull_request", push_payload(h, pull, before=a))
        rerun = await h.deliver("check_run", h.rerun_payload(pull, run_a))
        assert rerun["outcome"] == "enqueued" and not rerun.get("superseded")
        assert (await h.job(pushed["job_id"])).state == JobState.QUEUED
        await resume_queue(h)
        await quiet(h)
        # The re-run follows the PR to its newest head: B gets the automatic review and the requested one.
        heads = [r["commit_id"] for r in bot_reviews(h)]
        assert heads[0] == a and heads[1:].count(b) >= 1 and set(heads[1:]) == {b}


async def test_review_then_push_moves_the_request_to_the_new_head_and_keeps_full(tmp_path) -> None:
    async with harness(tmp_path) as h:
        h.github.set_file(REPO, ".github/reviewer.yml", "auto: false\n")
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        a = pull.head_sha
        # The model takes a while, so the push lands while the requested review of A is with it.
        h.anthropic.script_slow_answer(1.0)
        asked = await h.deliver("issue_comment", h.comment_payload(pull, "/review full"))
        first = asked["job_id"]

        async def with_the_model() -> bool:
            job = await h.job(first)
            return job.state == JobState.RUNNING and job.head_sha == a and len(h.anthropic.message_requests) == 1

        await eventually(with_the_model)
        b = h.github.advance_head(REPO, 1)
        pushed = await h.deliver("pull_request", push_payload(h, pull, before=a))
        assert pushed["outcome"] == "enqueued"
        moved = await h.job(first)
        assert moved.state == JobState.SUPERSEDED and moved.superseded_by is not None
        successor = await h.wait_state(moved.superseded_by, JobState.SUCCEEDED)
        assert successor.trigger == moved.trigger and successor.details.full is True
        assert successor.head_sha == b
        await quiet(h)
        # One review for the one request, of the newest head; the automatic job of B was skipped (auto: false).
        [review] = bot_reviews(h)
        assert review["commit_id"] == b
        assert [m.job_id for m in parse_markers(review["body"])] == [successor.id]
        auto = await h.job(pushed["job_id"])
        assert auto.state == JobState.CANCELLED and auto.outcome.startswith("skipped: ")


async def test_a_push_admitted_while_the_review_waits_for_the_write_lock_posts_nothing_for_the_old_head(
    tmp_path,
) -> None:
    async with harness(tmp_path) as h:
        h.anthropic.script_slow_answer(0.5)
        pull, job_a = await h.open_pr()
        a = pull.head_sha
        await eventually(lambda: _async(len(h.anthropic.message_requests) == 1))
        # Meanwhile another write of the installation holds its one-at-a-time write turn (github/pacing.py).
        held, release = asyncio.Event(), asyncio.Event()

        async def other_write() -> None:
            async with h.svc.github.pacer.turn(h.installation_id):
                held.set()
                await release.wait()

        holder = asyncio.create_task(other_write())
        await held.wait()

        async def waiting_to_post() -> bool:
            return (await h.job(job_a)).publish_intent_at is not None

        await eventually(waiting_to_post)
        b = h.github.advance_head(REPO, 1)
        pushed = await h.deliver("pull_request", push_payload(h, pull, before=a))
        assert pushed["superseded"] == [job_a]
        release.set()
        await holder
        await quiet(h)
        # The old job re-checked its lease once the lock was its own, and posted nothing.
        assert [r["commit_id"] for r in bot_reviews(h)] == [b]
        assert (await h.job(job_a)).review_id is None


async def test_a_review_published_by_a_job_superseded_right_after_is_recorded(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull, job_a = await h.open_pr()
        a = pull.head_sha
        # The review POST lands on GitHub, then the push is admitted before the worker records it.
        h.github.inject("POST", r"/pulls/1/reviews$", "lost_response", mode="slow", delay=1.0)

        async def posted() -> bool:
            return len(bot_reviews(h)) == 1

        await eventually(posted)
        h.github.advance_head(REPO, 1)
        await h.deliver("pull_request", push_payload(h, pull, before=a))
        await quiet(h)
        job = await h.job(job_a)
        first, second = bot_reviews(h)
        assert job.state == JobState.SUPERSEDED and job.review_id == first["id"]
        # So the next head's review starts from A's: incremental, not the whole pull request again.
        assert first["commit_id"] == a and "Incremental review" in second["body"]


async def test_a_request_whose_review_was_in_flight_when_it_moved_on_is_answered_once(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        h.github.set_file(REPO, ".github/reviewer.yml", "auto: false\n")
        a = pull.head_sha
        # GitHub applies the review of A, but its answer is slow: the push moves the request on meanwhile.
        h.github.inject("POST", r"/pulls/1/reviews$", "lost_response", mode="slow", delay=1.0)
        asked = await h.deliver("issue_comment", h.comment_payload(pull, "/review"))
        await eventually(lambda: _async(len(bot_reviews(h)) == 1))
        h.github.advance_head(REPO, 1)
        await h.deliver("pull_request", push_payload(h, pull, before=a))
        moved = await h.job(asked["job_id"])
        assert moved.state == JobState.SUPERSEDED and moved.superseded_by is not None
        await quiet(h)
        # The successor found the request answered (by the review of A) and posted nothing more.
        successor = await h.job(moved.superseded_by)
        assert successor.state == JobState.CANCELLED and "answered by review" in successor.outcome
        assert [r["commit_id"] for r in bot_reviews(h)] == [a]


async def test_an_installation_back_from_suspension_is_swept_at_once_not_at_the_next_interval(tmp_path) -> None:
    async with harness(tmp_path, REVIEWER_SWEEP_SECONDS="3600") as h:
        await pause_queue(h)
        pull, first = await h.open_pr()
        await suspend(h)
        h.github.suspend_installation(h.installation_id, False)
        back = await h.deliver("installation", h.installation_payload("unsuspend"))
        assert back["outcome"] == "installation"
        await resume_queue(h)
        # The next interval is an hour away: the webhook itself woke the sweep.
        await eventually(lambda: _async(len(bot_reviews(h)) == 1), timeout=15)
        assert bot_reviews(h)[0]["commit_id"] == pull.head_sha


async def test_a_repository_added_back_is_swept(tmp_path) -> None:
    async with harness(tmp_path, REVIEWER_SWEEP_SECONDS="3600") as h:
        await pause_queue(h)
        pull, first = await h.open_pr()
        removed = await h.deliver("installation_repositories", h.repositories_payload("removed", removed=[REPO]))
        assert removed["cancelled"] == [first]
        added = h.repositories_payload("added", added=[REPO])
        assert (await h.deliver("installation_repositories", added))["outcome"] == "installation"
        await resume_queue(h)
        await eventually(lambda: _async(len(bot_reviews(h)) == 1), timeout=15)
        assert bot_reviews(h)[0]["commit_id"] == pull.head_sha


async def test_a_push_held_back_until_after_a_force_push_back_still_leaves_the_head_reviewed(tmp_path) -> None:
    # Shrunk from the model-based test: open at A, push B (its webhook delayed), force-push back to A, then B's
    # webhook arrives. B's `before` names A, so B's job supersedes A's; B's worker reads A and hands it over, and the
    # hand-over must not be taken for "older than B".
    async with harness(tmp_path) as h:
        await pause_queue(h)
        pull, job_a = await h.open_pr()
        a = pull.head_sha
        b = h.github.advance_head(REPO, 1)
        late_b = push_payload(h, pull, before=a)
        h.github.advance_head(REPO, 1, a, force=True)
        back = await h.deliver("pull_request", push_payload(h, pull, before=b))
        assert back["outcome"] == "duplicate-revision" and back["job_id"] == job_a
        late = await h.deliver("pull_request", late_b)
        assert late["superseded"] == [job_a]
        await resume_queue(h)
        await quiet(h)
        assert [r["commit_id"] for r in bot_reviews(h)] == [a]


async def test_a_draft_marked_ready_while_its_job_decides_to_skip_it_is_reviewed(tmp_path) -> None:
    # Found by the model-based test: the job read the PR as a draft, the PR was marked ready and its webhook came
    # while the job was still deciding (a duplicate of the running job), then the job ended "skipped: draft".
    async with harness(tmp_path) as h:
        await pause_queue(h)
        pull, job_id = await h.open_pr()
        pull.draft = True  # converted to draft before the job ran (GitHub's converted_to_draft starts nothing)
        h.github.inject("GET", r"/contents/\.github/reviewer\.yml", "lost_response", mode="slow", delay=1.0)
        await resume_queue(h)

        async def deciding() -> bool:
            return bool(h.github.requests_matching("GET", r"/contents/\.github/reviewer\.yml"))

        await eventually(deciding)
        pull.draft = False
        ready = await h.deliver("pull_request", h.pr_payload(pull, "ready_for_review"))
        assert ready["outcome"] == "duplicate-revision" and ready["job_id"] == job_id
        job = await h.wait_state(job_id, JobState.SUCCEEDED, JobState.CANCELLED)
        assert job.state == JobState.SUCCEEDED, job.outcome
        assert [r["commit_id"] for r in bot_reviews(h)] == [pull.head_sha]


async def test_a_stale_draft_skip_does_not_hide_the_head_from_the_sweep(tmp_path) -> None:
    # Shrunk from the model-based test: skipped as a draft, marked ready (a new job), then that job cancelled by the
    # repository's removal; once the repository is back, the old "skipped: draft" must not count for the head.
    from tests.github.test_recovery import recovery

    async with harness(tmp_path) as h:
        await pause_queue(h)
        pull, first = await h.open_pr()
        pull.draft = True
        await resume_queue(h)
        await h.wait_state(first, JobState.CANCELLED)  # skipped: it ran on the draft
        await pause_queue(h)
        pull.draft = False
        ready = await h.deliver("pull_request", h.pr_payload(pull, "ready_for_review"))
        removed = await h.deliver("installation_repositories", h.repositories_payload("removed", removed=[REPO]))
        assert removed["cancelled"] == [ready["job_id"]]
        await h.deliver("installation_repositories", h.repositories_payload("added", added=[REPO]))
        await resume_queue(h)
        assert await recovery(h).sweep_once() == 1
        await quiet(h)
        assert [r["commit_id"] for r in bot_reviews(h)] == [pull.head_sha]


async def test_a_retargeted_base_gets_a_full_review_of_the_head(tmp_path) -> None:
    # `pull_request.edited` was ignored whatever changed, so a PR moved onto another base kept a review of the old diff.
    async with harness(tmp_path) as h:
        pull, first = await h.open_pr()
        await h.wait_state(first, JobState.SUCCEEDED)
        title = h.pr_payload(pull, "edited") | {"changes": {"title": {"from": "old title"}}}
        assert (await h.deliver("pull_request", title))["outcome"] == "ignored"
        pull.base_ref = "release"
        edited = h.pr_payload(pull, "edited") | {
            "changes": {"base": {"ref": {"from": "main"}, "sha": {"from": "0" * 40}}}
        }
        answer = await h.deliver("pull_request", edited)
        assert answer["outcome"] == "enqueued", answer
        job = await h.wait_state(answer["job_id"], JobState.SUCCEEDED)
        assert job.head_sha == pull.head_sha and job.details.full is True and len(h.reviews()) == 2
        assert "Incremental review" not in h.reviews()[-1]["body"]
        again = await h.deliver("pull_request", edited, delivery=job.details.delivery_id)
        assert again["outcome"] == "duplicate-delivery" and len(h.reviews()) == 2


async def test_a_push_while_a_review_prepares_stops_it_before_the_model_is_paid(tmp_path) -> None:
    # The head was read once at the start: a push landing while context was read (its webhook late or lost) still
    # cost a model call for a head nobody would see reviewed.
    async with harness(tmp_path) as h:
        stall = h.github.inject("GET", r"/contents/", "hang")
        pull, job_id = await h.open_pr()
        await eventually(lambda: _now(stall.hits == 1))
        newer = h.github.advance_head(REPO, 1)
        h.github.release_hangs()
        job = await h.wait_state(job_id, JobState.SUPERSEDED)
        assert newer in (job.outcome or "")
        handed = await eventually(lambda: _reviewed(h, newer))
        assert handed["commit_id"] == newer and len(h.anthropic.message_requests) == 1


async def _now(value: Any) -> Any:
    return value


async def _reviewed(h: Harness, head: str) -> dict[str, Any] | None:
    return next((r for r in h.reviews() if r["commit_id"] == head), None)


async def suspend(h: Harness) -> None:
    """Suspend the installation on GitHub and deliver its webhook; wait until the outbox confirmed and applied it."""
    h.github.suspend_installation(h.installation_id)
    gone = await h.deliver("installation", h.installation_payload("suspend"))
    assert gone["outcome"] == "replied"

    async def inactive() -> bool:
        return not await h.store.installation_active(h.installation_id)

    await eventually(inactive)


async def test_a_head_the_bot_reviewed_is_not_paid_for_again_when_the_store_has_forgotten_it(tmp_path) -> None:
    # A signed delivery replayed inside the window after the store lost the PR's jobs (pruned, or restored from an
    # old backup): the store has no review of the pull request, GitHub's markers do, and no model call is made.
    async with harness(tmp_path) as h:
        pull, first = await h.open_pr()
        await h.wait_state(first, JobState.SUCCEEDED)
        await quiet(h)
        _, other = await h.open_pr(2)  # SQLite keeps the newest job (its ids are never reused): not this PR's
        await h.wait_state(other, JobState.SUCCEEDED)
        await quiet(h)
        paid = len(h.anthropic.message_requests)
        # The store forgets the pull request as retention would (every finished job and delivery pruned).
        assert await h.store.prune(before=time.time() + 86400, batch=1000) >= 1
        assert await h.store.last_reviewed_head(pull_repo_id(h), 1) is None
        replayed = await h.deliver("pull_request", h.pr_payload(pull, "synchronize"))
        assert replayed["outcome"] == "enqueued"
        job = await h.wait_state(replayed["job_id"], JobState.CANCELLED, JobState.SUCCEEDED)
        assert job.state == JobState.CANCELLED and "already reviewed" in (job.outcome or ""), job.outcome
        assert len(h.anthropic.message_requests) == paid
        assert len(bot_reviews(h)) == 1


def pull_repo_id(h: Harness) -> int:
    return h.github.repos[REPO].id


async def test_a_close_delivered_after_the_reopen_that_followed_it_cancels_nothing(tmp_path) -> None:
    # Close and reopen (the usual way to re-run CI), their webhooks out of order: the reopen first (a duplicate of
    # the pending job), then the close, which GitHub timed before the reopen. The head is still reviewed.
    async with harness(tmp_path) as h:
        await pause_queue(h)
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        opened = await h.deliver("pull_request", h.pr_payload(pull, "opened", updated_at=stamp(0)))
        reopened = await h.deliver("pull_request", h.pr_payload(pull, "reopened", updated_at=stamp(20)))
        assert reopened["outcome"] == "duplicate-revision" and reopened["job_id"] == opened["job_id"]
        pull.state = "closed"
        closed = await h.deliver("pull_request", h.pr_payload(pull, "closed", updated_at=stamp(10)))
        pull.state = "open"
        assert closed["outcome"] == "cancelled" and closed.get("cancelled", []) == []
        await resume_queue(h)
        await h.wait_state(opened["job_id"], JobState.SUCCEEDED)
        [review] = bot_reviews(h)
        assert review["commit_id"] == pull.head_sha
        # A close GitHub timed after what the store knows still cancels, as before.
        h.github.advance_head(REPO, 1)
        await pause_queue(h)
        pushed = await h.deliver("pull_request", h.pr_payload(pull, "synchronize", updated_at=stamp(30)))
        pull.state = "closed"
        closed = await h.deliver("pull_request", h.pr_payload(pull, "closed", updated_at=stamp(40)))
        assert closed["cancelled"] == [pushed["job_id"]]


async def test_a_stale_read_of_the_old_head_does_not_supersede_the_new_one(tmp_path) -> None:
    # A pushed, then B (its `before` is A). GitHub's reads lag: B's job still reads head A. The store knows A is
    # older, so the job reads again instead of ending "superseded by A"; B gets its review, A none.
    async with harness(tmp_path) as h:
        await pause_queue(h)
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        a = pull.head_sha
        first = await h.deliver("pull_request", h.pr_payload(pull, "opened", updated_at=stamp(0)))
        b = h.github.advance_head(REPO, 1)
        pushed = await h.deliver("pull_request", push_payload(h, pull, before=a, updated_at=stamp(10)))
        assert pushed["superseded"] == [first["job_id"]]
        pull.head_sha = a  # the lagging read
        await resume_queue(h)

        async def read_again() -> bool:
            job = await h.job(pushed["job_id"])
            return "reading the pull request again" in (job.last_error or "")

        await eventually(read_again)
        pull.head_sha = b  # GitHub caught up
        job = await h.wait_state(pushed["job_id"], JobState.SUCCEEDED, JobState.SUPERSEDED)
        assert job.state == JobState.SUCCEEDED, job.outcome
        await quiet(h)
        assert [r["commit_id"] for r in bot_reviews(h)] == [b]


async def test_a_base_changed_and_changed_back_while_waiting_is_reviewed_once(tmp_path) -> None:
    async with harness(tmp_path) as h:
        await pause_queue(h)
        pull, first = await h.open_pr()
        answers = []
        for old, new in (("main", "release"), ("release", "main")):
            pull.base_ref = new
            edited = h.pr_payload(pull, "edited") | {
                "changes": {"base": {"ref": {"from": old}, "sha": {"from": "0" * 40}}}
            }
            answers.append(await h.deliver("pull_request", edited))
        assert answers[0]["outcome"] == "enqueued" and answers[0]["superseded"] == [first]
        assert answers[1]["outcome"] == "duplicate-revision" and answers[1]["job_id"] == answers[0]["job_id"]
        await resume_queue(h)
        job = await h.wait_state(answers[0]["job_id"], JobState.SUCCEEDED)
        assert job.details.full is True
        await quiet(h)
        assert len(bot_reviews(h)) == 1 and len(h.anthropic.message_requests) == 1


async def test_a_review_asked_for_after_a_reopen_survives_the_close_delivered_late(tmp_path) -> None:
    # Close, reopen, `/review`; the close's webhook arrives last. A request carries its comment's time, so the close
    # (timed before it) no longer cancels it.
    async with harness(tmp_path) as h:
        pull, first = await h.open_pr()
        await h.wait_state(first, JobState.SUCCEEDED)
        await pause_queue(h)
        pull.state = "closed"
        late_close = h.pr_payload(pull, "closed", updated_at=stamp(10))
        pull.state = "open"
        await h.deliver("pull_request", h.pr_payload(pull, "reopened", updated_at=stamp(20)))
        asked = h.comment_payload(pull, "/review full")
        asked["comment"]["created_at"] = stamp(30)
        request = await h.deliver("issue_comment", asked)
        assert request["outcome"] == "enqueued"
        closed = await h.deliver("pull_request", late_close)
        assert closed.get("cancelled", []) == []
        await resume_queue(h)
        await h.wait_state(request["job_id"], JobState.SUCCEEDED)
        assert len(bot_reviews(h)) == 2


async def test_a_force_push_back_to_a_reviewed_head_is_not_taken_for_a_stale_read(tmp_path) -> None:
    # Found by the widened model test: A reviewed, B pushed, then a force-push back to A (a duplicate of A's finished
    # job). B's worker reads A: the store must know A came after B, or B waits on a "stale read" that is the truth.
    async with harness(tmp_path) as h:
        pull, first = await h.open_pr()
        a = pull.head_sha
        await h.wait_state(first, JobState.SUCCEEDED)
        await quiet(h)
        await pause_queue(h)
        b = h.github.advance_head(REPO, 1)
        pushed = await h.deliver("pull_request", push_payload(h, pull, before=a, updated_at=stamp(10)))
        h.github.advance_head(REPO, 1, a, force=True)
        back = await h.deliver("pull_request", push_payload(h, pull, before=b, updated_at=stamp(20)))
        assert back["outcome"] == "duplicate-revision" and back["job_id"] == first
        await resume_queue(h)
        job = await h.wait_state(pushed["job_id"], JobState.SUPERSEDED, JobState.SUCCEEDED)
        assert job.state == JobState.SUPERSEDED and a in (job.outcome or "")
        await quiet(h)
        assert [r["commit_id"] for r in bot_reviews(h)] == [a]
