"""bench/review_quality.py in replay mode: the whole app reviews a case as a pull request against recorded model
answers, the judge's recorded matches score it, and what the app published is the scoring's production variant.

A crafted case of our own runs everywhere: it goes through the whole recording loop (each unanswered request dumped,
answered, then replayed). Two real cases of the quality corpus replay from the committed recordings where the corpus
is built (its case files hold third-party source text and are built locally: bench/quality_corpus/README.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from bench.quality_model import ModelSide, request_hash
from bench.quality_score import check, report, shown
from bench.review_quality import CORPUS, load_cases, run

BASE = "def total(xs):\n    return sum(xs)\n"
HEAD = "def total(xs):\n    return sum(xs)\n\n\ndef average(xs):\n    return total(xs) / len(xs)\n"
CASE: dict[str, Any] = {
    "id": "crafted-average",
    "language": "python",
    "repo": "octo-org/stats",
    "license": "MIT",
    "source": "https://github.com/octo-org/stats/commit/" + "ab" * 20,
    "fix": "https://github.com/octo-org/stats/commit/" + "cd" * 20,
    "title": "Add average()",
    "body": "",
    "files": [{"path": "stats.py", "base": BASE, "head": HEAD}],
    "known_issues": [{"path": "stats.py", "line": 6, "issue": "average([]) divides by zero."}],
}
REVIEW = {
    "summary": "average() has no guard for an empty list.",
    "comments": [
        {
            "path": "stats.py",
            "line": 6,
            "severity": "critical",
            "body": "Division by zero for an empty list.",
            "quote": "return total(xs) / len(xs)",
            "failure": "average([]) raises ZeroDivisionError.",
        },
        {
            "path": "stats.py",
            "line": 2,
            "severity": "warning",
            "body": "total() ignores None values.",
            "quote": "return sum(x for x in xs if x is not None)",  # not in the file: invented
            "failure": "total([1, None]) raises TypeError.",
        },
        {
            "path": "stats.py",
            "line": 5,
            "severity": "warning",
            "body": "average() should document its return type.",
            "quote": "def average(xs):",
            "failure": "Callers do not know it returns a float.",
        },
    ],
}
VERDICTS = {
    "verdicts": [
        {"id": "F1", "verdict": "confirmed", "confidence": 95, "reason": "len([]) is 0."},
        {"id": "F2", "verdict": "refuted", "confidence": 90, "reason": "Documentation, not a defect."},
    ]
}


def judged(request: dict[str, Any]) -> dict[str, Any]:
    """The judge's answer: the finding about the division matches the known issue, the others none."""
    ids = re.findall(r'<finding id="(F\d+)"[^>]*>\n([^\n]*)', request["user"])
    return {
        "matches": [
            {"finding": f, "issue": "K1" if "Division by zero" in body else "none", "reason": "."} for f, body in ids
        ]
    }


def json_files(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


async def test_the_recording_loop_then_replay_scores_a_crafted_case(tmp_path: Path) -> None:
    answers = {"review": lambda _: REVIEW, "verify": lambda _: VERDICTS, "judge": judged}
    kinds = []
    for _ in range(4):  # review, then its verification, then the judge, then a replay with nothing missing
        await run([CASE], model=ModelSide(tmp_path, record_missing=True))
        pending = json_files(tmp_path / "pending")
        if not pending:
            break
        for request in pending:
            assert request_hash(request["body"]) == request["hash"] and request["case"] == "crafted-average"
            kinds.append(request["kind"])
            ModelSide(tmp_path).save_answer(request["hash"], answers[request["kind"]](request))
    assert kinds == ["review", "verify", "judge"]
    recordings = json_files(tmp_path)
    assert {r["by"] for r in recordings} == {"stand-in"} and all(r["usage"]["input_tokens"] > 0 for r in recordings)

    [replayed] = await run([CASE], recordings=tmp_path)
    assert replayed.complete and check([replayed]) == []
    reasons = sorted((c.line, why) for c, why in replayed.candidates)
    assert reasons == [(2, "invented quote"), (5, "refuted"), (6, None)]
    assert replayed.published == 1
    result = report([replayed])
    unfiltered = result["variants"]["no filter"]["overall"]
    production = result["variants"]["all three (production)"]["overall"]
    assert (unfiltered["findings"], unfiltered["precision"], unfiltered["recall"]) == (3, 0.333, 1.0)
    assert (production["findings"], production["precision"], production["recall"]) == (1, 1.0, 1.0)
    assert result["variants"]["all but the evidence check"]["overall"]["findings"] == 2  # the invented one is back
    assert result["held_back"] == {"invented quote": 1, "refuted": 1}
    cost = result["cost"]
    assert cost["verified_reviews"] == 1
    assert cost["usd_per_review_verification_on"] > cost["usd_per_review_verification_off"] > 0


REAL = ["encode-httpx-fd3b69d", "serde-rs-json-92970d0"]


@pytest.mark.skipif(
    not all((CORPUS / f"{case}.json").exists() for case in REAL),
    reason="the quality corpus is not built here (bench/quality_corpus/build.py)",
)
async def test_two_corpus_cases_replay_from_the_committed_recordings() -> None:
    runs = await run(load_cases(CORPUS, REAL))
    assert [r.complete for r in runs] == [True, True] and check(runs) == []
    httpx, serde = runs  # the corpus's order: by case id
    # httpx (a blind stand-in's answers): five findings, two withheld as low confidence; only the double-hashed HA1
    # (the one confirmed above 90) is the known issue.
    assert (len(httpx.candidates), httpx.published, len(httpx.matches)) == (5, 3, 1)
    assert sorted(why or "" for _, why in httpx.candidates) == ["", "", "", "low confidence", "low confidence"]
    assert len(shown(httpx.candidates, evidence=True, verify=True, cap=False, min_confidence=91)) == 1
    # serde: both unwraps of invalid UTF-8 found and published. Without the repository the verifier is offered no
    # lookup, so it judged from the diff (an earlier verifier, offered one that nothing could answer, left both
    # uncertain and withheld them).
    assert (len(serde.candidates), serde.published, sorted(serde.matches.values())) == (2, 2, [0, 1])
    assert [(c.verdict, why) for c, why in serde.candidates] == [("confirmed", None), ("confirmed", None)]
    production = report(runs)["variants"]["all three (production)"]["overall"]
    assert (production["findings"], production["matching"], production["found"], production["known_issues"]) == (
        5,
        3,
        3,
        3,
    )


async def test_a_blind_stand_in_answers_a_tool_turn_and_is_never_shown_the_judge(tmp_path: Path) -> None:
    """With the repository tools the stand-in may answer a review request with calls (``{"calls": [...]}``); the app
    runs them and the next request, with the calls and their results in its transcript, is dumped in turn. With
    ``judging=False`` no judge request (it shows the known issues) is ever made."""
    pending_dir = tmp_path / "mine"
    turn = {"calls": [{"name": "find_definition", "input": {"name": "total"}}]}
    kinds, transcripts = [], []
    for _ in range(4):
        model = ModelSide(tmp_path, record_missing=True, pending=pending_dir)
        await run([CASE], model=model, configs=["codebase + tools"], corpus=tmp_path, judging=False)
        pending = json_files(pending_dir)
        if not pending:
            break
        for request in pending:
            kinds.append(request["kind"])
            transcripts.append(request["user"])
            if request["kind"] == "review":
                answer = REVIEW if "[you called find_definition]" in request["user"] else turn
            else:
                answer = VERDICTS
            ModelSide(tmp_path, pending=pending_dir, label="blind helper").save_answer(request["hash"], answer)
    assert kinds == ["review", "review", "verify"]
    assert "stats.py:1" in transcripts[1] and '[you called find_definition] {"name": "total"}' in transcripts[1]
    recordings = json_files(tmp_path)
    assert {r["stand_in"] for r in recordings} == {"blind helper"}
    [replayed] = await run([CASE], recordings=tmp_path, configs=["codebase + tools"], corpus=tmp_path, judging=False)
    assert replayed.missing == 0 and replayed.state == "succeeded" and replayed.published == 1
    assert not (tmp_path / "pending").exists()


async def test_a_stand_ins_tool_turns_are_costed_as_the_prompt_cache_would_split_them(tmp_path: Path) -> None:
    """A stand-in's recording counts a request's whole prompt as input; replayed, a tool conversation's later turn
    reads the earlier turns' marked prefix from the cache (as the app's marks make the API do), and a new review starts
    with an empty cache."""
    system = [{"type": "text", "text": "instructions " * 1200, "cache_control": {"type": "ephemeral"}}]
    first = {"model": "claude-sonnet-4-5", "max_tokens": 100, "system": system}
    first["messages"] = [{"role": "user", "content": [{"type": "text", "text": "the diff " * 400}]}]
    turn = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {}}]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "x", "cache_control": {"type": "ephemeral"}}
            ],
        },
    ]
    second = {**first, "messages": [*first["messages"], *turn]}
    side = ModelSide(tmp_path)
    for body in (first, second):
        (tmp_path / f"{request_hash(body)}.json").write_text(
            json.dumps({"answer": "text", "usage": {"input_tokens": 5000, "output_tokens": 10}, "by": "stand-in"})
        )
    side.start_case("a", "codebase + tools")
    await side.answer(first)
    await side.answer(second)
    one, two = (r["usage"] for r in side.answered)
    assert one["cache_read_input_tokens"] == 0 and one["cache_creation_input_tokens"] > 2000  # the system prompt
    assert two["cache_read_input_tokens"] > 0.75 * 5000  # the first turn's prompt, read back on the next
    for usage in (one, two):  # the estimate's total is kept, only split
        assert sum(usage[k] for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")) == 5000
    side.start_case("b", "codebase + tools")
    await side.answer(second)
    assert side.answered[0]["usage"]["cache_read_input_tokens"] == 0  # another review: a cold cache
