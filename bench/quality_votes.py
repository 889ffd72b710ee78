"""What a review in several passes would publish, with and without a vote between them, estimated from the rounds
already recorded: independent blind rounds of one configuration (bench/quality_replicate.py) stand in for independent
passes of one review. Each round's kept findings (the evidence check and its own verification, at the default
threshold) are merged as the app merges passes (core/passes.py), a rule keeps some, and the cap shows at most the
default number; a merged finding matches a known issue when any finding merged into it did.

    python bench/quality_votes.py            # every pair (and triple) of rounds of each compared configuration

An estimate, not a measurement of `passes: N`: the app's passes read the files in other orders and are verified once,
together; here each round keeps its own verification, and a round's reviewer is one session, as a pass is one request.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.quality_replicate import COMPARED, sources  # noqa: E402
from bench.quality_score import published_score, shown  # noqa: E402
from bench.quality_stats import Counts, describe, paired_difference, pool, totals  # noqa: E402
from bench.review_quality import CORPUS, CaseRun, load_cases, run  # noqa: E402
from reviewer_app.core.passes import VOTE_CONFIDENCE, merge_passes  # noqa: E402
from reviewer_app.core.precision import DEFAULT_MAX_COMMENTS, rank_and_cap  # noqa: E402
from reviewer_app.core.review_model import ModelComment  # noqa: E402

Rule = Callable[[int, int, Sequence[ModelComment]], bool]  # (votes, passes, the findings merged) -> kept
CONFIDENT = VOTE_CONFIDENCE  # "or verified at this confidence": one pass's finding the verifier is sure of


def _confident(group: Sequence[ModelComment]) -> bool:
    return max((c.confidence or 0) for c in group) >= CONFIDENT


RULES: dict[str, Rule] = {
    "union (passes: N as built)": lambda votes, n, group: True,
    "majority of the passes": lambda votes, n, group: 2 * votes > n,
    f"majority, or verified at {CONFIDENT}+": lambda votes, n, group: 2 * votes > n or _confident(group),
}


def passes_counts(runs: Sequence[CaseRun], rule: Rule) -> Counts:
    """One case reviewed in ``len(runs)`` passes, each pass one round's answer: (shown, matching, known issues,
    found)."""
    indexes = [shown(r.candidates, evidence=True, verify=True, cap=False) for r in runs]
    kept = [[r.candidates[i][0] for i in chosen] for r, chosen in zip(runs, indexes, strict=True)]
    match = {id(r.candidates[i][0]): r.matches.get(i) for r, chosen in zip(runs, indexes, strict=True) for i in chosen}
    merged = merge_passes(kept)
    chosen = {
        id(c): group
        for c, votes, group in zip(merged.comments, merged.votes, merged.groups, strict=True)
        if rule(votes, len(runs), group)
    }
    published = rank_and_cap([c for c in merged.comments if id(c) in chosen], max_comments=DEFAULT_MAX_COMMENTS).shown
    hits = [next((match[id(m)] for m in chosen[id(c)] if match[id(m)] is not None), None) for c in published]
    issues = len(runs[0].case["known_issues"])
    return len(published), sum(h is not None for h in hits), issues, len({h for h in hits if h is not None})


async def replayed() -> dict[str, list[dict[str, CaseRun]]]:
    """Per compared configuration, each of its rounds on the product as it is: its complete cases' runs by id."""
    cases = load_cases(CORPUS)
    out: dict[str, list[dict[str, CaseRun]]] = {c: [] for c in COMPARED}
    for _, config, recordings in sources():
        runs = await run(cases, recordings=recordings, configs=[config])
        out[config].append({r.case["id"]: r for r in runs if r.complete})
    return out


def render(rounds: dict[str, list[dict[str, CaseRun]]]) -> str:
    base_config = COMPARED[0]
    single = {
        c: pool([{case: published_score(r).counts for case, r in one.items()} for one in rs])
        for c, rs in rounds.items()
    }
    lines = ["one pass, pooled over the rounds:"]
    for c, counts in single.items():
        p, r = totals(counts)
        lines.append(f"  {c:20} {len(rounds[c])} rounds  P {p:4.1f}  R {r:4.1f}")
    for config, rs in rounds.items():
        for n in range(2, len(rs) + 1):
            combos = list(itertools.combinations(rs, n))
            for name, rule in RULES.items():
                per_combo = []
                for combo in combos:
                    cases = sorted(set.intersection(*(set(one) for one in combo)))
                    per_combo.append({case: passes_counts([one[case] for one in combo], rule) for case in cases})
                pooled = pool(per_combo)
                p, r = totals(pooled)
                d = paired_difference(single[base_config], pooled)
                lines.append(
                    f"{config}, {n} passes ({len(combos)} sets of rounds), {name}: P {p:4.1f}  R {r:4.1f}; "
                    f"against one pass of {base_config}: {describe(d)}"
                )
    return "\n".join(lines)


def main() -> int:
    print(render(asyncio.run(replayed())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
