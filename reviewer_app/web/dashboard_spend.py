"""The dashboard's spend: model tokens per day and repository priced per model, and its chart as SVG (pygal)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reviewer_app.core.pricing import Price, cost, price_of

# The spend table's token columns (each row also says how many of its tokens went through Message Batches).
SPEND_COLUMNS = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cache write", "cache_creation_tokens"),
    ("cache read", "cache_read_tokens"),
)


DAYS = 30
CHART_SERIES = 8  # repositories drawn on their own; the rest are summed as "others"
COLORS = ("#0969da", "#1a7f37", "#bf8700", "#cf222e", "#8250df", "#1b7c83", "#bc4c00", "#57606a", "#a0a7b0")
OTHERS = "(others)"  # not a repository name: those always hold a slash
DAY_SECONDS = 86400


@dataclass(frozen=True)
class Spend:
    days: list[int]  # the period's days (days since the epoch, UTC), oldest first
    totals: list[dict[str, Any]]  # per repository, the costliest first: jobs, the token columns, cost
    per_day: list[dict[str, Any]]  # per day of ``days``: the token columns and cost of all repositories
    series: dict[str, list[float]]  # what the chart draws: cost per day of each top repository, then "others"


def _empty(repo: str) -> dict[str, Any]:
    """``unpriced``: some of the tokens are of a model without a price, so ``cost`` is less than the truth."""
    return {
        "repo": repo,
        "jobs": 0,
        "cost": 0.0,
        "unpriced": False,
        "batched_tokens": 0,  # of the token columns, those sent through Message Batches (half price)
        "saved": 0.0,  # what batching saved against the interactive price
        "verify_cost": 0.0,  # of ``cost``, what the verification pass of the reviews' findings cost
        **{key: 0 for _, key in SPEND_COLUMNS},
    }


def _add(into: dict[str, Any], row: Mapping[str, Any], dollars: float | None, saved: float | None) -> None:
    into["jobs"] += int(row["jobs"])
    for _, key in SPEND_COLUMNS:
        into[key] += int(row[key] or 0)
    if row.get("batched"):
        into["batched_tokens"] += sum(int(row[key] or 0) for _, key in SPEND_COLUMNS)
    if dollars is None:
        into["unpriced"] = True
    else:
        into["cost"] += dollars
        into["saved"] += saved or 0.0
        if row.get("verification"):
            into["verify_cost"] += dollars


def summarise(rows: Sequence[Mapping[str, Any]], prices: Mapping[str, Price], *, now: float) -> Spend:
    """Rows of ``Store.spend_by_day`` (one per day, repository and model) priced, and summed per repository, per
    day, and per day for the costliest ``CHART_SERIES`` repositories and the rest. A job whose attempts used two
    models counts in each model's row: the job counts are an upper bound when models were mixed."""
    today = int(now // DAY_SECONDS)
    days = list(range(today - DAYS + 1, today + 1))
    index = {d: i for i, d in enumerate(days)}
    totals: dict[str, dict[str, Any]] = {}
    per_day = [{**_empty(""), "day": d, "date": date_of(d)} for d in days]
    costs: list[tuple[int, str, float]] = []
    price_by_model: dict[str, Price | None] = {}
    for row in rows:
        i = index.get(int(row["day"]))
        if i is None:
            continue
        model = str(row["model"] or "")
        if model not in price_by_model:
            price_by_model[model] = price_of(prices, model)
        priced = cost(
            {model: price} if (price := price_by_model[model]) is not None else {},
            model,
            input_tokens=int(row["input_tokens"] or 0),
            output_tokens=int(row["output_tokens"] or 0),
            cache_creation_tokens=int(row["cache_creation_tokens"] or 0),
            cache_read_tokens=int(row["cache_read_tokens"] or 0),
            batched=bool(row.get("batched")),
        )
        if priced.dollars is not None:
            costs.append((i, str(row["repo"]), priced.dollars))
        repo = str(row["repo"])
        _add(totals.setdefault(repo, _empty(repo)), row, priced.dollars, priced.saved)
        _add(per_day[i], row, priced.dollars, priced.saved)
    ranked = sorted(totals.values(), key=lambda r: (-r["cost"], r["repo"]))
    shown = [r["repo"] for r in ranked[:CHART_SERIES]]
    series: dict[str, list[float]] = {repo: [0.0] * len(days) for repo in shown}
    if len(ranked) > CHART_SERIES:
        series[OTHERS] = [0.0] * len(days)
    for i, repo, dollars in costs:
        series[repo if repo in series and repo != OTHERS else OTHERS][i] += dollars
    return Spend(days=days, totals=ranked, per_day=per_day, series=series)


def date_of(day: int) -> str:
    return datetime.fromtimestamp(day * DAY_SECONDS, UTC).strftime("%Y-%m-%d")


def chart_svg(spend: Spend) -> bytes:
    """A stacked bar per day: each repository's estimated cost, the costliest ``CHART_SERIES`` apart, the rest as
    "others". pygal escapes the series names (repository names are untrusted text). Imported here: only a process
    that draws a chart pays for loading it."""
    import pygal
    from pygal.style import Style

    style = Style(
        background="white",
        plot_background="white",
        font_family="DejaVu Sans, sans-serif",
        colors=COLORS,
    )
    chart = pygal.StackedBar(
        js=[],  # no script is fetched from elsewhere (the image runs none anyway)
        style=style,
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
    for name, values in spend.series.items():
        chart.add(name, values)
    if not spend.series:
        chart.add("no spend", [0.0] * len(spend.days))
    return chart.render()
