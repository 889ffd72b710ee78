"""Dry run, end to end against the fakes: with REVIEWER_DRY_RUN=1, or `dry_run: true` in a repository's
.github/reviewer.yml, every review and answer runs (the model is asked, the answer stored) and nothing is published:
no review, no inline comment, no reply or resolution in a thread, no answer. The check run still shows the status and
says that nothing was posted; `reviewer-app jobs show` and the dashboard show what would have been."""

from __future__ import annotations

import html
from typing import Any

from reviewer_app.admin import Admin
from reviewer_app.admin_text import render_job
from reviewer_app.core.markers import parse_markers
from reviewer_app.core.states import JobState
from reviewer_app.review.repo_config import CONFIG_PATH
from tests.fakes.github.graphql import is_resolved, thread_replies
from tests.harness import REPO, Harness, harness
from tests.review.test_findings_e2e import PATH, UNCLOSED, V1, push, revision_1

FINDING = {"path": "src/widget.py", "line": 4, "severity": "critical", "body": "f2 returns a constant & more."}
DASHBOARD_TOKEN = "dashboard-token-0123456789"


def published(h: Harness) -> dict[str, int]:
    """Everything the app could have written on the pull request, counted."""
    return {
        "reviews": len(h.reviews()),
        "review comments": len(h.github.review_comments_for(REPO, 1)),
        "issue comments": len(h.github.issue_comments_for(REPO, 1)),
        "thread replies": h.github.counters["thread_replies"] + h.github.counters["review_replies_created"],
        "threads resolved": h.github.counters["threads_resolved"],
    }


NOTHING = {"reviews": 0, "review comments": 0, "issue comments": 0, "thread replies": 0, "threads resolved": 0}


async def dry_review(h: Harness) -> Any:
    h.anthropic.script_tool_answer({"summary": "One problem: f2.", "comments": [FINDING]})
    pull, job_id = await h.open_pr()
    job = await h.wait_check_synced(job_id)
    assert job.state == JobState.SUCCEEDED, job.last_error
    return pull, job


async def test_the_server_dry_run_publishes_nothing_and_jobs_show_has_the_would_be_review(tmp_path) -> None:
    async with harness(tmp_path, REVIEWER_DRY_RUN="1") as h:
        pull, job = await dry_review(h)
        assert len(h.anthropic.message_requests) == 1  # everything ran: the model was asked
        assert job.answer is not None and job.review_id is None
        assert published(h) == NOTHING
        would = job.details.would_publish
        assert would is not None and would.kind == "review" and would.why == "REVIEWER_DRY_RUN is set"
        assert "One problem: f2." in would.body
        assert [m.head_sha for m in parse_markers(would.body)] == [pull.head_sha]
        [inline] = would.comments
        assert (inline["path"], inline["line"], inline["side"]) == ("src/widget.py", 4, "RIGHT")
        assert "f2 returns a constant & more." in inline["body"]
        assert job.outcome.startswith("dry run (REVIEWER_DRY_RUN is set): review not posted (1 finding(s)")

        # The check run shows the status and says nothing was posted, and nothing of what was found.
        [run] = h.check_runs(pull.head_sha)
        assert (run["status"], run["conclusion"]) == ("completed", "neutral")
        assert run["output"]["title"] == "Dry run: review not posted"
        assert "nothing was posted" in run["output"]["summary"] and "returns a constant" not in run["output"]["summary"]

        # `reviewer-app jobs show`: the review as GitHub would have got it, and its inline comment.
        shown = await Admin(h.store).show(job.id)
        assert shown["details"]["would_publish"]["body"] == would.body
        text = render_job(shown, now=job.finished_at)
        assert "would have posted (dry run: REVIEWER_DRY_RUN is set), the review:" in text
        assert "    One problem: f2." in text
        assert "  src/widget.py line 4 (RIGHT):" in text and "f2 returns a constant & more." in text


async def test_the_dashboard_shows_the_would_be_review_as_text(tmp_path) -> None:
    dashboard = {"REVIEWER_DASHBOARD_TOKEN": DASHBOARD_TOKEN, "REVIEWER_SECURE_COOKIES": "off"}
    async with harness(tmp_path, REVIEWER_DRY_RUN="1", **dashboard) as h:
        _, job = await dry_review(h)
        login = await h.client.post("/dashboard/login", data={"token": DASHBOARD_TOKEN}, allow_redirects=False)
        assert login.status == 303
        page = await h.client.get(f"/dashboard/jobs/{job.id}")
        assert page.status == 200
        text = await page.text()
        assert "Would have posted (dry run)" in text and "Nothing was posted: REVIEWER_DRY_RUN is set." in text
        assert "One problem: f2." in text
        # What the model wrote is shown as text, escaped: never markup.
        assert "f2 returns a constant &amp; more." in text
        assert html.escape(job.details.would_publish.body, quote=True) in text
        assert "src/widget.py line 4 (RIGHT)" in text


async def test_a_repository_in_dry_run_publishes_nothing_and_tends_no_thread(tmp_path) -> None:
    async with harness(tmp_path) as h:
        # A first review, published (no dry run yet): the app's thread on the unclosed file.
        pull, (unclosed, _) = await revision_1(h)
        before = published(h)
        assert before["reviews"] == 1 and before["review comments"] == 2
        # The repository turns dry run on; the next push fixes the file. Not in dry run the app would post a review
        # and reply in its thread and resolve it (tests/review/test_findings_e2e.py).
        h.github.set_file(REPO, CONFIG_PATH, "dry_run: true\n", ref=pull.base_ref)
        fixed = [
            *V1[:3],
            "    with open(path) as f:",
            "        data = f.read()",
            *V1[4:7],
            "    return len(xs) / 1",
            "",
        ]
        new = {"path": PATH, "line": 1, "side": "RIGHT", "body": "A new finding.", "severity": "warning"}
        job_id = await push(h, pull, fixed, {"summary": "Fine now, but one thing.", "comments": [new]})

        job = await h.job(job_id)
        assert published(h) == before
        assert not is_resolved(h.github, unclosed) and thread_replies(h.github, REPO, 1, unclosed) == []
        assert not any("mutation" in d for d in h.github.review_threads.documents)  # no reply, no resolution
        would = job.details.would_publish
        assert would is not None and would.why == f"dry_run: true in {CONFIG_PATH}"
        assert "Fine now, but one thing." in would.body and [c["line"] for c in would.comments] == [1]
        [run] = h.check_runs(job.head_sha)
        assert run["output"]["title"] == "Dry run: review not posted"
        assert UNCLOSED not in run["output"]["summary"]

        # An answer in the app's thread is written, and kept: the repository's setting holds for answers too.
        from tests.review.test_replies import reply_payload

        h.anthropic.script_answer("Because the file handle leaks.")
        asked = reply_payload(h, pull, unclosed, "Why does this matter?", login=pull.user, association="OWNER")
        admitted = await h.deliver("pull_request_review_comment", asked)
        answer_job = await h.wait_state(admitted["job_id"], JobState.SUCCEEDED, JobState.FAILED)
        assert answer_job.state == JobState.SUCCEEDED, answer_job.last_error
        held = answer_job.details.would_publish
        assert held is not None and held.kind == "answer" and "the file handle leaks" in held.body
        assert answer_job.outcome.startswith("dry run (dry_run: true in .github/reviewer.yml): answer not posted")
        assert [r["user"]["login"] for r in thread_replies(h.github, REPO, 1, unclosed)] == [pull.user]


async def test_the_server_dry_run_holds_back_an_answer_in_the_conversation(tmp_path) -> None:
    async with harness(tmp_path, REVIEWER_DRY_RUN="1") as h:
        pull, _ = await dry_review(h)
        h.anthropic.script_answer("The widget module has no tests yet.")
        payload = h.comment_payload(pull, "@reviewer-app are there tests for this?")
        before = published(h)
        admitted = await h.deliver("issue_comment", payload)
        assert admitted["outcome"] == "enqueued"
        job = await h.wait_state(admitted["job_id"], JobState.SUCCEEDED, JobState.FAILED)
        assert job.state == JobState.SUCCEEDED, job.last_error
        assert published(h) == before  # only the question itself, which the test posted
        assert job.answer is not None and "no tests yet" in job.answer.summary
        assert job.details.would_publish is not None and "no tests yet" in job.details.would_publish.body
        assert "answer" in render_job(await Admin(h.store).show(job.id), now=job.finished_at)


async def test_without_dry_run_the_same_review_is_published(tmp_path) -> None:
    # The control: the settings above are what kept the review back.
    async with harness(tmp_path) as h:
        h.anthropic.script_tool_answer({"summary": "One problem: f2.", "comments": [FINDING]})
        pull, job_id = await h.open_pr()
        job = await h.wait_check_synced(job_id)
        assert job.details.would_publish is None and job.review_id is not None
        assert published(h)["reviews"] == 1 and published(h)["review comments"] == 1
        [run] = h.check_runs(pull.head_sha)
        assert run["output"]["title"] != "Dry run: review not posted"
