"""Several review passes (core/passes.py): the order each pass reads its files in, and the union of their findings
with the same place and the same problem merged, table by table."""

from __future__ import annotations

import pytest

from reviewer_app.core.passes import merge_passes, pass_line, pass_order, same_finding
from reviewer_app.core.review_model import ModelComment


def f(
    line: int,
    body: str,
    *,
    path: str = "app/db.py",
    quote: str | None = None,
    severity: str = "warning",
    side: str = "RIGHT",
    start: int | None = None,
) -> ModelComment:
    return ModelComment(path, line, body, side=side, severity=severity, quote=quote, start_line=start)  # type: ignore[arg-type]


NONE = "conn.close() is never called when the query raises, leaking the connection."


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        # Same place, same problem in other words.
        (f(10, NONE), f(11, "The connection leaks: close() is skipped when the query raises an error."), True),
        # Same quoted code, wholly different wording: the same problem.
        (f(10, "Leak.", quote="conn = pool.get()"), f(12, "Unreleased.", quote="  conn =  pool.get()\n"), True),
        # A range that reaches the other's line.
        (f(20, NONE, start=12), f(9, "The connection is leaking when the query raises."), True),
        # Same place, another problem.
        (
            f(10, NONE),
            f(10, "The SQL string is built with an f-string: user input reaches the query unescaped."),
            False,
        ),
        # Same problem, too far apart: two places.
        (f(10, NONE), f(14, NONE), False),
        # Same line of another file, or the other side of the diff.
        (f(10, NONE), f(10, NONE, path="app/api.py"), False),
        (f(10, NONE), f(10, NONE, side="LEFT"), False),
        # Different quotes do not keep two claims about the same thing apart.
        (f(10, NONE, quote="a"), f(10, NONE, quote="b"), True),
        # Nothing to compare.
        (f(10, "Bug."), f(10, "Hmm."), False),
    ],
)
def test_same_place_and_same_problem(a: ModelComment, b: ModelComment, same: bool) -> None:
    assert same_finding(a, b) is same
    assert same_finding(b, a) is same


def test_one_pass_is_left_as_it_is_even_with_look_alike_findings() -> None:
    one = [f(10, NONE), f(10, NONE), f(30, "Off by one in the loop bound.")]
    merged = merge_passes([one])
    assert merged.comments == tuple(one) and merged.votes == (1, 1, 1) and merged.found == 3


def test_passes_merge_into_their_union_first_pass_first_with_votes_and_the_highest_severity() -> None:
    first = [f(10, NONE, severity="warning"), f(30, "Off by one: the loop bound skips the last element.")]
    second = [
        f(31, "The loop bound is off by one and skips the last element.", severity="critical"),
        f(50, "The retry loop never sleeps between attempts."),
    ]
    third = [
        f(11, "close() is never reached when the query raises: connection leak.", severity="suggestion"),
        f(10, "The SQL string is built with an f-string: user input reaches the query unescaped."),
    ]
    merged = merge_passes([first, second, third])
    assert (
        [(c.line, c.severity, c.body[:20]) for c in merged.comments]
        == [
            (10, "warning", NONE[:20]),  # the first wording; suggestion in pass 3 does not lower it
            (30, "critical", first[1].body[:20]),  # pass 2 called it critical
            (50, "warning", "The retry loop never"),
            (10, "warning", "The SQL string is bu"),  # same line as the leak, another problem
        ]
    )
    assert merged.votes == (2, 2, 1, 1)
    assert merged.found == 6
    # Each merged finding keeps the findings it stands for, so what they were judged is not lost.
    assert merged.groups == ((first[0], third[0]), (first[1], second[0]), (second[1],), (third[1],))


def test_a_pass_joins_each_earlier_finding_at_most_once() -> None:
    # Pass 2 says the same thing twice: one copy joins pass 1's finding, the other stays apart (within a pass nothing
    # is merged, so two passes never make one finding out of two of the first pass's).
    merged = merge_passes([[f(10, NONE)], [f(10, NONE), f(11, NONE)]])
    assert [c.line for c in merged.comments] == [10, 11] and merged.votes == (2, 1)


def test_no_passes_no_findings() -> None:
    assert merge_passes([]).comments == () and merge_passes([[], []]).found == 0


@pytest.mark.parametrize(
    ("review_pass", "expected"),
    [(1, ["a", "b", "c", "d"]), (2, ["d", "c", "b", "a"])],
)
def test_the_first_passes_read_in_order_and_reversed(review_pass: int, expected: list[str]) -> None:
    assert pass_order(["a", "b", "c", "d"], review_pass) == expected


def test_later_passes_read_in_orders_of_their_own_that_are_stable() -> None:
    paths = [f"src/m{i}.py" for i in range(8)]
    orders = [tuple(pass_order(paths, n)) for n in range(1, 6)]
    assert all(sorted(o) == paths for o in orders)
    assert len(set(orders)) == 5  # five passes, five orders
    assert pass_order(paths, 4) == pass_order(list(paths), 4)


def test_the_check_runs_line_counts_each_pass() -> None:
    assert pass_line([(12000, 800, 5), (11950, 760, 4), (12100, 910, 5)], 9) == (
        "3 review passes (input/output tokens 12,000/800, 11,950/760, 12,100/910): 14 findings, 9 after merging"
    )


def test_the_vote_keeps_what_most_passes_found_or_the_verifier_is_sure_of() -> None:
    from dataclasses import replace

    from reviewer_app.core.passes import VOTE_CONFIDENCE, outvoted

    base = f(10, "Off by one.")
    two = replace(base, votes=2, verdict="confirmed", confidence=55)
    one = replace(base, votes=1, verdict="confirmed", confidence=VOTE_CONFIDENCE - 1)
    sure = replace(base, votes=1, verdict="confirmed", confidence=VOTE_CONFIDENCE)
    unverified = replace(base, votes=1)
    assert outvoted([two, one, sure, unverified], 3) == ([two, sure], [one, unverified])
    # Of two passes, one is not a majority; a review of one pass (no votes) keeps everything.
    assert outvoted([one], 2) == ([], [one])
    assert outvoted([base], 1) == ([base], [])
