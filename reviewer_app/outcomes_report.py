"""The outcomes report: the store's findings with their fates and the reviews that published them, summed into the
acted-on rate overall, by dimension, per day and per experiment variant (core/outcomes.py does the arithmetic).
`reviewer-app outcomes` prints it and the dashboard's outcomes page draws it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from reviewer_app.core.outcomes import Rate, by_dimension, category_of, days_of, differ, file_type_of, rate_of, worst
from reviewer_app.core.pricing import Price, cost
from reviewer_app.store.base import ReviewRun, Store

DIMENSIONS = ("repo", "severity", "category", "file_type", "model", "prompt_version", "learning")
DAY_SECONDS = 86400
EXAMPLES = 3  # findings shown under each of the worst categories


async def read_outcomes(
    store: Store,
    *,
    since: float,
    repo: str | None,
    prices: Mapping[str, Price],
    web_url: str = "https://github.com",
) -> dict[str, Any]:
    """The report over findings published since ``since`` (of ``repo``, owner/name, or every repository). A repository
    no job names has nothing to report."""
    repo_id = None
    if repo is not None:
        repo_id = await store.repo_id_of_name(repo)
        if repo_id is None:
            return outcomes_report([], [], prices, since=since, web_url=web_url)
    rows = await store.outcome_findings(since=since, repo_id=repo_id)
    runs = await store.review_runs(since=since, repo_id=repo_id)
    return outcomes_report(rows, runs, prices, since=since, web_url=web_url)


def _finding(row: Mapping[str, Any], web_url: str) -> dict[str, Any]:
    repo, pr, comment = row.get("repo") or "?", int(row["pr_number"]), row.get("comment_id")
    url = f"{web_url}/{quote(repo)}/pull/{pr}" + (f"#discussion_r{comment}" if comment else "")
    return {
        "repo": repo,
        "pr": pr,
        "path": row["path"],
        "line": int(row["line"]),
        "severity": row["severity"],
        "fate": row["fate"],
        "fate_source": row.get("fate_source"),
        "title": row["title"],
        "category": category_of(str(row["title"])),
        "file_type": file_type_of(str(row["path"])),
        "model": row.get("model") or "(not recorded)",
        "prompt_version": row.get("prompt_version") or "(not recorded)",
        "learning": "not recorded" if row.get("learnings") is None else ("used" if row["learnings"] else "none"),
        "experiment": row.get("experiment"),
        "variant": row.get("variant"),
        "url": url,
        "created_at": float(row["created_at"]),
    }


def _cost(run: ReviewRun, prices: Mapping[str, Price]) -> float | None:
    total = 0.0
    for u in run.usage:
        dollars = cost(
            prices,
            str(u.get("model") or ""),
            input_tokens=int(u.get("input_tokens") or 0),
            output_tokens=int(u.get("output_tokens") or 0),
            cache_creation_tokens=int(u.get("cache_creation_tokens") or 0),
            cache_read_tokens=int(u.get("cache_read_tokens") or 0),
            batched=False,
        ).dollars
        if dollars is None:
            return None
        total += dollars
    return total


def _rated(value: str, rate: Rate) -> dict[str, Any]:
    return {"value": value, **rate.as_dict()}


def _experiments(
    findings: Sequence[Mapping[str, Any]], runs: Sequence[ReviewRun], prices: Mapping[str, Price]
) -> list[dict[str, Any]]:
    names = sorted(
        {r.experiment for r in runs if r.experiment} | {f["experiment"] for f in findings if f["experiment"]}
    )
    out = []
    for name in names:
        variants, rates = [], {}
        for variant in ("a", "b"):
            mine = [r for r in runs if r.experiment == name and r.variant == variant]
            rate = rate_of(f["fate"] for f in findings if f["experiment"] == name and f["variant"] == variant)
            rates[variant] = rate
            costs = [c for c in (_cost(r, prices) for r in mine) if c is not None]
            variants.append(
                {
                    "variant": variant,
                    "settings": dict(mine[-1].settings) if mine else {},
                    "reviews": len(mine),
                    "findings_per_review": sum(r.findings for r in mine) / len(mine) if mine else None,
                    "cost_per_review": sum(costs) / len(costs) if costs else None,
                    **rate.as_dict(),
                }
            )
        significant = differ(rates["a"], rates["b"])
        if significant is None:
            note = "not yet significant: a variant has no decided finding yet"
        elif significant:
            note = "the difference is significant at 95%"
        else:
            note = "not yet significant at 95%: the intervals overlap too much for the findings decided so far"
        out.append({"name": name, "variants": variants, "significant": bool(significant), "note": note})
    return out


def outcomes_report(
    rows: Sequence[Mapping[str, Any]],
    runs: Sequence[ReviewRun],
    prices: Mapping[str, Price],
    *,
    since: float,
    web_url: str = "https://github.com",
) -> dict[str, Any]:
    """Everything the CLI's JSON and the dashboard show, from the store's rows (pure)."""
    findings = [_finding(r, web_url) for r in rows]
    by = {d: [_rated(v, r) for v, r in by_dimension(findings, d)] for d in DIMENSIONS}
    worst_categories = []
    for category, rate in worst(by_dimension(findings, "category"), at_least=1):
        examples = [f for f in findings if f["category"] == category and f["fate"] != "fixed"][:EXAMPLES]
        worst_categories.append({**_rated(category, rate), "examples": examples})
    days = [
        {"day": day, "date": datetime.fromtimestamp(day * DAY_SECONDS, UTC).strftime("%Y-%m-%d"), **r.as_dict()}
        for day, r in days_of(findings, day_seconds=DAY_SECONDS)
    ]
    return {
        "since": since,
        "overall": rate_of(f["fate"] for f in findings).as_dict(),
        "reviews": len(runs),
        "by": by,
        "days": days,
        "worst_categories": worst_categories,
        "experiments": _experiments(findings, runs, prices),
        "findings": findings,
    }


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def interval_text(interval: Sequence[float] | None) -> str:
    return "-" if not interval else f"{interval[0] * 100:.0f}-{interval[1] * 100:.0f}%"


def dollars(value: float | None) -> str:
    return "?" if value is None else f"${value:,.4f}"


def render_outcomes(report: Mapping[str, Any], days: float) -> str:
    """The report as text for a terminal."""
    overall = report["overall"]
    if not report["findings"]:
        return f"no published findings in the last {days:g} days"
    lines = [
        f"acted-on rate over the last {days:g} days: {percent(overall['acted_on_rate'])} "
        f"(95% interval {interval_text(overall['interval_95'])}; {overall['fixed']} fixed, {overall['dismissed']} "
        f"dismissed, {overall['open_at_merge']} open at merge; {overall['open_at_close']} open at close and "
        f"{overall['open']} still open are not counted)",
    ]
    for dimension in DIMENSIONS:
        lines.append(f"\nby {dimension.replace('_', ' ')}:")
        for row in report["by"][dimension]:
            lines.append(
                f"  {row['value']:<32} {percent(row['acted_on_rate']):>5}  {row['fixed']} fixed / {row['decided']} "
                f"decided ({row['open_at_close'] + row['open']} not counted)"
            )
    for experiment in report["experiments"]:
        lines.append(f"\nexperiment {experiment['name']}: {experiment['note']}")
        for v in experiment["variants"]:
            per = v["findings_per_review"]
            lines.append(
                f"  {v['variant']} {v['settings']}: {percent(v['acted_on_rate'])} "
                f"(95% {interval_text(v['interval_95'])}) of {v['decided']} decided; {v['reviews']} reviews, "
                f"{'-' if per is None else f'{per:.1f}'} findings and {dollars(v['cost_per_review'])} per review"
            )
    return "\n".join(lines)
