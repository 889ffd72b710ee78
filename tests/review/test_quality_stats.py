"""bench/quality_stats.py: the paired bootstrap that says how sure a difference between two configurations is."""

from __future__ import annotations

from bench.quality_stats import paired_difference

BASE = {f"case-{i}": (2, 1, 2, 1) for i in range(30)}  # per case: shown, matching, known issues, found


def test_the_same_answers_differ_by_nothing_and_the_interval_is_zero() -> None:
    d = paired_difference(BASE, dict(BASE))
    assert (d.precision, d.precision_low, d.precision_high) == (0.0, 0.0, 0.0)
    assert (d.recall, d.recall_low, d.recall_high) == (0.0, 0.0, 0.0)


def test_finding_more_in_every_case_is_a_sure_gain_and_one_case_is_not() -> None:
    everywhere = {case: (2, 2, 2, 2) for case in BASE}
    d = paired_difference(BASE, everywhere)
    assert d.recall == 50.0 and d.recall_low > 0 and d.precision_low > 0
    one = {**BASE, "case-0": (2, 2, 2, 2)}  # one more known issue found, in one case of thirty
    d = paired_difference(BASE, one)
    assert 0 < d.recall < 2 and d.recall_low <= 0 <= d.recall_high


def test_only_cases_both_configurations_ran_count_and_a_replay_prints_the_same_interval() -> None:
    other = {**{case: (3, 1, 2, 2) for case in BASE}, "only-here": (9, 9, 9, 9)}
    first, again = paired_difference(BASE, other), paired_difference(BASE, other)
    assert first == again
    assert round(first.recall, 1) == 50.0 and round(first.precision, 1) == round(100 / 3 - 50, 1)


def test_a_replicate_directory_names_its_configuration() -> None:
    from pathlib import Path

    from bench.quality_replicate import config_of

    assert config_of(Path("diff-only-r8")) == "diff only"
    assert config_of(Path("codebase-plus-tools-r9")) == "codebase + tools"
    assert config_of(Path("codebase-for-the-verifier-r10")) == "codebase for the verifier"


def test_rounds_pool_case_by_case_over_the_cases_every_round_has() -> None:
    from bench.quality_stats import pool, totals

    first = {"a": (2, 1, 1, 1), "b": (4, 1, 2, 0), "only-first": (9, 9, 9, 9)}
    second = {"a": (1, 1, 1, 1), "b": (2, 2, 2, 2)}
    pooled = pool([first, second])
    assert pooled == {"a": (3, 2, 2, 2), "b": (6, 3, 4, 2)}
    precision, recall = totals(pooled)  # every finding and issue of both rounds counted once
    assert round(precision, 6) == round(100 * 5 / 9, 6) and round(recall, 6) == round(100 * 4 / 6, 6)
    assert pool([]) == {}


def test_the_clause_needs_both_ten_points_of_recall_and_no_loss_of_precision() -> None:
    from bench.quality_replicate import clause_met
    from bench.quality_stats import Difference

    assert clause_met(Difference(0.0, -5, 5, 10.0, 2, 18))
    assert not clause_met(Difference(-0.1, -5, 5, 14.0, 2, 18))  # precision below the diff's
    assert not clause_met(Difference(3.0, -5, 5, 9.9, 2, 18))  # recall short of ten points


def test_an_earlier_products_counts_file_names_its_configuration() -> None:
    from pathlib import Path

    from bench.quality_replicate import config_of

    assert config_of(Path("codebase-plus-tools-r4.counts.json")) == "codebase + tools"


def test_passes_estimated_from_rounds_merge_vote_and_count_a_match_of_any_merged_finding() -> None:
    from bench.quality_votes import RULES, passes_counts
    from bench.review_quality import CaseRun
    from reviewer_app.core.review_model import ModelComment

    def finding(line: int, body: str, confidence: int = 70) -> ModelComment:
        return ModelComment(
            "a.py", line, body, severity="warning", quote=f"x{line}", verdict="confirmed", confidence=confidence
        )

    case = {"id": "c", "known_issues": [{}, {}]}
    shared = "The loop bound is off by one and skips the last element."
    # Round 1 matched its copy of the shared finding only; round 2's copy was judged "none"; a lone finding each.
    one = CaseRun(case, "succeeded", None, 2, [(finding(10, shared), None), (finding(40, "Leaks the socket."), None)])
    one.matches = {0: 0}
    two = CaseRun(case, "succeeded", None, 2, [(finding(11, shared), None), (finding(70, "Races.", 85), None)])
    union, majority, confident = (passes_counts([one, two], rule) for rule in RULES.values())
    assert union == (3, 1, 2, 1)  # shown, matching, known issues, found: the shared finding once
    assert majority == (1, 1, 2, 1)  # only what both passes found
    assert confident == (2, 1, 2, 1)  # and the lone finding the verifier is sure of
