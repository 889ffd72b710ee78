"""What one answer in a thread costs: GitHub requests, model calls and input tokens, and how long a reply waits.

The whole app in-process against the fakes (tests/harness.py, SQLite): the app reviews a pull request with one inline
comment, then its author replies in that thread ``--answers`` times (the per-thread limit is lifted). For each answer:
the GitHub requests the answer made (by route), the model calls and their input tokens (the fake's ruler: JSON
characters / 4, as bench/review_cost.py), the admission latency (webhook to 202) and webhook-to-answer-posted.

    python bench/answer_cost.py                  # table; --json for JSON; --answers N
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reviewer_app.core.states import JobState  # noqa: E402
from tests.harness import harness  # noqa: E402
from tests.review.test_replies import reply_payload, reviewed_thread  # noqa: E402


async def measure(answers: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        async with harness(Path(tmp), REVIEWER_MAX_REPLIES_PER_THREAD_HOUR="0") as h:
            pull, root = await reviewed_thread(h)
            await h.wait_check_synced(1)
            routes: Counter[str] = Counter()
            tokens: list[int] = []
            admission: list[float] = []
            answered: list[float] = []
            for n in range(answers):
                h.anthropic.script_text_answer(f"Answer {n}: the constant is a placeholder.")
                payload = reply_payload(h, pull, root["id"], f"Question {n}: why?", login=pull.user, association="NONE")
                seen, calls = len(h.github.requests), len(h.anthropic.message_requests)
                start = time.perf_counter()
                admitted = await h.deliver("pull_request_review_comment", payload)
                admission.append(time.perf_counter() - start)
                await h.wait_state(admitted["job_id"], JobState.SUCCEEDED)
                answered.append(time.perf_counter() - start)
                routes.update(f"{r.method} {r.route}" for r in h.github.requests[seen:] if "check-runs" not in r.route)
                for r in h.anthropic.message_requests[calls:]:
                    tokens.append(len(json.dumps(r.body)) // 4)
            return {
                "answers": answers,
                "github_requests_per_answer": {k: v / answers for k, v in sorted(routes.items())},
                "model_calls_per_answer": len(tokens) / answers,
                "input_tokens_median": statistics.median(tokens),
                "admission_ms_median": round(statistics.median(admission) * 1000, 1),
                "answered_ms_median": round(statistics.median(answered) * 1000, 1),
            }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(measure(args.answers))
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['answers']} answers in one thread (SQLite, in-process, fakes on loopback)")
    for route, per in result["github_requests_per_answer"].items():  # type: ignore[union-attr]
        print(f"  {per:g} x {route}")
    print(f"  model calls per answer: {result['model_calls_per_answer']:g}")
    print(f"  input tokens per answer (median, the fake's ruler): {result['input_tokens_median']}")
    print(f"  webhook to 202 (median): {result['admission_ms_median']} ms")
    print(f"  webhook to answer posted (median): {result['answered_ms_median']} ms")


if __name__ == "__main__":
    main()
