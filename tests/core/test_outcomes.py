"""The fate table (core/outcomes.settle), one row per (fate, event, before or after) case, and the rate's arithmetic:
the acted-on rate, the Wilson interval, the comparison of two variants, the dimensions a finding is read by."""

from __future__ import annotations

import pytest

from reviewer_app.core.experiments import assign, operator_experiment, parse_experiment
from reviewer_app.core.outcomes import (
    Event,
    Fate,
    Settled,
    by_dimension,
    category_of,
    close_fate,
    days_of,
    differ,
    file_type_of,
    rate_of,
    settle,
    wilson,
    worst,
)

T = 1000.0  # when the finding's current fate was given
EARLIER, LATER = T - 10, T + 10

# (current fate, event, when the event happened, the fate after it; None: unchanged)
TABLE = [
    (Fate.OPEN, Event.CHANGED, LATER, Fate.FIXED),
    (Fate.OPEN, Event.DISMISSED, LATER, Fate.DISMISSED),
    (Fate.OPEN, Event.MERGED, LATER, Fate.OPEN_AT_MERGE),
    (Fate.OPEN, Event.CLOSED, LATER, Fate.OPEN_AT_CLOSE),
    # The team's first word stands; an earlier one read later replaces it.
    (Fate.FIXED, Event.DISMISSED, LATER, None),
    (Fate.FIXED, Event.DISMISSED, EARLIER, Fate.DISMISSED),
    (Fate.FIXED, Event.CHANGED, EARLIER, None),
    (Fate.FIXED, Event.MERGED, LATER, None),
    (Fate.FIXED, Event.CLOSED, LATER, None),
    (Fate.DISMISSED, Event.CHANGED, LATER, None),
    (Fate.DISMISSED, Event.CHANGED, EARLIER, Fate.FIXED),
    (Fate.DISMISSED, Event.DISMISSED, EARLIER, None),
    (Fate.DISMISSED, Event.MERGED, LATER, None),
    (Fate.DISMISSED, Event.CLOSED, LATER, None),
    # At the end: the team's word given before the merge or close (reactions are read late) replaces it.
    (Fate.OPEN_AT_MERGE, Event.DISMISSED, EARLIER, Fate.DISMISSED),
    (Fate.OPEN_AT_MERGE, Event.DISMISSED, LATER, None),
    (Fate.OPEN_AT_MERGE, Event.CHANGED, EARLIER, Fate.FIXED),
    (Fate.OPEN_AT_MERGE, Event.CHANGED, LATER, None),
    (Fate.OPEN_AT_MERGE, Event.CLOSED, LATER, None),
    (Fate.OPEN_AT_MERGE, Event.MERGED, LATER, None),
    (Fate.OPEN_AT_CLOSE, Event.DISMISSED, EARLIER, Fate.DISMISSED),
    (Fate.OPEN_AT_CLOSE, Event.DISMISSED, LATER, None),
    (Fate.OPEN_AT_CLOSE, Event.CHANGED, EARLIER, Fate.FIXED),
    (Fate.OPEN_AT_CLOSE, Event.MERGED, LATER, None),
    # Reopened after the close: open again; a reopen older than the close (delivered late) changes nothing.
    (Fate.OPEN_AT_CLOSE, Event.REOPENED, LATER, Fate.OPEN),
    (Fate.OPEN_AT_CLOSE, Event.REOPENED, EARLIER, None),
    (Fate.OPEN_AT_MERGE, Event.REOPENED, LATER, None),
    (Fate.OPEN, Event.REOPENED, LATER, None),
    (Fate.FIXED, Event.REOPENED, LATER, None),
    (Fate.DISMISSED, Event.REOPENED, LATER, None),
]


@pytest.mark.parametrize(("fate", "event", "at", "after"), TABLE)
def test_each_fate_and_event_gives_the_table_s_fate(fate: Fate, event: Event, at: float, after: Fate | None) -> None:
    current = Settled(fate, None if fate is Fate.OPEN else T, "before")
    new = settle(current, event, at, "now")
    if after is None:
        assert new is None
    elif after is Fate.OPEN:
        assert new == Settled(Fate.OPEN)  # open again: no time, no source
    else:
        assert new == Settled(after, at, "now")


def test_the_table_covers_every_fate_and_event() -> None:
    assert {(f, e) for f, e, _, _ in TABLE} >= {(f, e) for f in Fate for e in Event if f is Fate.OPEN}
    assert {f for f, _, _, _ in TABLE} == set(Fate)


def test_close_fate_is_the_merge_s_when_merged() -> None:
    assert close_fate(True) is Fate.OPEN_AT_MERGE
    assert close_fate(False) is Fate.OPEN_AT_CLOSE


def test_acted_on_rate_counts_fixed_over_fixed_dismissed_and_open_at_merge() -> None:
    rate = rate_of(["fixed", "fixed", "dismissed", "open_at_merge", "open_at_close", "open"])
    assert rate.decided == 4
    assert rate.rate == 0.5
    assert rate.as_dict()["open_at_close"] == 1
    assert rate_of(["open", "open_at_close"]).rate is None


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [(0, 10, 0.0, 0.2775), (5, 10, 0.2366, 0.7634), (10, 10, 0.7225, 1.0), (81, 263, 0.2553, 0.3662)],
)
def test_wilson_interval_matches_the_published_figures(successes: int, n: int, low: float, high: float) -> None:
    interval = wilson(successes, n)
    assert interval is not None
    assert interval[0] == pytest.approx(low, abs=1e-4)
    assert interval[1] == pytest.approx(high, abs=1e-4)


def test_wilson_of_nothing_is_none() -> None:
    assert wilson(0, 0) is None


def test_two_variants_differ_only_with_enough_findings() -> None:
    few_a, few_b = rate_of(["fixed"] * 3 + ["dismissed"] * 2), rate_of(["fixed"] * 2 + ["dismissed"] * 3)
    assert differ(few_a, few_b) is False
    many_a, many_b = rate_of(["fixed"] * 80 + ["dismissed"] * 20), rate_of(["fixed"] * 40 + ["dismissed"] * 60)
    assert differ(many_a, many_b) is True
    assert differ(few_a, rate_of(["open"])) is None


def test_dimensions_group_findings_and_worst_needs_enough_decided() -> None:
    rows = [
        {"fate": "fixed", "category": "security"},
        {"fate": "fixed", "category": "security"},
        {"fate": "dismissed", "category": "style"},
        {"fate": "dismissed", "category": "style"},
        {"fate": "open_at_merge", "category": "style"},
        {"fate": "dismissed", "category": "tests"},
    ]
    rates = dict(by_dimension(rows, "category"))
    assert rates["security"].rate == 1.0
    assert rates["style"].rate == 0.0
    assert [name for name, _ in worst(by_dimension(rows, "category"), at_least=2)] == ["style", "security"]


def test_days_of_groups_by_the_day_a_finding_was_published() -> None:
    rows = [{"fate": "fixed", "created_at": 86400.0 * 3 + 5}, {"fate": "dismissed", "created_at": 86400.0 * 2}]
    assert [(day, r.rate) for day, r in days_of(rows)] == [(2, 0.0), (3, 1.0)]


@pytest.mark.parametrize(
    ("title", "category"),
    [
        ("SQL injection through the `name` parameter", "security"),
        ("Race between the lock and the read", "concurrency"),
        ("The exception is swallowed", "error handling"),
        ("File handle leaks on early return", "resources"),
        ("Off-by-one: the loop skips the last index", "correctness"),
        ("Rename this variable", "other"),
    ],
)
def test_category_is_read_from_the_title(title: str, category: str) -> None:
    assert category_of(title) == category


@pytest.mark.parametrize(
    ("path", "kind"), [("src/app.py", ".py"), ("web/Index.TSX", ".tsx"), ("Dockerfile", "Dockerfile")]
)
def test_file_type_is_the_extension_or_the_name(path: str, kind: str) -> None:
    assert file_type_of(path) == kind


def test_experiment_assignment_is_stable_and_splits_pull_requests() -> None:
    first = [assign("conf-65", 7, n) for n in range(200)]
    assert first == [assign("conf-65", 7, n) for n in range(200)]
    assert 70 < first.count("a") < 130
    assert [assign("other", 7, n) for n in range(200)] != first  # each experiment shuffles afresh


def test_experiment_block_is_checked() -> None:
    experiment, errors = parse_experiment({"name": "conf", "a": {"min_confidence": 50}, "b": {"min_confidence": 65}})
    assert errors == [] and experiment is not None and experiment.b == {"min_confidence": 65}
    _, errors = parse_experiment({"name": "conf", "a": {"auto": False}, "b": {}})
    assert any("may not set auto" in e for e in errors)
    _, errors = parse_experiment({"name": "conf", "a": {"verify": True}, "b": {"verify": True}})
    assert any("nothing would be compared" in e for e in errors)
    assert parse_experiment({"name": "bad name!", "a": {}, "b": {"verify": False}})[0] is None
    assert operator_experiment("")[0] is None
    assert operator_experiment("{")[1][0].startswith("REVIEWER_EXPERIMENT is not valid JSON")
