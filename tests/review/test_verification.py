"""The evidence check and the verification pass, end to end against the fakes: what is withheld and why, the
verifier's model and its own kind of usage, its checkpoint (a retry never pays it twice), its batch, the repository
turning it off, and a verifier that never answers in shape."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from reviewer_app.core.states import JobState
from tests.fakes.github import pull_file
from tests.harness import REPO, Harness, harness
from tests.helpers import eventually

WIDGET = "src/widget.py"  # tests/harness.SOURCE: def f1(): return 1 ... def f5(): return 5, one per two lines


def finding(line: int, severity: str, body: str, quote: str, failure: str = "f() returns the wrong value.") -> dict:
    return {"path": WIDGET, "line": line, "severity": severity, "body": body, "quote": quote, "failure": failure}


ANSWER = {
    "summary": "Check the return values.",
    "comments": [
        finding(4, "critical", "f2 returns the wrong value.", "return 2"),
        finding(6, "warning", "f3 ignores errors.", "    return 3"),
        finding(8, "warning", "f4 may overflow.", "return 4"),
        finding(9, "warning", "f5 reads a closed file.", "data = handle.read()"),  # code that is not there
    ],
}
VERDICTS = [
    {"id": "F1", "verdict": "confirmed", "confidence": 95, "reason": "Traced: callers add one."},
    {"id": "F2", "verdict": "refuted", "confidence": 85, "reason": "Nothing can raise in `return 3`."},
    {"id": "F3", "verdict": "uncertain", "confidence": 40, "reason": "Depends on the caller's types."},
]


# The harness's widget with its first return changed: a modified file, whose head the evidence check reads.
WIDGET_TEXT = "".join(f"def f{i}():\n    return {i}\n" for i in range(1, 6))
MODIFIED = pull_file(WIDGET, "@@ -1,4 +1,4 @@\n def f1():\n-    return 0\n+    return 1\n def f2():\n     return 2")


@contextlib.asynccontextmanager
async def verifying(tmp_path: Any, **env: str) -> AsyncIterator[Harness]:
    async with harness(tmp_path, REVIEWER_VERIFY="1", REVIEWER_VERIFY_MODEL="claude-haiku-4-5", **env) as h:
        yield h


def user_text(request: Any) -> str:
    content = request.messages[0]["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


async def test_only_confirmed_confident_findings_with_real_quotes_are_published_and_the_rest_is_accounted(
    tmp_path,
) -> None:
    async with verifying(tmp_path) as h:
        h.anthropic.script_tool_answer(ANSWER)
        h.anthropic.script_verify_answer(VERDICTS)
        pull, job_id = await h.open_pr()
        await h.wait_check_synced(job_id)

        [review_request] = h.anthropic.review_requests
        assert review_request.body["model"] == "claude-sonnet-4-5"
        schema = review_request.tools[0]["input_schema"]["properties"]["comments"]["items"]
        assert {"quote", "failure"} <= set(schema["required"])
        [verify] = h.anthropic.verify_requests
        assert verify.body["model"] == "claude-haiku-4-5"
        asked = user_text(verify)
        # The invented finding never reaches the verifier; the others come with their code and predicted failure.
        assert asked.count("<finding id=") == 3 and "f5 reads a closed file." not in asked
        assert (
            '<code path="src/widget.py" at="head"' in asked
            and "<failure>f() returns the wrong value.</failure>" in asked
        )

        assert [(c["line"], c["body"].split("\n\n")[1]) for c in h.github.review_comments_for(REPO, 1)] == [
            (4, "f2 returns the wrong value.")
        ]
        [run] = h.check_runs(pull.head_sha)
        summary = run["output"]["summary"]
        assert run["output"]["title"] == "Reviewed 1 file: 1 finding (1 critical)"
        fold = summary.split("<details>\n<summary>3 findings held back: why</summary>\n\n", 1)[1].split("</details>")[0]
        assert "- 1 quoted code that is not in the file (invented)" in fold
        assert "- 1 refuted by the verification pass" in fold
        assert "- 1 below the confidence threshold (50 of 100)" in fold
        assert "f3 ignores errors. _(refuted, confidence 85: Nothing can raise in `return 3`.)_" in fold
        assert "f4 may overflow. _(low confidence, confidence 40: Depends on the caller's types.)_" in fold
        assert "f5 reads a closed file. _(invented quote)_" in fold

        job = await h.job(job_id)
        assert job.answer is not None and job.answer.verified_by == "claude-haiku-4-5"
        assert [(c.line, c.verdict, c.confidence) for c in job.answer.comments] == [(4, "confirmed", 95)]
        usage = {(r["kind"], r["model"]): r for r in await h.store.usage_by_repo(since=0)}
        assert set(usage) == {("reviews", "claude-sonnet-4-5"), ("verification", "claude-haiku-4-5")}
        assert usage[("verification", "claude-haiku-4-5")]["input_tokens"] > 0
        [attempt] = await h.store.attempts_of(job_id)
        assert attempt.model == "claude-sonnet-4-5"  # the review's model; the verifier's tokens are apart


async def test_the_threshold_and_the_cap_are_the_repositorys(tmp_path) -> None:
    answer = {
        "summary": "Several.",
        "comments": [finding(2 * i, "warning", f"f{i} is wrong.", f"return {i}") for i in range(1, 6)],
    }
    verdicts = [
        {"id": f"F{i}", "verdict": "uncertain", "confidence": 30 + 10 * i, "reason": "Maybe."} for i in range(1, 6)
    ]
    async with verifying(tmp_path) as h:
        h.github.set_file(REPO, ".github/reviewer.yml", "min_confidence: 45\nmax_comments: 2\n")
        h.anthropic.script_tool_answer(answer)
        h.anthropic.script_verify_answer(verdicts)
        pull, job_id = await h.open_pr()
        await h.wait_check_synced(job_id)
        # F1 (40) is under 45; of the rest the most confident two go inline (F5: 80, F4: 70), F3 and F2 are folded.
        assert [c["line"] for c in h.github.review_comments_for(REPO, 1)] == [10, 8]
        [review] = h.reviews()
        folded = review["body"].split("<summary>2 more findings, folded</summary>", 1)[1].split("</details>")[0]
        assert folded.index("f3 is wrong.") < folded.index("f2 is wrong.")
        [run] = h.check_runs(pull.head_sha)
        assert "- 2 past the cap of 2 comments (listed folded in the review)" in run["output"]["summary"]
        assert "- 1 below the confidence threshold (45 of 100)" in run["output"]["summary"]


async def test_a_retry_pays_neither_the_review_nor_the_verification_twice(tmp_path) -> None:
    async with verifying(tmp_path) as h:
        h.anthropic.script_tool_answer(ANSWER)
        h.anthropic.script_verify_error(529, "overloaded_error", "Overloaded")  # the first attempt's verification
        h.anthropic.script_verify_answer(VERDICTS)
        # The first attempt to post the review fails after the verification answered: the answer is stored by then.
        h.github.inject("POST", r"/pulls/\d+/reviews$", "error", times=1)
        pull, job_id = await h.open_pr()
        job = await h.wait_state(job_id, JobState.SUCCEEDED, timeout=30)
        assert job.attempts == 3
        assert len(h.anthropic.review_requests) == 1  # the review's answer was checkpointed before verifying
        assert len(h.anthropic.verify_requests) == 2  # the failed call, then the answer the last attempt reused
        assert [c["line"] for c in h.github.review_comments_for(REPO, 1)] == [4]


async def test_the_verification_of_a_batched_review_is_batched_too(tmp_path) -> None:
    async with verifying(
        tmp_path, REVIEWER_BATCH="1", REVIEWER_BATCH_GATHER_SECONDS="0.2", REVIEWER_BATCH_POLL_SECONDS="0.05"
    ) as h:
        h.github.set_file(REPO, ".github/reviewer.yml", "batch: true\n")
        h.anthropic.script_tool_answer(ANSWER)
        h.anthropic.script_verify_answer(VERDICTS)
        pull, job_id = await h.open_pr()
        await h.wait_state(job_id, JobState.SUCCEEDED, timeout=30)
        assert h.anthropic.message_requests == []  # nothing asked interactively
        review_batch, verify_batch = h.anthropic.batch_creates
        [params] = [r["params"] for r in verify_batch.body["requests"]]
        assert params["model"] == "claude-haiku-4-5" and params["tool_choice"]["name"] == "submit_verdicts"
        assert [c["line"] for c in h.github.review_comments_for(REPO, 1)] == [4]
        requests = await h.store.batch_requests_of(job_id)
        assert sorted(r.part_key.startswith("verify-") for r in requests) == [False, True]
        usage = {(r["kind"], r["batched"]) for r in await h.store.usage_by_repo(since=0)}
        assert usage == {("reviews", True), ("verification", True)}
        assert [a.outcome for a in await h.store.attempts_of(job_id)] == ["deferred", "deferred", "succeeded"]


async def test_a_title_edited_while_the_verification_waits_on_its_batch_sends_no_second_verification(
    tmp_path,
) -> None:
    # The verification's key hashed the title, the description and the learnings: an edit while its batch was out
    # made the finished result match no request, and a second verification was sent.
    async with verifying(
        tmp_path, REVIEWER_BATCH="1", REVIEWER_BATCH_GATHER_SECONDS="0.2", REVIEWER_BATCH_POLL_SECONDS="0.05"
    ) as h:
        h.github.set_file(REPO, ".github/reviewer.yml", "batch: true\n")
        h.anthropic.script_tool_answer(ANSWER)
        h.anthropic.script_verify_answer(VERDICTS)
        h.anthropic.script_verify_answer(VERDICTS)  # what a second verification would be answered
        h.anthropic.hold_batches = True
        pull, job_id = await h.open_pr()
        await _wait_batched(h, job_id, review=True)
        h.anthropic.end_batches()
        await _wait_batched(h, job_id, review=False)
        pull.title, pull.body = "A better title", "Rewritten by a bot."
        h.anthropic.hold_batches = False
        h.anthropic.end_batches()
        await h.wait_state(job_id, JobState.SUCCEEDED, timeout=30)
        verifications = [
            r for batch in h.anthropic.batch_creates for r in batch.body["requests"] if _verifies(r["params"])
        ]
        assert len(verifications) == 1 and h.anthropic.message_requests == []
        assert [c["line"] for c in h.github.review_comments_for(REPO, 1)] == [4]


def _verifies(params: dict[str, Any]) -> bool:
    return params.get("tool_choice", {}).get("name") == "submit_verdicts"


async def _wait_batched(h: Harness, job_id: int, *, review: bool) -> None:
    """Until the job's review part (``review``) or its verification is in a batch."""

    async def out() -> bool:
        rows = await h.store.batch_requests_of(job_id)
        return any(r.part_key.startswith("verify-") != review for r in rows)

    await eventually(out, timeout=15)


async def test_a_repository_can_turn_verification_off_and_the_evidence_check_still_runs(tmp_path) -> None:
    async with verifying(tmp_path) as h:
        h.github.set_file(REPO, ".github/reviewer.yml", "verify: false\n")
        h.anthropic.script_tool_answer(ANSWER)
        pull, job_id = await h.open_pr()
        await h.wait_check_synced(job_id)
        assert h.anthropic.verify_requests == []
        assert sorted(c["line"] for c in h.github.review_comments_for(REPO, 1)) == [4, 6, 8]
        job = await h.job(job_id)
        assert job.answer is not None and job.answer.verified_by == ""
        assert [w.reason for w in job.answer.withheld] == ["invented quote"]


async def test_an_answer_is_kept_before_the_evidence_check_reads_so_a_rate_limit_there_costs_no_second_model_call(
    tmp_path,
) -> None:
    # With verification off and one part, the answer was kept only once checked: a rate-limited read in the evidence
    # check (no context lines: the file was not read before the model answered) lost it, and the retry paid again.
    async with harness(tmp_path, REVIEWER_VERIFY="0", REVIEWER_CONTEXT_LINES="0") as h:
        limited: list[object] = []

        def answer_and_limit_reads(body: dict[str, Any]) -> dict[str, Any]:
            if not limited:  # the next read of the file, once
                limited.append(h.github.inject("GET", rf"/contents/{WIDGET}$", "secondary_rate_limit", retry_after=1))
            return ANSWER

        h.anthropic.responder = answer_and_limit_reads
        pull = h.github.add_pull(REPO, 1, files=[MODIFIED])
        h.github.set_file(REPO, WIDGET, WIDGET_TEXT, ref=pull.head_sha)
        job_id = (await h.deliver("pull_request", h.pr_payload(pull)))["job_id"]
        job = await h.wait_state(job_id, JobState.SUCCEEDED, timeout=30)
        assert [a.outcome for a in await h.store.attempts_of(job_id)] == ["deferred", "succeeded"]
        assert len(h.anthropic.review_requests) == 1
        assert job.answer is not None and [w.reason for w in job.answer.withheld] == ["invented quote"]


async def test_a_true_finding_on_removed_code_of_a_crlf_file_is_verified_with_its_code_and_published(tmp_path) -> None:
    # GitHub's patch carries no "\r", the file read at the head keeps them: the base was not rebuilt, so the finding
    # was withheld as invented and the verifier was shown no code for it (an LF file: kept).
    async with verifying(tmp_path) as h:
        removed = finding(2, "warning", "f1 returned 0 on purpose.", "    return 0")
        h.anthropic.script_tool_answer({"summary": "One question.", "comments": [removed]})
        pull = h.github.add_pull(REPO, 1, files=[MODIFIED])
        h.github.set_file(REPO, WIDGET, WIDGET_TEXT.replace("\n", "\r\n"), ref=pull.head_sha)
        job_id = (await h.deliver("pull_request", h.pr_payload(pull)))["job_id"]
        job = await h.wait_state(job_id, JobState.SUCCEEDED, timeout=30)
        assert job.answer is not None and job.answer.withheld == ()
        [asked] = h.anthropic.verify_requests
        assert 'at="base"' in user_text(asked) and "    2 -     return 0\n" in user_text(asked)
        assert [(c["side"], c["line"]) for c in h.github.review_comments_for(REPO, 1)] == [("LEFT", 2)]


async def test_a_verifier_that_never_answers_in_shape_publishes_the_findings_unverified(tmp_path) -> None:
    async with verifying(tmp_path, REVIEWER_MALFORMED_RETRIES="1") as h:
        h.anthropic.script_tool_answer(ANSWER)
        h.anthropic.script_verify_malformed(times=2)
        pull, job_id = await h.open_pr()
        job = await h.wait_state(job_id, JobState.SUCCEEDED)
        assert len(h.anthropic.verify_requests) == 2
        retry = h.anthropic.verify_requests[1].messages
        assert "Invalid submit_verdicts input" in json.dumps(retry[-1])
        assert sorted(c["line"] for c in h.github.review_comments_for(REPO, 1)) == [4, 6, 8]
        assert job.answer is not None and job.answer.verified_by == ""


async def test_a_review_without_findings_asks_no_verifier(tmp_path) -> None:
    async with verifying(tmp_path) as h:
        pull, job_id = await h.open_pr()  # the fake's default answer: no findings
        await h.wait_state(job_id, JobState.SUCCEEDED)

        async def posted() -> bool:
            return bool(h.reviews())

        await eventually(posted)
        assert len(h.anthropic.message_requests) == 1 and h.anthropic.verify_requests == []
