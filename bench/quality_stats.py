"""How sure a difference between two configurations of bench/review_quality.py is: a paired bootstrap over the
corpus's cases (pure, seeded, so a replay prints the same intervals).

Each case contributes its counts under both configurations (findings shown, those matching a known issue, its known
issues, those found); a resample draws cases with replacement, and the difference of the pooled precision and recall
is taken on each. The interval is the 2.5th and 97.5th percentile of those differences: a difference whose interval
spans zero is one the corpus cannot tell from chance (a stand-in's rerun moves a row by a finding or two)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Counts = tuple[int, int, int, int]  # shown, matching, known issues, found


@dataclass(frozen=True)
class Difference:
    """``other`` minus ``base``, in percentage points: the corpus's value and its 95 % interval."""

    precision: float
    precision_low: float
    precision_high: float
    recall: float
    recall_low: float
    recall_high: float


def pool(rounds: Sequence[Mapping[str, Counts]]) -> dict[str, Counts]:
    """Several rounds of one configuration as one: per case, the counts summed over the rounds, over the cases every
    round has (a case's known issues count once per round, so recall stays the share of issue-rounds found)."""
    if not rounds:
        return {}
    cases = set.intersection(*(set(r) for r in rounds))
    return {
        case: tuple(sum(column) for column in zip(*(r[case] for r in rounds), strict=True))  # type: ignore[misc]
        for case in sorted(cases)
    }


def totals(counts: Mapping[str, Counts]) -> tuple[float, float]:
    """Pooled precision and recall, in %, of every case's counts."""
    return _pooled(list(counts.values()))


def _pooled(rows: Sequence[Counts]) -> tuple[float, float]:
    shown = sum(r[0] for r in rows)
    issues = sum(r[2] for r in rows)
    precision = sum(r[1] for r in rows) / shown if shown else 0.0
    recall = sum(r[3] for r in rows) / issues if issues else 0.0
    return 100 * precision, 100 * recall


def describe(d: Difference, unit: str = "") -> str:
    """``d`` as one line: "precision -3.2{unit} (-13.5 to +5.3), recall +8.5 (-2.3 to +20.0)"."""
    return (
        f"precision {d.precision:+.1f}{unit} ({d.precision_low:+.1f} to {d.precision_high:+.1f}), "
        f"recall {d.recall:+.1f} ({d.recall_low:+.1f} to {d.recall_high:+.1f})"
    )


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def paired_difference(
    base: Mapping[str, Counts], other: Mapping[str, Counts], *, resamples: int = 4000, seed: int = 0
) -> Difference:
    """The difference ``other - base`` of pooled precision and recall over the cases both have, with a 95 % paired
    bootstrap interval."""
    cases = sorted(set(base) & set(other))
    if not cases:
        return Difference(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)

    def delta(chosen: Sequence[str]) -> tuple[float, float]:
        p0, r0 = _pooled([base[c] for c in chosen])
        p1, r1 = _pooled([other[c] for c in chosen])
        return p1 - p0, r1 - r0

    rng = random.Random(seed)
    draws = [delta([rng.choice(cases) for _ in cases]) for _ in range(resamples)]
    precision, recall = delta(cases)
    ps, rs = [d[0] for d in draws], [d[1] for d in draws]
    return Difference(
        precision,
        _percentile(ps, 0.025),
        _percentile(ps, 0.975),
        recall,
        _percentile(rs, 0.025),
        _percentile(rs, 0.975),
    )
