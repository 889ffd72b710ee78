"""A configuration's second, independent round of blind answers (a replicate, kept in its own recordings directory
under bench/quality_replicates/) against the rounds in bench/quality_recordings: each round's precision and recall,
and each configuration against the first, paired by case, with a 95 % bootstrap interval (bench/quality_stats.py).

    python bench/quality_replicate.py                      # every replicate against the main recordings

A replicate directory is named ``<configuration>-r<round>``, the configuration with spaces as dashes and ``+`` as
``plus`` (``diff-only-r8``); it holds only the answers of that configuration's requests, reviews, verifications and
judgements alike, recorded by the same loop as the main ones with ``--recordings DIR``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.quality_stats import Counts, paired_difference  # noqa: E402
from bench.review_quality import CONFIGS, CORPUS, RECORDINGS, load_cases, published_score, run  # noqa: E402

REPLICATES = ROOT / "bench" / "quality_replicates"
COMPARED = ("diff only", "codebase + tools")


def config_of(directory: Path) -> str:
    name = directory.name.rsplit("-r", 1)[0].replace("plus", "+").replace("-", " ")
    return next(c for c in CONFIGS if c == name)


async def rounds() -> dict[str, dict[str, Counts]]:
    cases = load_cases(CORPUS)
    out: dict[str, dict[str, Counts]] = {}
    sources = [(f"{c} (main recordings)", c, RECORDINGS) for c in COMPARED]
    sources += [(f"{config_of(d)} ({d.name})", config_of(d), d) for d in sorted(REPLICATES.glob("*-r*")) if d.is_dir()]
    for label, config, recordings in sources:
        runs = await run(cases, recordings=recordings, configs=[config])
        out[label] = {r.case["id"]: published_score(r).counts for r in runs if r.complete}
    return out


def main() -> int:
    found = asyncio.run(rounds())
    first = next(iter(found))
    for label, counts in found.items():
        shown_, hits, issues, got = (sum(c[i] for c in counts.values()) for i in range(4))
        print(
            f"{label:44} cases {len(counts):2}  P {100 * hits / max(1, shown_):4.1f}  R {100 * got / max(1, issues):4.1f}"
        )
        if label != first:
            d = paired_difference(found[first], counts)
            print(
                f"{'':44} against {first}: precision {d.precision:+.1f} ({d.precision_low:+.1f} to "
                f"{d.precision_high:+.1f}), recall {d.recall:+.1f} ({d.recall_low:+.1f} to {d.recall_high:+.1f})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
