"""Every round of blind answers of the compared configurations, each alone and pooled: the main recordings
(bench/quality_recordings), the replicates kept in their own directories under bench/quality_replicates/, and the
per-case counts of rounds of an earlier product kept there as ``<configuration>-r<round>.counts.json``. Each round's
precision and recall, each against the first, paired by case, and the configurations pooled over their rounds against
each other, with 95 % bootstrap intervals (bench/quality_stats.py).

    python bench/quality_replicate.py                      # every round, and the pooled comparison

A replicate directory is named ``<configuration>-r<round>``, the configuration with spaces as dashes and ``+`` as
``plus`` (``diff-only-r8``); it holds only the answers of that configuration's requests, reviews, verifications and
judgements alike, recorded by the same loop as the main ones with ``--recordings DIR``. How issue 40's clause is read
on the pooled rounds was fixed before round 9's answers (bench/quality_replicates/README.md)."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.quality_score import published_score  # noqa: E402
from bench.quality_stats import Counts, Difference, describe, paired_difference, pool, totals  # noqa: E402
from bench.review_quality import CONFIGS, CORPUS, RECORDINGS, load_cases, run  # noqa: E402

REPLICATES = ROOT / "bench" / "quality_replicates"
COMPARED = ("diff only", "codebase + tools")
RECALL_GAIN = 10.0  # issue 40: recall up by at least this many points, precision at or above the diff's


@dataclass
class Round:
    label: str
    config: str
    counts: dict[str, Counts]
    current: bool  # recorded with the product as it is (replays on this tree); False: an earlier product's counts


def config_of(directory: Path) -> str:
    name = directory.name.split(".", 1)[0].rsplit("-r", 1)[0].replace("plus", "+").replace("-", " ")
    return next(c for c in CONFIGS if c == name)


def sources() -> list[tuple[str, str, Path]]:
    """Every recorded round of the compared configurations on the product as it is: (label, configuration, the
    recordings it replays from)."""
    found = [(f"{c} (main recordings)", c, RECORDINGS) for c in COMPARED]
    return found + [
        (f"{config_of(d)} ({d.name})", config_of(d), d) for d in sorted(REPLICATES.glob("*-r*")) if d.is_dir()
    ]


async def rounds() -> list[Round]:
    cases = load_cases(CORPUS)
    out: list[Round] = []
    for label, config, recordings in sources():
        runs = await run(cases, recordings=recordings, configs=[config])
        out.append(Round(label, config, {r.case["id"]: published_score(r).counts for r in runs if r.complete}, True))
    for file in sorted(REPLICATES.glob("*-r*.counts.json")):
        data = json.loads(file.read_text())
        counts = {case: tuple(row) for case, row in data["counts"].items()}
        out.append(Round(f"{config_of(file)} ({file.name}, {data['product']})", config_of(file), counts, False))
    return out


def clause_met(d: Difference) -> bool:
    return d.recall >= RECALL_GAIN and d.precision >= 0.0


def render(found: list[Round]) -> str:
    lines = []
    first = found[0]
    for r in found:
        p, rc = totals(r.counts)
        lines.append(f"{r.label:60} cases {len(r.counts):2}  P {p:4.1f}  R {rc:4.1f}")
        if r is not first:
            lines.append(f"{'':60} against {first.label}: {describe(paired_difference(first.counts, r.counts))}")
    base, other = COMPARED
    for title, chosen in (
        ("rounds of the current product", [r for r in found if r.current]),
        ("every round, earlier products' too", found),
    ):
        pooled = {c: pool([r.counts for r in chosen if r.config == c]) for c in COMPARED}
        n = {c: sum(1 for r in chosen if r.config == c) for c in COMPARED}
        lines += ["", f"pooled, {title}:"]
        for c in COMPARED:
            p, rc = totals(pooled[c])
            lines.append(f"  {c:20} {n[c]} rounds  P {p:4.1f}  R {rc:4.1f}")
        d = paired_difference(pooled[base], pooled[other])
        verdict = "met" if clause_met(d) else "not met"
        lines.append(f"  {other} against {base}: {describe(d)}; issue 40's clause: {verdict}")
    return "\n".join(lines)


def main() -> int:
    print(render(asyncio.run(rounds())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
