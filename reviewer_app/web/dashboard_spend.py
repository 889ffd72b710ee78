"""The dashboard's spend: model tokens per day and repository priced per model, and its chart as SVG (pygal)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pygal
from pygal.style import Style

from reviewer_app.core.prices import Price, estimate
from reviewer_app.web.dashboard_pages import SPEND_COLUMNS

DAYS = 30
CHART_SERIES = 8  # repositories drawn on their own; the rest are summed as "others"
DAY_SECONDS = 86400


@dataclass(frozen=True)
class Spend:
    days: list[int]  # the period's days (days since the epoch, UTC), oldest first
    totals: list[dict[str, Any]]  # per repository, the costliest first
    daily: list[dict[str, Any]]  # per day and repository, the newest day first


def _empty(repo: str) -> dict[str, Any]:
    return {"repo": repo, "jobs": 0, "cost": None, **{key: 0 for _, key in SPEND_COLUMNS}}


def _add(into: dict[str, Any], row: Mapping[str, Any], cost: float | None) -> None:
    into["jobs"] += int(row["jobs"])
    for _, key in SPEND_COLUMNS:
        into[key] += int(row[key] or 0)
    if cost is not None:
        into["cost"] = (into["cost"] or 0.0) + cost


def summarise(rows: Sequence[Mapping[str, Any]], prices: Mapping[str, Price], *, now: float) -> Spend:
    """Rows of ``Store.spend_by_day`` (one per day, repository and model) priced and summed per repository and
    per day and repository. A job whose attempts used two models counts in each model's row: the job counts are an
    upper bound when models were mixed."""
    today = int(now // DAY_SECONDS)
    days = list(range(today - DAYS + 1, today + 1))
    totals: dict[str, dict[str, Any]] = {}
    daily: dict[tuple[int, str], dict[str, Any]] = {}
    for row in rows:
        cost = estimate(row, prices)
        repo = str(row["repo"])
        _add(totals.setdefault(repo, _empty(repo)), row, cost)
        _add(daily.setdefault((int(row["day"]), repo), _empty(repo)), row, cost)
    for (day, _), r in daily.items():
        r["day"], r["date"] = day, date_of(day)
    return Spend(
        days=days,
        totals=sorted(totals.values(), key=lambda r: (-(r["cost"] or 0.0), r["repo"])),
        daily=sorted(daily.values(), key=lambda r: (-r["day"], -(r["cost"] or 0.0), r["repo"])),
    )


def date_of(day: int) -> str:
    return datetime.fromtimestamp(day * DAY_SECONDS, UTC).strftime("%Y-%m-%d")


STYLE = Style(
    background="white",
    plot_background="white",
    font_family="DejaVu Sans, sans-serif",
    colors=("#0969da", "#1a7f37", "#bf8700", "#cf222e", "#8250df", "#1b7c83", "#bc4c00", "#57606a", "#a0a7b0"),
)


def chart_svg(spend: Spend) -> bytes:
    """A stacked bar per day: each repository's estimated cost, the costliest ``CHART_SERIES`` apart, the rest as
    "others". pygal escapes the series names (repository names are untrusted text)."""
    chart = pygal.StackedBar(
        js=[],  # no script is fetched from elsewhere (the image runs none anyway)
        style=STYLE,
        width=960,
        height=400,
        title=f"Estimated cost per day (US$), last {DAYS} days",
        x_label_rotation=45,
        show_minor_x_labels=False,
        legend_at_bottom=True,
        legend_at_bottom_columns=3,
        print_values=False,
        value_formatter=lambda v: f"${v:,.2f}",
        y_title="US$",
    )
    chart.x_labels = [date_of(d)[5:] for d in spend.days]
    chart.x_labels_major = chart.x_labels[::5]
    shown = [r["repo"] for r in spend.totals[:CHART_SERIES]]
    index = {d: i for i, d in enumerate(spend.days)}
    series: dict[str, list[float]] = {repo: [0.0] * len(spend.days) for repo in shown}
    others = [0.0] * len(spend.days)
    for r in spend.daily:
        i = index.get(r["day"])
        if i is None:
            continue
        (series[r["repo"]] if r["repo"] in series else others)[i] += r["cost"] or 0.0
    for repo in shown:
        chart.add(repo, series[repo])
    if len(spend.totals) > CHART_SERIES:
        chart.add("others", others)
    if not shown:
        chart.add("no spend", [0.0] * len(spend.days))
    return chart.render()
