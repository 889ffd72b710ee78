"""`passes: N` end to end against the fakes: N independent review requests over the same context (its files in other
orders), their findings merged into one union that is verified once, each pass's cost on record and in the check run,
a retry that pays no finished pass again, a batched review sending each pass as a request of its own, and the vote
between the passes."""

from __future__ import annotations

import re
from typing import Any

from reviewer_app.core.states import JobState
from tests.fakes.github.diffs import added_file
from tests.harness import REPO, harness

FILES = [
    added_file(f"src/{name}.py", [line for i in range(1, 6) for line in (f"def {name}{i}():", f"    return {i}")])
    for name in ("alpha", "beta", "gamma")
]


def finding(path: str, line: int, body: str, quote: str, severity: str = "warning") -> dict[str, Any]:
    return {"path": path, "line": line, "severity": severity, "body": body, "quote": quote, "failure": "It fails."}


LEAK = finding("src/alpha.py", 2, "alpha1 returns a constant where the caller expects the parsed value.", "return 1")
PASS_ANSWERS = [
    {"summary": "Pass one.", "comments": [LEAK, finding("src/beta.py", 4, "beta2 skips validation.", "return 2")]},
    {
        "summary": "Pass two.",
        "comments": [
            # The same problem as pass one's first finding, one line off and in other words, called critical.
            finding(
                "src/alpha.py", 1, "The caller expects the parsed value but alpha1 returns a constant.", "def alpha1():"
            )
            | {"severity": "critical"},
            finding("src/gamma.py", 6, "gamma3 overflows on large input.", "return 3"),
        ],
    },
    {"summary": "Pass three.", "comments": [finding("src/beta.py", 4, "Validation is skipped in beta2.", "return 2")]},
]
USAGE = [{"input_tokens": 1000 * n, "output_tokens": 10 * n} for n in (1, 2, 3)]


def usage(n: int) -> dict[str, int]:
    return {**USAGE[n], "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def user_text(request: Any) -> str:
    content = request.messages[0]["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def file_order(request: Any) -> list[str]:
    return re.findall(r'<file path="([^"]+)"', user_text(request))


async def three_passes(h: Any, config: str, confidence: int) -> tuple[Any, Any]:
    """A pull request reviewed in the three passes of PASS_ANSWERS under ``config``, its three merged findings
    confirmed at ``confidence``: the pull request and its finished job."""
    h.github.set_file(REPO, ".github/reviewer.yml", config)
    for n, answer in enumerate(PASS_ANSWERS):
        h.anthropic.script_tool_answer(answer, usage=usage(n))
    h.anthropic.script_verify_answer(
        [{"id": f"F{i}", "verdict": "confirmed", "confidence": confidence, "reason": "Traced."} for i in (1, 2, 3)]
    )
    pull, job_id = await h.open_pr(files=FILES)
    return pull, await h.wait_check_synced(job_id)


async def test_three_passes_read_the_files_in_three_orders_and_their_union_is_verified_once(tmp_path) -> None:
    async with harness(tmp_path, REVIEWER_VERIFY="1", REVIEWER_VERIFY_MODEL="claude-haiku-4-5") as h:
        pull, job = await three_passes(h, "passes: 3\n", confidence=90)

        orders = [file_order(r) for r in h.anthropic.review_requests]
        assert len(orders) == 3 and all(sorted(o) == ["src/alpha.py", "src/beta.py", "src/gamma.py"] for o in orders)
        assert orders[1] == orders[0][::-1] and len({tuple(o) for o in orders}) == 3
        # One verification of the union: five findings, two of them said twice, make three.
        [verify] = h.anthropic.verify_requests
        asked = user_text(verify)
        assert asked.count("<finding id=") == 3
        assert "alpha1 returns a constant where" in asked and "The caller expects the parsed" not in asked
        assert job.answer is not None
        assert [(c.path, c.line, c.rank) for c in job.answer.comments] == [
            ("src/alpha.py", 2, "critical"),  # pass two called it critical
            ("src/beta.py", 4, "warning"),
            ("src/gamma.py", 6, "warning"),
        ]
        assert job.answer.passes == ((1000, 10, 2), (2000, 20, 2), (3000, 30, 1))
        assert job.answer.summary == "Pass one."
        [run] = h.check_runs(pull.head_sha)
        assert (
            "Reviewed in 3 review passes (input/output tokens 1,000/10, 2,000/20, 3,000/30): 5 findings, "
            "3 after merging." in run["output"]["summary"]
        )
        # Every pass's tokens are on the attempt's usage, the verification's apart.
        [attempt] = await h.store.attempts_of(job.id)
        assert (attempt.input_tokens, attempt.output_tokens) == (6000, 60)


async def test_a_retry_pays_no_finished_pass_again(tmp_path) -> None:
    async with harness(tmp_path) as h:
        h.github.set_file(REPO, ".github/reviewer.yml", "passes: 2\n")
        h.anthropic.script_tool_answer(PASS_ANSWERS[0])
        h.anthropic.script_error(529, "overloaded_error", "Overloaded")  # pass two fails the first attempt
        h.anthropic.script_tool_answer(PASS_ANSWERS[1])
        pull, job_id = await h.open_pr(files=FILES)
        job = await h.wait_state(job_id, JobState.SUCCEEDED, timeout=30)
        assert job.attempts == 2
        orders = [file_order(r) for r in h.anthropic.review_requests]
        first = orders[0]
        # Pass one asked once; pass two failed, then was asked again on the retry.
        assert orders.count(first) == 1 and orders[-1] == first[::-1]
        assert job.answer is not None and len(job.answer.comments) == 3


async def test_a_batched_review_sends_each_pass_as_a_request_of_its_own(tmp_path) -> None:
    async with harness(
        tmp_path, REVIEWER_BATCH="1", REVIEWER_BATCH_GATHER_SECONDS="0.2", REVIEWER_BATCH_POLL_SECONDS="0.05"
    ) as h:
        h.github.set_file(REPO, ".github/reviewer.yml", "batch: true\npasses: 2\n")
        h.anthropic.script_tool_answer(PASS_ANSWERS[0])
        h.anthropic.script_tool_answer(PASS_ANSWERS[1])
        pull, job_id = await h.open_pr(files=FILES)
        job = await h.wait_state(job_id, JobState.SUCCEEDED, timeout=30)
        assert h.anthropic.message_requests == []  # nothing asked interactively
        [batch] = h.anthropic.batch_creates
        assert len(batch.body["requests"]) == 2
        keys = [r.part_key for r in await h.store.batch_requests_of(job_id)]
        assert sorted(k.endswith("-p2") for k in keys) == [False, True]  # pass two's request is named for its pass
        assert job.answer is not None and len(job.answer.passes) == 2
        assert [c.path for c in job.answer.comments] == ["src/alpha.py", "src/beta.py", "src/gamma.py"]


async def test_the_vote_withholds_what_one_pass_of_three_found_unless_the_verifier_is_sure(tmp_path) -> None:
    for vote, published in (
        (True, ["src/alpha.py", "src/beta.py"]),
        (False, ["src/alpha.py", "src/beta.py", "src/gamma.py"]),
    ):
        (tmp_path / str(vote)).mkdir()
        async with harness(tmp_path / str(vote), REVIEWER_VERIFY="1", REVIEWER_VERIFY_MODEL="claude-haiku-4-5") as h:
            # alpha1's and beta2's findings were found by two passes of three, gamma3's by one; all confirmed at 70.
            pull, job = await three_passes(h, f"passes: 3\npasses_vote: {str(vote).lower()}\n", confidence=70)
            assert job.answer is not None
            assert [c.path for c in job.answer.comments] == published
            assert [c.votes for c in job.answer.comments] == [2, 2, 1][: len(published)]
            [run] = h.check_runs(pull.head_sha)
            held = (
                "- 1 found by fewer than half of the review passes (and verified under 80)" in run["output"]["summary"]
            )
            assert held is vote
            if vote:
                assert [(w.comment.path, w.reason) for w in job.answer.withheld] == [("src/gamma.py", "outvoted")]
