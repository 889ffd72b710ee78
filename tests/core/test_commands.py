"""Who can ask for a review, and when: slash commands, Re-run, debounce, incremental reviews, budget, lifecycle."""

from __future__ import annotations

import copy
import json
import time
from typing import Any

import pytest

from reviewer_app.core.admission import Enqueue, Reply, pause_key
from reviewer_app.core.commands import HELP_QUIET_SECONDS, may_command, parse_command
from reviewer_app.core.events import decide_comment
from reviewer_app.core.states import JobState
from reviewer_app.store.base import Delivery
from tests.fakes.github import added_file, iso
from tests.harness import REPO, SOURCE, harness
from tests.helpers import eventually, sha, webhook_headers
from tests.payloads import issue_comment_event


@pytest.mark.parametrize(
    "body,verb",
    [
        ("/review", "review"),
        ("/review full", "full"),
        ("/review pause", "pause"),
        ("/review resume", "resume"),
        ("/review help", "help"),
        ("/review frobnicate", "unknown"),
        ("Thanks!\n/review\n", "review"),
        ("@reviewer-app review", "review"),
        ("@reviewer-app full", "full"),
        ("@Reviewer-App pause", "pause"),
        ("@reviewer-app[bot] review full", "full"),
    ],
)
def test_commands_are_parsed(body: str, verb: str) -> None:
    cmd = parse_command(body, app_slug="reviewer-app")
    assert cmd is not None and cmd.verb == verb


@pytest.mark.parametrize(
    "body", ["please /review this", "> /review", "```\n/review\n```", "/reviewer", "@someone review", "no command here"]
)
def test_non_commands(body: str) -> None:
    assert parse_command(body, app_slug="reviewer-app") is None


@pytest.mark.parametrize(
    "association,user_type,login,allowed",
    [
        ("OWNER", "User", "a", True),
        ("MEMBER", "User", "a", True),
        ("COLLABORATOR", "User", "a", True),
        ("CONTRIBUTOR", "User", "a", False),
        ("NONE", "User", "a", False),
        ("FIRST_TIME_CONTRIBUTOR", "User", "a", False),
        ("MEMBER", "Bot", "ci[bot]", False),
        ("OWNER", "User", "reviewer-app[bot]", False),
    ],
)
def test_who_may_command(association: str, user_type: str, login: str, allowed: bool) -> None:
    assert (
        may_command(author_association=association, user_type=user_type, login=login, bot_login="reviewer-app[bot]")
        is allowed
    )


async def _reactions(h, comment_id: int) -> list[str]:
    return [r["content"] for r in h.github.reactions.get(comment_id, [])]


async def test_review_by_a_member_creates_a_job_and_a_reaction(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        payload = h.comment_payload(pull, "/review", association="MEMBER")
        answer = await h.deliver("issue_comment", payload)
        assert answer["outcome"] == "enqueued"
        job = await h.wait_state(answer["job_id"], JobState.SUCCEEDED)
        assert job.head_sha == pull.head_sha and job.trigger.startswith("manual:")
        assert len(h.reviews()) == 1
        comment_id = payload["comment"]["id"]
        await eventually(lambda: _reactions(h, comment_id))
        assert await _reactions(h, comment_id) == ["+1"]
        again = await h.deliver("issue_comment", payload)  # the same comment delivered again
        assert again["job_id"] == answer["job_id"]
        assert len(await h.store.list_jobs()) == 1


@pytest.mark.parametrize("association,permission", [("MEMBER", "read"), ("COLLABORATOR", "read"), ("MEMBER", None)])
async def test_review_by_a_member_without_write_access_is_refused_before_any_model_call(
    tmp_path, association: str, permission: str | None
) -> None:
    # MEMBER is any member of the owning organisation and COLLABORATOR includes read access: the worker asks GitHub
    # for the requester's permission before paying for a review.
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        if permission is not None:
            h.github.set_permission(REPO, "reader", permission)
        payload = h.comment_payload(pull, "/review", login="reader", association=association)
        answer = await h.deliver("issue_comment", payload)
        assert answer["outcome"] == "enqueued"
        job = await h.wait_state(answer["job_id"], JobState.CANCELLED)
        assert "reader may not request reviews" in job.outcome and "write access" in job.outcome
        assert await _reactions(h, payload["comment"]["id"]) == ["-1"]
        assert h.reviews() == [] and h.anthropic.message_requests == [] and h.check_runs(pull.head_sha) == []
        assert h.github.requests_matching("GET", r"/collaborators/reader/permission$")


async def test_the_repository_owner_is_not_asked_for_and_reacted_to_at_admission(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        owner = REPO.split("/")[0]
        payload = h.comment_payload(pull, "/review", login=owner, association="OWNER")
        answer = await h.deliver("issue_comment", payload)
        await h.wait_state(answer["job_id"], JobState.SUCCEEDED)
        assert await _reactions(h, payload["comment"]["id"]) == ["+1"]
        assert not h.github.requests_matching("GET", r"/permission$")


def test_only_the_owner_skips_the_permission_check() -> None:
    def payload(association: str) -> dict:
        return issue_comment_event("/review", comment_id=5, login="someone", association=association)

    member = decide_comment("created", payload("MEMBER"), app_slug="reviewer-app", bot_login="reviewer-app[bot]")
    owner = decide_comment("created", payload("OWNER"), app_slug="reviewer-app", bot_login="reviewer-app[bot]")
    assert isinstance(member, Enqueue) and isinstance(owner, Enqueue)
    assert member.job.details.verify_permission is True and member.effects == ()
    assert owner.job.details.verify_permission is False and [e.content for e in owner.effects] == ["+1"]


@pytest.mark.parametrize("association", ["NONE", "CONTRIBUTOR"])
async def test_review_by_an_outsider_gets_only_a_refusal(tmp_path, association: str) -> None:
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        payload = h.comment_payload(pull, "/review", login="drive-by", association=association)
        answer = await h.deliver("issue_comment", payload)
        assert answer["outcome"] == "replied"
        await eventually(lambda: _reactions(h, payload["comment"]["id"]))
        assert await _reactions(h, payload["comment"]["id"]) == ["-1"]
        assert await h.store.list_jobs() == []
        assert h.anthropic.message_requests == []


@pytest.mark.parametrize("login,user_type", [("reviewer-app[bot]", "Bot"), ("dependabot[bot]", "Bot")])
async def test_a_bots_comment_is_never_a_command(tmp_path, login: str, user_type: str) -> None:
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        answer = await h.deliver(
            "issue_comment", h.comment_payload(pull, "/review", login=login, user_type=user_type, association="OWNER")
        )
        assert answer["outcome"] == "ignored" and "bot" in answer["reason"]
        assert await h.store.list_jobs() == []


@pytest.mark.parametrize("action", ["edited", "deleted"])
async def test_edited_and_deleted_comments_trigger_nothing(tmp_path, action: str) -> None:
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        answer = await h.deliver("issue_comment", h.comment_payload(pull, "/review", action=action))
        assert answer["outcome"] == "ignored"
        assert await h.store.list_jobs() == []


def _bot_replies(h, number: int) -> list[dict]:
    return [c for c in h.github.issue_comments_for(REPO, number) if c["user"]["login"] == "reviewer-app[bot]"]


async def test_help_and_unknown_commands_answer_with_help(tmp_path) -> None:
    async with harness(tmp_path) as h:
        first, second = (h.github.add_pull(REPO, n, files=[SOURCE]) for n in (1, 2))
        await h.deliver("issue_comment", h.comment_payload(first, "/review help"))
        await h.deliver("issue_comment", h.comment_payload(second, "/review frobnicate"))

        async def replies():
            return _bot_replies(h, 1) + _bot_replies(h, 2)

        found = await eventually(lambda: _len_at_least(replies, 2))
        assert all("/review pause" in c["body"] for c in found)
        assert "Unknown command" in found[1]["body"] and "frobnicate" not in found[1]["body"]
        assert await h.store.list_jobs() == []


async def test_a_help_reply_whose_answer_was_lost_is_posted_once(tmp_path) -> None:
    # The POST reaches GitHub, the answer does not: the outbox tries again, finds its reply by the marker, and stops.
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        h.github.inject("POST", rf"/repos/{REPO}/issues/1/comments$", "lost_response")
        await h.deliver("issue_comment", h.comment_payload(pull, "/review help"))

        async def settled() -> bool:
            return not await h.store.pending_effects()

        await eventually(settled)
        replies = [c for c in h.github.issue_comments_for(REPO, 1) if c["user"]["login"] == "reviewer-app[bot]"]
        assert len(replies) == 1 and "/review pause" in replies[0]["body"]
        assert len(h.github.requests_matching("POST", r"/issues/1/comments$")) == 1


ATTACK = "/review x` @octocat [click](https://evil.example) `"


def test_an_unknown_command_is_answered_without_echoing_the_comment() -> None:
    payload = issue_comment_event(ATTACK, comment_id=9, login="maintainer", association="MEMBER")
    decision = decide_comment("created", payload, app_slug="reviewer-app", bot_login="reviewer-app[bot]")
    assert isinstance(decision, Reply) and decision.quiet_seconds > 0
    (said,) = decision.effects
    assert said.kind == "comment" and said.content.startswith("Unknown command.")
    for echoed in ("octocat", "evil.example", "click", "x`"):
        assert echoed not in said.content


@pytest.mark.parametrize("body", ["/review help", ATTACK])
def test_help_is_not_answered_to_people_who_may_not_command(body: str) -> None:
    payload = issue_comment_event(body, comment_id=9, login="drive-by", association="NONE")
    decision = decide_comment("created", payload, app_slug="reviewer-app", bot_login="reviewer-app[bot]")
    assert isinstance(decision, Reply) and [(e.kind, e.content) for e in decision.effects] == [("reaction", "-1")]


async def test_help_is_posted_once_per_pull_request_and_never_to_outsiders(tmp_path) -> None:
    async with harness(tmp_path) as h:
        first, second = (h.github.add_pull(REPO, n, files=[SOURCE]) for n in (1, 2))
        outsider = h.comment_payload(first, ATTACK, login="drive-by", association="NONE")
        assert (await h.deliver("issue_comment", outsider))["outcome"] == "replied"  # a -1 reaction, nothing said
        answers = [
            await h.deliver("issue_comment", h.comment_payload(first, body))
            for body in ("/review help", ATTACK, "/review help")
        ]
        assert [a["outcome"] for a in answers] == ["replied", "ignored", "ignored"]
        assert "already answered" in answers[1]["reason"]
        assert (await h.deliver("issue_comment", h.comment_payload(second, "/review help")))["outcome"] == "replied"
        await eventually(lambda: _len_at_least(lambda: _async(_bot_replies(h, 2)), 1))
        await eventually(lambda: _async(h.github.reactions.get(outsider["comment"]["id"])))
        (only,) = _bot_replies(h, 1)
        assert "octocat" not in only["body"] and "evil.example" not in only["body"]


async def _async(value):
    return value


async def _len_at_least(fn, n):
    items = await fn()
    return items if len(items) >= n else None


async def test_pause_stops_automatic_reviews_but_not_requested_ones(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        # A member with write access: applied once the outbox has confirmed it with GitHub.
        assert (await h.deliver("issue_comment", h.comment_payload(pull, "/review pause")))["outcome"] == "replied"
        await _setting(h, pause_key(h.github.repos[REPO].id, 1), "1")
        h.github.advance_head(REPO, 1)
        pushed = await h.deliver("pull_request", h.pr_payload(pull, action="synchronize"))
        assert pushed["outcome"] == "skipped" and "paused" in pushed["reason"]
        # The skip is visible: the head's check run says why no review came.
        await h.wait_check_synced(pushed["job_id"])
        [run] = h.check_runs(pull.head_sha)
        assert (run["status"], run["conclusion"]) == ("completed", "skipped")
        assert "paused" in run["output"]["summary"]
        manual = await h.deliver("issue_comment", h.comment_payload(pull, "/review"))
        await h.wait_state(manual["job_id"], JobState.SUCCEEDED)
        resume = h.comment_payload(pull, "/review resume", association="OWNER", login="octo-org")
        assert (await h.deliver("issue_comment", resume))["outcome"] == "resumed"  # the owner: at its word
        h.github.advance_head(REPO, 1)
        pushed = await h.deliver("pull_request", h.pr_payload(pull, action="synchronize"))
        assert pushed["outcome"] == "enqueued"


async def test_five_pushes_in_the_debounce_window_cost_one_model_call(tmp_path) -> None:
    async with harness(tmp_path, REVIEWER_DEBOUNCE_SECONDS="1") as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        answers = []
        for _ in range(5):
            h.github.advance_head(REPO, 1)
            answers.append(await h.deliver("pull_request", h.pr_payload(pull, action="synchronize")))
        last = await h.wait_state(answers[-1]["job_id"], JobState.SUCCEEDED)
        assert last.head_sha == pull.head_sha
        assert len(h.anthropic.message_requests) == 1 and len(h.reviews()) == 1
        for a in answers[:-1]:
            assert (await h.job(a["job_id"])).state == JobState.SUPERSEDED


async def test_a_push_after_a_review_is_reviewed_incrementally_and_a_force_push_in_full(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull, first = await h.open_pr()
        await h.wait_state(first, JobState.SUCCEEDED)
        old = pull.head_sha
        newer = added_file("src/newer.py", ["def g():", "    return 42"])
        h.github.advance_head(REPO, 1, files=[SOURCE, newer])
        h.github.set_compare_files(REPO, old, pull.head_sha, [newer])
        second = await h.deliver("pull_request", h.pr_payload(pull, action="synchronize"))
        job = await h.wait_state(second["job_id"], JobState.SUCCEEDED)
        sent = json.dumps(h.anthropic.message_requests[-1].messages)
        assert "src/newer.py" in sent and "src/widget.py" not in sent
        assert "Incremental review" in h.reviews()[-1]["body"] and job.details.incremental is True

        rewritten = added_file("src/rewritten.py", ["x = 1"])
        h.github.advance_head(REPO, 1, files=[SOURCE, rewritten], force=True)
        third = await h.deliver("pull_request", h.pr_payload(pull, action="synchronize"))
        job = await h.wait_state(third["job_id"], JobState.SUCCEEDED)
        sent = json.dumps(h.anthropic.message_requests[-1].messages)
        assert "src/widget.py" in sent and "src/rewritten.py" in sent
        assert "Incremental review" not in h.reviews()[-1]["body"] and job.details.incremental is False


async def test_review_full_ignores_earlier_reviews(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull, first = await h.open_pr()
        await h.wait_state(first, JobState.SUCCEEDED)
        answer = await h.deliver("issue_comment", h.comment_payload(pull, "/review full"))
        job = await h.wait_state(answer["job_id"], JobState.SUCCEEDED)
        assert len(h.reviews()) == 2 and job.details.incremental is False


async def test_check_run_rerun_creates_a_new_review_of_that_head(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull, first = await h.open_pr()
        job = await h.wait_check_synced(first)
        [run] = h.check_runs(pull.head_sha)
        answer = await h.deliver("check_run", h.rerun_payload(pull, run))
        assert answer["outcome"] == "enqueued" and answer["job_id"] != first
        rerun = await h.wait_state(answer["job_id"], JobState.SUCCEEDED)
        assert rerun.head_sha == job.head_sha and len(h.reviews()) == 2
        suite = await h.deliver(
            "check_suite", h.rerun_payload(pull, {"id": 999, "head_sha": pull.head_sha}, event="check_suite")
        )
        assert suite["outcome"] == "enqueued"


async def test_each_rerun_click_gives_one_new_review_and_a_redelivery_none(tmp_path) -> None:
    # GitHub reuses the check run's (and the suite's) id across clicks: keyed on it, the second click was a duplicate.
    async with harness(tmp_path) as h:
        pull, first = await h.open_pr()
        await h.wait_check_synced(first)
        run = h.check_runs(pull.head_sha)[0]
        answers = []
        for click in ("click-1", "click-2"):
            answer = await h.deliver("check_run", h.rerun_payload(pull, run), delivery=click)
            assert answer["outcome"] == "enqueued", answer
            answers.append(answer)
            await h.wait_state(answer["job_id"], JobState.SUCCEEDED)
        again = await h.deliver("check_run", h.rerun_payload(pull, run), delivery="click-2")
        assert again["outcome"] == "duplicate-delivery" and len(h.reviews()) == 3


async def test_rerun_on_a_fork_pull_request_finds_it_through_the_runs_external_id(tmp_path) -> None:
    # GitHub lists no pull request on a fork's check run: the Re-run was ignored as "not attached to a pull request".
    async with harness(tmp_path) as h:
        pull, first = await h.open_pr()
        await h.wait_check_synced(first)
        [run] = h.check_runs(pull.head_sha)
        payload = h.rerun_payload(pull, run, fork=True)
        answer = await h.deliver("check_run", payload)
        assert answer["outcome"] == "enqueued", answer
        rerun = await h.wait_state(answer["job_id"], JobState.SUCCEEDED)
        assert rerun.pr_number == pull.number and len(h.reviews()) == 2
        # A run naming a job of another repository (or none) is not tied to this one's pull request.
        other = h.rerun_payload(pull, run, fork=True)
        other["repository"]["id"] += 1
        assert (await h.deliver("check_run", other))["outcome"] == "ignored"
        payload["check_run"]["external_id"] = "reviewer-app-job-999999"
        assert (await h.deliver("check_run", payload))["outcome"] == "ignored"


async def test_suite_rerun_on_a_fork_pull_request_finds_it_through_its_head(tmp_path) -> None:
    # GitHub lists no pull request on a fork's check suite either: "Re-run all checks" there was ignored.
    async with harness(tmp_path) as h:
        pull, first = await h.open_pr()
        await h.wait_check_synced(first)
        [run] = h.check_runs(pull.head_sha)
        payload = h.rerun_payload(pull, run, event="check_suite", fork=True)
        for click in ("click-1", "click-2"):  # each click one new review, as on a pull request of the repository
            answer = await h.deliver("check_suite", payload, delivery=click)
            assert answer["outcome"] == "enqueued", answer
            rerun = await h.wait_state(answer["job_id"], JobState.SUCCEEDED)
            assert (rerun.pr_number, rerun.head_sha) == (pull.number, pull.head_sha)
        assert len(h.reviews()) == 3
        # A head the app has no job for, or the same head in another repository, names no pull request.
        unknown = copy.deepcopy(payload)
        unknown["check_suite"]["head_sha"] = sha("a commit the app never saw")
        assert (await h.deliver("check_suite", unknown))["outcome"] == "ignored"
        elsewhere = copy.deepcopy(payload)
        elsewhere["repository"]["id"] += 1
        assert (await h.deliver("check_suite", elsewhere))["outcome"] == "ignored"


async def test_rerun_of_another_apps_check_is_ignored(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        payload = h.rerun_payload(pull, {"id": 5, "head_sha": pull.head_sha})
        payload["check_run"]["app"]["id"] = 1
        assert (await h.deliver("check_run", payload))["outcome"] == "ignored"


async def test_an_uninstalled_installations_pending_jobs_end_cancelled_without_api_calls(tmp_path) -> None:
    async with harness(tmp_path, REVIEWER_CONCURRENCY="1") as h:
        h.anthropic.script_slow_answer(3)
        busy, busy_id = await h.open_pr(number=1)
        await h.wait_state(busy_id, JobState.RUNNING)
        pulls = [await h.open_pr(number=n) for n in (2, 3)]

        async def queued_runs_shown() -> bool:  # the duties are idle: no request of theirs is in flight
            statuses = [(await h.job(j)).check_run_status for _, j in pulls]
            return all(len(h.check_runs(p.head_sha)) == 1 for p, _ in pulls) and statuses == ["queued:0"] * 2

        await eventually(queued_runs_shown)
        h.github.suspend_installation(h.installation_id)  # GitHub's side of the uninstall (tokens refused)
        h.github.remove_installation(h.installation_id)
        answer = await h.deliver("installation", h.installation_payload("deleted"))
        assert answer["outcome"] == "replied"  # confirmed with GitHub by the outbox, then applied

        async def cancelled() -> bool:
            return not await h.store.installation_active(h.installation_id)

        await eventually(cancelled)
        seen = len(h.github.requests)
        for job_id in [busy_id] + [j for _, j in pulls]:
            job = await h.job(job_id)
            assert job.state == JobState.CANCELLED and "uninstalled" in job.outcome
        # Let the duties run a few passes; nothing may reach GitHub for that installation.
        await h.svc.check_sync.run_pass()
        await h.svc.outbox.run_pass()
        late = [r for r in h.github.requests[seen:] if r.installation_id == h.installation_id]
        assert late == []
        again = await h.deliver("pull_request", h.pr_payload(pulls[0][0], action="reopened"))
        assert again["outcome"] == "ignored"


async def test_manual_requests_over_the_hourly_limit_are_refused_visibly(tmp_path) -> None:
    async with harness(tmp_path, REVIEWER_MAX_MANUAL_PER_PR_HOUR="1") as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        ok = await h.deliver("issue_comment", h.comment_payload(pull, "/review"))
        payload = h.comment_payload(pull, "/review")
        refused = await h.deliver("issue_comment", payload)
        assert ok["outcome"] == "enqueued" and refused["outcome"] == "refused" and "per hour" in refused["reason"]
        await eventually(lambda: _reactions(h, payload["comment"]["id"]))
        assert await _reactions(h, payload["comment"]["id"]) == ["-1"]


async def test_automatic_reviews_over_the_daily_limit_show_the_refusal_in_the_check_run(tmp_path) -> None:
    async with harness(tmp_path, REVIEWER_MAX_REVIEWS_PER_DAY="1") as h:
        _, first = await h.open_pr(number=1)
        pull2, second = await h.open_pr(number=2)
        job = await h.wait_check_synced(second)
        assert job.state == JobState.CANCELLED and "per day" in job.outcome
        [run] = h.check_runs(pull2.head_sha)
        assert "per day" in run["output"]["summary"]
        assert await h.wait_state(first, JobState.SUCCEEDED)


async def test_a_requested_review_whose_comment_was_deleted_still_runs(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        payload = h.comment_payload(pull, "/review", association="MEMBER")
        h.github.inject("POST", r"/issues/comments/\d+/reactions$", "error", status=404)
        answer = await h.deliver("issue_comment", payload)
        await h.wait_state(answer["job_id"], JobState.SUCCEEDED)
        assert len(h.reviews()) == 1


async def test_a_burst_of_requests_by_one_person_costs_one_permission_lookup(tmp_path) -> None:
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        for _ in range(3):
            answer = await h.deliver("issue_comment", h.comment_payload(pull, "/review", association="MEMBER"))
            await h.wait_state(answer["job_id"], JobState.SUCCEEDED)
        assert len(h.github.requests_matching("GET", r"/collaborators/maintainer/permission$")) == 1


async def test_a_push_past_compares_300_files_is_reviewed_in_full(tmp_path) -> None:
    # GitHub's compare stops at 300 files: the incremental review trusted it and never saw, nor listed, the rest.
    async with harness(tmp_path) as h:
        pull, first = await h.open_pr()
        await h.wait_state(first, JobState.SUCCEEDED)
        old = pull.head_sha
        many = [added_file(f"gen/m{i:03}.py", [f"X = {i}"]) for i in range(301)]
        h.github.advance_head(REPO, 1, files=[SOURCE, *many])
        h.github.set_compare_files(REPO, old, pull.head_sha, many)
        second = await h.deliver("pull_request", h.pr_payload(pull, action="synchronize"))
        job = await h.wait_state(second["job_id"], JobState.SUCCEEDED)
        assert "Incremental review" not in h.reviews()[-1]["body"] and job.details.incremental is False


async def test_a_pull_request_over_githubs_3000_listed_files_says_what_was_not_seen(tmp_path) -> None:
    # GitHub lists 3,000 files of a pull request and cuts the rest silently; the review said nothing of them.
    async with harness(tmp_path) as h:
        files = [added_file(f"gen/f{i:04}.py", [f"X = {i}"]) for i in range(3002)]
        _, job_id = await h.open_pr(files=files)
        await h.wait_state(job_id, JobState.SUCCEEDED)
        assert "Not reviewed: 2 of the 3002 changed files." in h.reviews()[-1]["body"]


async def test_rerun_respects_the_hourly_and_daily_limits(tmp_path) -> None:
    # Re-run ignored both budget limits (the help text said it did not).
    async with harness(tmp_path, REVIEWER_MAX_MANUAL_PER_PR_HOUR="1", REVIEWER_MAX_REVIEWS_PER_DAY="3") as h:
        pull, first = await h.open_pr()
        await h.wait_check_synced(first)
        run = h.check_runs(pull.head_sha)[0]
        one = await h.deliver("check_run", h.rerun_payload(pull, run))
        assert one["outcome"] == "enqueued"
        two = await h.deliver("check_run", h.rerun_payload(pull, run))
        assert two["outcome"] == "refused" and "per pull request per hour" in two["reason"]
        await h.wait_state(one["job_id"], JobState.SUCCEEDED)
        other, _ = await h.open_pr(number=2)
        daily = await h.deliver("check_run", h.rerun_payload(other, run))
        assert daily["outcome"] == "refused" and "per day" in daily["reason"]


async def _setting(h, key: str, value: str) -> None:
    async def applied() -> bool:
        return await h.store.get_setting(key) == value

    await eventually(applied)


async def test_pause_by_a_read_only_collaborator_is_refused_and_changes_nothing(tmp_path) -> None:
    # pause and resume were obeyed on the association alone: COLLABORATOR and MEMBER do not imply write access.
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        h.github.set_permission(REPO, "reader", "read")
        payload = h.comment_payload(pull, "/review pause", login="reader", association="COLLABORATOR")
        assert (await h.deliver("issue_comment", payload))["outcome"] == "replied"
        comment_id = payload["comment"]["id"]

        async def refused() -> bool:
            return any(r["content"] == "-1" for r in h.github.reactions.get(comment_id, []))

        await eventually(refused)
        assert await h.store.get_setting(pause_key(h.github.repos[REPO].id, 1)) is None
        pushed = await h.deliver("pull_request", h.pr_payload(pull, action="opened"))
        assert pushed["outcome"] == "enqueued"


async def test_a_read_only_commenter_cannot_use_up_a_maintainers_hourly_allowance(tmp_path) -> None:
    # The hourly allowance was the pull request's: a read-only collaborator's `/review` (refused later, at the worker)
    # used it up, and the maintainer's own request was refused.
    async with harness(tmp_path, REVIEWER_MAX_MANUAL_PER_PR_HOUR="1") as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        h.github.set_permission(REPO, "reader", "read")
        theirs = await h.deliver(
            "issue_comment", h.comment_payload(pull, "/review", login="reader", association="COLLABORATOR")
        )
        assert theirs["outcome"] == "enqueued"
        again = await h.deliver(
            "issue_comment", h.comment_payload(pull, "/review", login="reader", association="COLLABORATOR")
        )
        assert again["outcome"] == "refused"
        mine = await h.deliver("issue_comment", h.comment_payload(pull, "/review"))
        assert mine["outcome"] == "enqueued", mine
        await h.wait_state(mine["job_id"], JobState.SUCCEEDED)
        skipped = await h.wait_state(theirs["job_id"], JobState.CANCELLED)
        assert "may not request reviews" in (skipped.outcome or "") and len(h.reviews()) == 1


@pytest.mark.parametrize("relabelled", ["installation", "installation_repositories", "pull_request", "check_run"])
async def test_a_signed_body_relabelled_as_another_event_is_malformed(tmp_path, relabelled: str) -> None:
    # X-GitHub-Event is not signed: an issue_comment body sent as `installation` was read as "uninstalled", cancelled
    # every pending job and marked the installation inactive.
    async with harness(tmp_path) as h:
        pull, job_id = await h.open_pr()
        body = json.dumps(h.comment_payload(pull, "thanks!") | {"action": "deleted"}).encode()
        headers = webhook_headers(body, event=relabelled, as_github_sends=False)  # the point: not what GitHub sends
        resp = await h.client.post("/api/github/webhooks", data=body, headers=headers)
        assert resp.status == 400 and f"not a {relabelled} payload" in (await resp.json())["error"]
        await h.wait_state(job_id, JobState.SUCCEEDED)
        assert await h.store.installation_active(h.installation_id)


@pytest.mark.parametrize("action", ["deleted", "suspend"])
async def test_a_replayed_uninstall_of_an_installation_github_shows_active_cancels_nothing(tmp_path, action) -> None:
    # A captured `installation` body sent again (new delivery id) cancelled every pending job and made the app ignore
    # the installation's webhooks from then on.
    async with harness(tmp_path) as h:
        pull, job_id = await h.open_pr()
        answer = await h.deliver("installation", h.installation_payload(action))
        assert answer["outcome"] == "replied" and not answer.get("cancelled")

        async def confirmed() -> bool:
            return await h.store.pending_effects() == [] and bool(
                h.github.requests_matching("GET", r"/app/installations/\d+$")
            )

        await eventually(confirmed)
        assert await h.store.installation_active(h.installation_id)
        assert (await h.wait_state(job_id, JobState.SUCCEEDED)).review_id is not None
        assert (await h.deliver("pull_request", h.pr_payload(pull, "synchronize")))["outcome"] != "ignored"


async def test_a_help_comment_sent_again_after_the_quiet_window_gets_no_second_reply(tmp_path) -> None:
    # Replies were keyed on their outbox row: a captured `/review help` body sent again under a new delivery id once
    # the quiet window had passed made the app answer it a second time.
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        payload = h.comment_payload(pull, "/review help")
        await h.deliver("issue_comment", payload)

        async def settled() -> bool:
            return not await h.store.pending_effects()

        await eventually(settled)
        decision = decide_comment("created", payload, app_slug="reviewer-app", bot_login="reviewer-app[bot]")
        later = time.time() + 2 * HELP_QUIET_SECONDS
        replayed = await h.store.admit(
            Delivery("replayed", "issue_comment", "created"), decision, now=later, max_attempts=3
        )
        assert replayed.outcome == "replied"
        await eventually(settled)
        assert len(_bot_replies(h, 1)) == 1


@pytest.mark.parametrize("association", ["MEMBER", "OWNER"])
async def test_a_replayed_pause_after_a_resume_pauses_nothing(tmp_path, association: str) -> None:
    # A captured signed `/review pause` body, sent again under a new delivery id after a `/review resume`, paused the
    # pull request again: the delivery id is not signed. A command applies once per comment (its id is signed).
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        key = pause_key(h.github.repos[REPO].id, 1)
        login = "octo-org" if association == "OWNER" else "maintainer"
        pause = h.comment_payload(pull, "/review pause", login=login, association=association)
        assert (await h.deliver("issue_comment", pause))["outcome"] in ("paused", "replied")
        await _setting(h, key, "1")
        resume = h.comment_payload(pull, "/review resume", association="OWNER", login="octo-org")
        assert (await h.deliver("issue_comment", resume))["outcome"] == "resumed"
        replayed = await h.deliver("issue_comment", pause, delivery="captured-and-replayed")
        assert replayed["outcome"] == "duplicate-command", replayed
        assert (await h.deliver("issue_comment", resume))["outcome"] == "duplicate-command"

        async def outbox_done() -> bool:  # a replayed member's pause would have been applied by now
            return await h.store.pending_effects() == []

        await eventually(outbox_done)
        assert await h.store.get_setting(key) == "0"
        pushed = await h.deliver("pull_request", h.pr_payload(pull, action="opened"))
        assert pushed["outcome"] == "enqueued"


@pytest.mark.parametrize("by", ["owner", "member"])
async def test_resume_reviews_the_head_skipped_while_paused(tmp_path, by: str) -> None:
    # `/review resume` only wrote the setting: the skipped head stayed unreviewed, its check run still saying "paused;
    # comment /review resume" after the user did exactly that.
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        owner = {"association": "OWNER", "login": "octo-org"}
        assert (await h.deliver("issue_comment", h.comment_payload(pull, "/review pause", **owner)))["outcome"] == (
            "paused"
        )
        h.github.advance_head(REPO, 1)
        pushed = await h.deliver("pull_request", h.pr_payload(pull, action="synchronize"))
        assert pushed["outcome"] == "skipped"
        await h.wait_check_synced(pushed["job_id"])
        who = owner if by == "owner" else {}  # a member with write access: applied once the outbox confirms it
        resumed = await h.deliver("issue_comment", h.comment_payload(pull, "/review resume", **who))
        assert resumed["outcome"] == ("resumed" if by == "owner" else "replied")

        async def queued_again() -> Any:
            jobs = await h.store.list_jobs(repo=REPO, pr_number=1, limit=50)
            return next((j for j in jobs if j.head_sha == pull.head_sha and j.id != pushed["job_id"]), None)

        job = await eventually(queued_again)
        await h.wait_state(job.id, JobState.SUCCEEDED)
        assert [r["commit_id"] for r in h.reviews()] == [pull.head_sha]
        await h.wait_check_synced(job.id)
        runs = sorted(h.check_runs(pull.head_sha), key=lambda r: r["id"])
        assert runs[-1]["conclusion"] != "skipped" and "paused" not in runs[-1]["output"]["summary"]
        # Resuming again queues nothing more: the head has its review.
        again = h.comment_payload(pull, "/review resume", **owner)
        assert (await h.deliver("issue_comment", again)).get("job_id") is None


@pytest.mark.parametrize("pauser", ["owner", "member"])
async def test_a_pause_written_before_a_resume_never_undoes_it_whatever_order_it_arrives_in(tmp_path, pauser) -> None:
    # GitHub does not deliver in order, and a member's pause applies only once the outbox has confirmed their access:
    # a pause written before a resume but applied after it left the pull request paused, although the last word on
    # it was "resume". The later written command holds.
    async with harness(tmp_path) as h:
        pull = h.github.add_pull(REPO, 1, files=[SOURCE])
        key = pause_key(h.github.repos[REPO].id, 1)
        who = {"association": "OWNER", "login": "octo-org"} if pauser == "owner" else {}
        pause = h.comment_payload(pull, "/review pause", **who)
        resume = h.comment_payload(pull, "/review resume", association="OWNER", login="octo-org")
        now = time.time()
        pause["comment"]["created_at"] = iso(now - 20)
        resume["comment"]["created_at"] = iso(now - 10)
        assert (await h.deliver("issue_comment", resume))["outcome"] == "resumed"
        late = await h.deliver("issue_comment", pause)
        assert late["outcome"] == ("ignored" if pauser == "owner" else "replied"), late

        async def outbox_done() -> bool:  # a member's pause has been checked and (not) applied by now
            return await h.store.pending_effects() == []

        await eventually(outbox_done)
        assert await h.store.get_setting(key) == "0"
        h.github.advance_head(REPO, 1)
        pushed = await h.deliver("pull_request", h.pr_payload(pull, action="synchronize"))
        assert pushed["outcome"] == "enqueued", pushed
        # A pause written after the resume still pauses.
        again = h.comment_payload(pull, "/review pause", association="OWNER", login="octo-org")
        again["comment"]["created_at"] = iso(now - 5)
        assert (await h.deliver("issue_comment", again))["outcome"] == "paused"
        assert await h.store.get_setting(key) == "1"
