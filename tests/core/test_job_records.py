"""A job's details and its stored answer are typed records with one JSON form each; rows written before they were
typed load, and keys a newer version wrote survive an older one's save."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import orjson
import pytest

from reviewer_app.core.job_records import CheckReport, JobDetails, ModelProgress, PartAnswer, StoredAnswer
from reviewer_app.core.review_model import ModelComment, ReviewCounts
from tests.helpers import sha
from tests.store.test_store_contract import NOW, admit, spec

COMMENT = {
    "path": "src/a.py",
    "line": 3,
    "body": "Off by one.",
    "side": "RIGHT",
    "severity": "warning",
    "suggestion": None,
    "start_line": None,
}
# As the code before the typed records wrote them (dicts: the admission's keys, the worker's, asdict of a comment).
DETAILS_AS_WRITTEN_BEFORE = {
    "action": "synchronize",
    "base_ref": "main",
    "base_sha": sha(1),
    "title": "Fix it",
    "before": sha(2),
    "event_at": 1_800_000_000.5,
    "delivery_id": "d-1",
    "full": True,
    "requested_by": "alice",
    "comment_id": 5,
    "verify_permission": True,
    "counts": {
        "files_reviewed": 2,
        "inline": 1,
        "moved": 0,
        "not_covered": 1,
        "critical": 0,
        "warning": 1,
        "suggestion": 0,
        "nit": 0,
    },
    "report": {
        "summary": "Looks fine.",
        "top": ["- one"],
        "review_url": "u",
        "not_reviewed": "",
        "conclusion": "success",
    },
    "incremental": False,
    "config_errors": ["max_parts must be a number"],
    "model_progress": {
        "parts": {"k1": {"summary": "part", "comments": [COMMENT], "model": "m"}},
        "turns": {"k2": [{"content": [{"type": "tool_use", "id": "t", "name": "read_file", "input": {}}]}]},
    },
}
ANSWER_AS_WRITTEN_BEFORE = {
    "summary": "One bug.",
    "comments": [COMMENT],
    "not_covered": [["package-lock.json", "lock file"]],
    "files_reviewed": 1,
    "model": "claude",
    "parts": 1,
    "incremental_note": None,
}


def test_details_written_before_they_were_typed_load() -> None:
    d = JobDetails.from_json(orjson.dumps(DETAILS_AS_WRITTEN_BEFORE))
    assert (d.action, d.base_ref, d.delivery_id, d.requested_by, d.comment_id) == (
        "synchronize",
        "main",
        "d-1",
        "alice",
        5,
    )
    assert d.full and d.verify_permission and d.incremental is False
    assert d.counts == ReviewCounts(files_reviewed=2, inline=1, moved=0, not_covered=1, warning=1)
    assert d.report == CheckReport("Looks fine.", ("- one",), "u", "", "success")
    assert d.config_errors == ("max_parts must be a number",)
    comment = ModelComment("src/a.py", 3, "Off by one.", severity="warning")
    assert d.model_progress == ModelProgress(
        parts={"k1": PartAnswer("part", (comment,), "m")},
        turns={"k2": tuple(DETAILS_AS_WRITTEN_BEFORE["model_progress"]["turns"]["k2"])},  # type: ignore[index]
    )
    # Written back as it was read (event_at and before, now columns only, are an older row's keys, kept as such).
    assert d.extra == {"event_at": 1_800_000_000.5, "before": sha(2)}
    assert orjson.loads(d.to_json()) == DETAILS_AS_WRITTEN_BEFORE


def test_an_answer_written_before_it_was_typed_loads_and_round_trips() -> None:
    a = StoredAnswer.from_json(orjson.dumps(ANSWER_AS_WRITTEN_BEFORE))
    assert a == StoredAnswer(
        summary="One bug.",
        comments=(ModelComment("src/a.py", 3, "Off by one.", severity="warning"),),
        not_covered=(("package-lock.json", "lock file"),),
        files_reviewed=1,
        model="claude",
        parts=1,
    )
    assert orjson.loads(a.to_json()) == ANSWER_AS_WRITTEN_BEFORE
    assert StoredAnswer.from_json(a.to_json()) == a


def test_an_answers_classification_of_the_reply_round_trips_and_is_absent_when_it_does_not_dispute() -> None:
    disputed = StoredAnswer(summary="Fine then.", model="m", disputes=True, learning="Do not flag X in Y.")
    assert StoredAnswer.from_json(disputed.to_json()) == disputed
    plain = StoredAnswer(summary="Yes.", model="m")
    assert "disputes" not in orjson.loads(plain.to_json()) and StoredAnswer.from_json(plain.to_json()) == plain


def test_empty_and_malformed_values_load_as_absent() -> None:
    assert JobDetails.from_json(None) == JobDetails() == JobDetails.from_json("{}")
    odd = JobDetails.from_json(orjson.dumps({"comment_id": "5", "full": "yes", "counts": "x", "title": 3}))
    assert (odd.comment_id, odd.full, odd.counts, odd.title) == (None, False, None, None)
    assert StoredAnswer.from_json(None) is None and StoredAnswer.from_json('{"comments": []}') is None
    partial = StoredAnswer.from_json(orjson.dumps({"summary": "s", "comments": [{"path": "a"}, COMMENT]}))
    assert partial is not None and [c.path for c in partial.comments] == ["src/a.py"]  # a comment with no line


def test_keys_a_newer_version_wrote_survive_this_versions_save() -> None:
    newer = {**ANSWER_AS_WRITTEN_BEFORE, "findings_memory": [1, 2]}
    assert orjson.loads(StoredAnswer.from_json(orjson.dumps(newer)).to_json())["findings_memory"] == [1, 2]  # type: ignore[union-attr]
    details = JobDetails.from_json(orjson.dumps({"action": "opened", "batch": {"id": 4}}))
    saved = orjson.loads(replace(details, full=True).to_json())
    assert saved == {"action": "opened", "batch": {"id": 4}, "full": True}


def test_progress_keeps_finished_parts_and_drops_their_turns() -> None:
    p = ModelProgress().with_turn("k", {"content": []}).with_turn("k", {"content": [1]})
    assert p.turns == {"k": ({"content": []}, {"content": [1]})}
    done = p.with_part("k", PartAnswer("s"))
    assert done.parts == {"k": PartAnswer("s")} and done.turns == {}


async def test_both_stores_keep_the_records_and_the_keys_they_do_not_know(store) -> None:
    r = await admit(store, spec())
    [lease] = await store.claim(owner="w", limit=1, now=NOW, lease_seconds=30)
    job = await store.get_job(r.job_id)
    details = JobDetails.from_json(orjson.dumps({**job.details.to_dict(), "from_a_newer_version": True}))
    answer = StoredAnswer.from_json(orjson.dumps(ANSWER_AS_WRITTEN_BEFORE))
    assert await store.save_progress_if_lease_held(lease, now=NOW, details=details, answer=answer)
    job = await store.get_job(r.job_id)
    assert job.answer == answer and job.details == details and job.details.extra == {"from_a_newer_version": True}


def test_details_read_back_equal_the_same_details_built_and_stay_frozen() -> None:
    """from_dict makes the record without __init__ (job_records.assemble): it must be the very record __init__ makes."""
    read = JobDetails.from_dict({"action": "opened", "title": "t", "full": True, "comment_id": 5, "future_key": 1})
    built = JobDetails(action="opened", title="t", full=True, comment_id=5, extra={"future_key": 1})
    assert read == built and read.to_json() == built.to_json()
    assert read.base_ref is None and read.config_errors == () and read.report is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        read.title = "changed"  # type: ignore[misc]
    assert JobDetails.from_dict({}) == JobDetails() and JobDetails.from_dict({}).extra == {}


def test_evidence_verdicts_and_withheld_findings_round_trip_and_older_answers_lack_them() -> None:
    from reviewer_app.core.job_records import VerifyAnswer
    from reviewer_app.core.precision import REFUTED, Verdict, Withheld

    checked = ModelComment(
        "src/a.py",
        3,
        "Off by one.",
        quote="for i in range(n + 1):",
        failure="n=0 reads past the end.",
        verdict="confirmed",
        confidence=90,
        verdict_reason="Traced.",
    )
    refuted = replace(checked, line=9, verdict="refuted", confidence=80)
    answer = StoredAnswer("Risky.", (checked,), withheld=(Withheld(refuted, REFUTED),), verified_by="claude-haiku-4-5")
    assert StoredAnswer.from_json(answer.to_json()) == answer
    # An answer stored before quotes and verdicts (a checkpoint of an in-flight job) loads without them.
    older = StoredAnswer.from_json(orjson.dumps({"summary": "s", "comments": [COMMENT]}))
    assert older is not None and older.withheld == () and older.verified_by == ""
    assert (older.comments[0].quote, older.comments[0].confidence, older.comments[0].verdict) == (None, None, None)
    assert "quote" not in orjson.loads(older.to_json())["comments"][0]  # written back as it was read
    # An unknown reason or verdict is not trusted: the entry or the value reads as absent.
    odd = {
        "summary": "s",
        "withheld": [{"reason": "bored", "comment": COMMENT}],
        "comments": [{**COMMENT, "verdict": "yes"}],
    }
    read = StoredAnswer.from_json(orjson.dumps(odd))
    assert read is not None and read.withheld == () and read.comments[0].verdict is None

    progress = ModelProgress(parts={"k1": PartAnswer("p", (checked,))}).with_verified(
        "verify-abc", VerifyAnswer({0: Verdict("uncertain", 55, "Needs the caller.")}, "claude-haiku-4-5")
    )
    assert ModelProgress.from_dict(progress.to_dict()) == progress
    assert "verified" not in ModelProgress(parts={"k1": PartAnswer("p")}).to_dict()
    # A part finishing keeps the verification checkpointed beside it.
    assert progress.with_part("k2", PartAnswer("q")).verified == progress.verified


def test_a_review_in_several_passes_keeps_each_pass_cost_and_a_part_its_tokens() -> None:
    answer = StoredAnswer("s", passes=((1200, 30, 3), (1100, 25, 1)))
    assert StoredAnswer.from_json(answer.to_json()) == answer
    assert StoredAnswer.from_json(StoredAnswer("s").to_json()).passes == ()  # type: ignore[union-attr]
    part = PartAnswer("s", (), "m", 1200, 30)
    assert PartAnswer.from_dict(part.to_dict()) == part
    assert "input_tokens" not in PartAnswer("s").to_dict()  # an answer of one pass stores what it always did
