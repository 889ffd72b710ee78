"""Scoring the quality bench's runs (bench/review_quality.py): which findings each variant shows (every filter on
and off, other thresholds and caps), precision, recall and F1 per language, the model's tokens and dollars per
review, the configurations compared with paired intervals (bench/quality_stats.py), and the text report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from bench.quality_model import REVIEW_MODEL, VERIFY_MODEL
from bench.quality_stats import Counts, Difference, describe, paired_difference
from reviewer_app.core.passes import outvoted
from reviewer_app.core.precision import DEFAULT_MAX_COMMENTS, DEFAULT_MIN_CONFIDENCE, INVENTED, OUTVOTED, rank_and_cap
from reviewer_app.core.pricing import DEFAULT_PRICES, cost
from reviewer_app.core.review_model import ModelComment

if TYPE_CHECKING:
    from bench.review_quality import CaseRun

# Variants: (name, evidence check, verification, cap).
VARIANTS: tuple[tuple[str, bool, bool, bool], ...] = (
    ("no filter", False, False, False),
    ("evidence check only", True, False, False),
    ("verification only", False, True, False),
    ("cap only", False, False, True),
    ("all but the evidence check", False, True, True),
    ("all but verification", True, False, True),
    ("all but the cap", True, True, False),
    ("all three (production)", True, True, True),
)


def shown(
    candidates: Sequence[tuple[ModelComment, str | None]],
    *,
    evidence: bool,
    verify: bool,
    cap: bool,
    min_confidence: int = DEFAULT_MIN_CONFIDENCE,
    max_comments: int = DEFAULT_MAX_COMMENTS,
    passes: int = 1,
) -> list[int]:
    """The indexes of the candidates a variant shows. Without the evidence check an invented finding is kept (it was
    never verified: it stays unverified); verification withholds the refuted and those under ``min_confidence``; the
    cap shows the first ``max_comments`` critical and warning findings, ranked, and folds the rest. With verification,
    a review of several ``passes`` also holds its vote (core/passes.outvoted)."""
    kept = []
    for i, (c, reason) in enumerate(candidates):
        if evidence and reason == INVENTED:
            continue
        if verify and (c.verdict == "refuted" or (c.confidence is not None and c.confidence < min_confidence)):
            continue
        if verify and passes > 1 and reason in (None, OUTVOTED) and outvoted([c], passes)[1]:
            continue
        kept.append(i)
    if not cap:
        return kept
    chosen = rank_and_cap([candidates[i][0] for i in kept], max_comments=max_comments).shown
    ids = {id(c) for c in chosen}
    return [i for i in kept if id(candidates[i][0]) in ids]


def passes_of(run: CaseRun) -> int:
    """How many review passes vote on the case's findings: those it made when its configuration turns the vote on
    (``passes_vote: true``), else 1 (every finding of every pass kept)."""
    from bench.review_quality import CONFIGS

    if run.answer is None or "passes_vote: true" not in CONFIGS.get(run.config, ""):
        return 1
    return max(1, len(run.answer.passes))


@dataclass
class Score:
    findings: int = 0
    hits: int = 0  # shown findings that match a known issue
    issues: int = 0
    found: int = 0  # known issues matched by a shown finding

    def add(self, other: Score) -> None:
        self.findings += other.findings
        self.hits += other.hits
        self.issues += other.issues
        self.found += other.found

    @property
    def precision(self) -> float:
        return self.hits / self.findings if self.findings else 0.0

    @property
    def recall(self) -> float:
        return self.found / self.issues if self.issues else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def counts(self) -> Counts:
        """(shown, matching, known issues, found): what bench/quality_stats.py resamples."""
        return self.findings, self.hits, self.issues, self.found

    def row(self) -> dict[str, Any]:
        return {
            "findings": self.findings,
            "matching": self.hits,
            "known_issues": self.issues,
            "found": self.found,
            "precision": round(self.precision, 3),
            "recall": round(self.recall, 3),
            "f1": round(self.f1, 3),
        }


def score(run: CaseRun, indexes: Sequence[int]) -> Score:
    return Score(
        findings=len(indexes),
        hits=sum(1 for i in indexes if i in run.matches),
        issues=len(run.case["known_issues"]),
        found=len({run.matches[i] for i in indexes if i in run.matches}),
    )


def table(runs: Sequence[CaseRun], **thresholds: Any) -> dict[str, dict[str, dict[str, Any]]]:
    """Per variant: per language and overall, the summed score."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name, evidence, verify, cap in VARIANTS:
        by: dict[str, Score] = {}
        for run in runs:
            s = score(
                run,
                shown(run.candidates, evidence=evidence, verify=verify, cap=cap, passes=passes_of(run), **thresholds),
            )
            by.setdefault(run.case["language"], Score()).add(s)
            by.setdefault("overall", Score()).add(s)
        out[name] = {lang: s.row() for lang, s in sorted(by.items(), key=lambda kv: (kv[0] == "overall", kv[0]))}
    return out


def sweep(runs: Sequence[CaseRun]) -> dict[str, dict[str, Any]]:
    """All three filters at other thresholds and caps: what the defaults trade."""
    out: dict[str, dict[str, Any]] = {}
    settings = [("min_confidence", v) for v in (0, 40, 50, 60, 70, 80, 90)]
    settings += [("max_comments", v) for v in (1, 2, 3, 5, 8, 50)]
    for key, value in settings:
        total = Score()
        for run in runs:
            total.add(score(run, published(run, **{key: value})))
        out[f"{key} {value}"] = total.row()
    return out


def published(run: CaseRun, **thresholds: Any) -> list[int]:
    """The candidates the app publishes (every filter on), at the default thresholds unless others are given."""
    return shown(run.candidates, evidence=True, verify=True, cap=True, passes=passes_of(run), **thresholds)


CACHED = ("cache_creation_input_tokens", "cache_read_input_tokens")


def price(model: str, usage: dict[str, int]) -> float:
    priced = cost(
        DEFAULT_PRICES,
        model,
        input_tokens=usage.get("input_tokens", 0),
        output_tokens=usage.get("output_tokens", 0),
        cache_creation_tokens=usage.get("cache_creation_input_tokens", 0),
        cache_read_tokens=usage.get("cache_read_input_tokens", 0),
        batched=False,
    )
    return priced.dollars or 0.0


def costs(runs: Sequence[CaseRun]) -> dict[str, Any]:
    """Tokens and dollars per review from the recordings' usage: the review's requests, and the verification's."""
    reviewed = [r for r in runs if r.usage.get("review")]
    if not reviewed:
        return {}
    n = len(reviewed)

    def mean(kind: str, key: str) -> float:
        return sum(r.usage.get(kind, {}).get(key, 0) for r in reviewed) / n

    def prompt(kind: str) -> float:  # every input token, however the prompt cache split them
        return sum(mean(kind, key) for key in ("input_tokens", *CACHED))

    review_usd = sum(price(REVIEW_MODEL, r.usage.get("review", {})) for r in reviewed) / n
    verify_usd = sum(price(VERIFY_MODEL, r.usage.get("verify", {})) for r in reviewed) / n
    return {
        "reviews": n,
        "verified_reviews": sum(1 for r in reviewed if r.usage.get("verify")),
        "review_input_tokens": round(prompt("review")),
        "review_output_tokens": round(mean("review", "output_tokens")),
        "verify_input_tokens": round(prompt("verify")),
        "verify_output_tokens": round(mean("verify", "output_tokens")),
        "cache_read_share": round(
            sum(mean(k, "cache_read_input_tokens") for k in ("review", "verify"))
            / max(1.0, prompt("review") + prompt("verify")),
            3,
        ),
        "usd_per_review_verification_off": round(review_usd, 4),
        "usd_per_review_verification_on": round(review_usd + verify_usd, 4),
        "verification_share": round(verify_usd / (review_usd + verify_usd), 3) if review_usd + verify_usd else 0.0,
        "by": sorted({who for r in reviewed for who in r.answered_by}),
    }


def check(runs: Sequence[CaseRun]) -> list[str]:
    """Where the app's publication differs from the scoring's production variant (it must not)."""
    problems = []
    for r in runs:
        expected = len(published(r))
        if r.complete and expected != r.published:
            problems.append(f"{r.case['id']}: the app showed {r.published} findings, the scoring {expected}")
    return problems


def report(runs: Sequence[CaseRun]) -> dict[str, Any]:
    complete = [r for r in runs if r.complete]
    return {
        "cases": len(runs),
        "complete": len(complete),
        "incomplete": [r.case["id"] for r in runs if not r.complete],
        "languages": sorted({r.case["language"] for r in complete}),
        "variants": table(complete),
        "sweep": sweep(complete),
        "cost": costs(complete),
        "held_back": {
            reason: sum(1 for r in complete for _, why in r.candidates if why == reason)
            for reason in sorted({why for r in complete for _, why in r.candidates if why})
        },
        "model_findings": sum(len(r.candidates) for r in complete),
        "consistency": check(complete),
        "per_case": [
            {
                "id": r.case["id"],
                "language": r.case["language"],
                "findings": len(r.candidates),
                "shown": r.published,
                "known_issues": len(r.case["known_issues"]),
                "found": score(r, published(r)).found,
                "found_unfiltered": score(r, shown(r.candidates, evidence=False, verify=False, cap=False)).found,
            }
            for r in complete
        ],
    }


def compare(runs: Sequence[CaseRun], configs: Sequence[str]) -> dict[str, Any]:
    """Per configuration: the published findings' precision, recall and F1 per language (the production variant), over
    the cases complete in every configuration, and the model tokens and cost per review."""
    complete = {r.case["id"] for r in runs if r.complete}
    for config in configs:
        complete &= {r.case["id"] for r in runs if r.config == config and r.complete}
    out: dict[str, Any] = {"cases": sorted(complete), "configs": {}}
    counts: dict[str, dict[str, Counts]] = {}
    for config in configs:
        chosen = [r for r in runs if r.config == config and r.case["id"] in complete]
        by: dict[str, Score] = {}
        for r in chosen:
            s = published_score(r)
            by.setdefault(r.case["language"], Score()).add(s)
            by.setdefault("overall", Score()).add(s)
            counts.setdefault(config, {})[r.case["id"]] = s.counts
        rows = {k: v.row() for k, v in sorted(by.items(), key=lambda kv: (kv[0] == "overall", kv[0]))}
        out["configs"][config] = {"scores": rows, "cost": costs(chosen)}
    # Each configuration against the first, paired by case: how sure the difference is (bench/quality_stats.py).
    out["against_first"] = {
        config: asdict(paired_difference(counts.get(configs[0], {}), counts.get(config, {}))) for config in configs[1:]
    }
    return out


def published_score(run: CaseRun) -> Score:
    """The case's score as the app published it (the production variant: every filter on)."""
    return score(run, published(run))


def render_comparison(result: dict[str, Any]) -> str:
    lines = [
        f"configurations compared over the {len(result['cases'])} cases complete in each (published findings):",
        f"{'configuration':22} {'language':12} {'shown':>5} {'match':>5} {'issues':>6} {'found':>5} {'P':>5} {'R':>5} "
        f"{'F1':>5} {'tokens in/out per review':>26} {'US$/review':>10} {'cached':>6}",
    ]
    for config, row in result["configs"].items():
        c = row["cost"] or {}
        tokens = (
            f"{c.get('review_input_tokens', 0) + c.get('verify_input_tokens', 0):,}/"
            f"{c.get('review_output_tokens', 0) + c.get('verify_output_tokens', 0):,}"
        )
        usd = f"{c.get('usd_per_review_verification_on', 0.0):.4f}"
        cached = f"{c.get('cache_read_share', 0.0):.0%}"
        for lang, s in row["scores"].items():
            last = lang == "overall"
            lines.append(
                f"{config:22} {lang:12} {s['findings']:5} {s['matching']:5} {s['known_issues']:6} {s['found']:5} "
                f"{s['precision']:5.0%} {s['recall']:5.0%} {s['f1']:5.2f} {tokens if last else '':>26} "
                f"{usd if last else '':>10} {cached if last else '':>6}"
            )
    first = next(iter(result["configs"]), "")
    for config, d in result.get("against_first", {}).items():
        lines.append(
            f"{config} against {first}, paired by case (95 % bootstrap interval): "
            f"{describe(Difference(**d), ' points')}"
        )
    return "\n".join(lines)


def render(result: dict[str, Any]) -> str:
    lines = [
        f"cases: {result['complete']} complete of {result['cases']}"
        + (f" (incomplete: {', '.join(result['incomplete'])})" if result["incomplete"] else ""),
        f"findings the model made: {result['model_findings']}; held back before publication: {result['held_back']}",
        "",
        f"{'variant':28} {'language':12} {'shown':>5} {'match':>5} {'issues':>6} {'found':>5} {'P':>5} {'R':>5} {'F1':>5}",
    ]
    for variant, rows in result["variants"].items():
        for lang, s in rows.items():
            lines.append(
                f"{variant:28} {lang:12} {s['findings']:5} {s['matching']:5} {s['known_issues']:6} {s['found']:5} "
                f"{s['precision']:5.0%} {s['recall']:5.0%} {s['f1']:5.2f}"
            )
    lines.append("")
    for name, s in result["sweep"].items():
        lines.append(
            f"{name:20} shown {s['findings']:3}  P {s['precision']:4.0%}  R {s['recall']:4.0%}  F1 {s['f1']:.2f}"
        )
    if result["cost"]:
        c = result["cost"]
        lines += [
            "",
            f"model cost per review ({c['reviews']} reviews, {c['verified_reviews']} verified; usage by {c['by']}):",
            f"  review:       {c['review_input_tokens']:,} input + {c['review_output_tokens']:,} output tokens",
            f"  verification: {c['verify_input_tokens']:,} input + {c['verify_output_tokens']:,} output tokens",
            f"  US$ {c['usd_per_review_verification_off']:.4f} without verification, "
            f"{c['usd_per_review_verification_on']:.4f} with ({c['verification_share']:.0%} of it verification; "
            f"{c['cache_read_share']:.0%} of the input tokens read from the prompt cache)",
        ]
    if result["consistency"]:
        lines += ["", "INCONSISTENT:", *result["consistency"]]
    return "\n".join(lines)
