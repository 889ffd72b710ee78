"""The dashboard's Outcomes page (read-only): the acted-on rate over time as an inline SVG chart (drawn here, no
script), each experiment's variants side by side, the table by dimension and the worst categories with examples
linked (pure: from the outcomes report, reviewer_app/outcomes_report.py, to HTML, every untrusted text escaped)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from reviewer_app.outcomes_report import DIMENSIONS, dollars, interval_text, percent
from reviewer_app.web.dashboard_pages import e, num, one_line, table, td

DEFAULT_DAYS = 30
FATE_COLUMNS = (
    ("fixed", "fixed"),
    ("dismissed", "dismissed"),
    ("open at merge", "open_at_merge"),
    ("open at close", "open_at_close"),
    ("open", "open"),
)
CHART_W, CHART_H, PAD_L, PAD_R, PAD_T, PAD_B = 960, 280, 48, 16, 16, 40
SHOWN_VALUES = 15  # rows per dimension table, the most decided first


def rate_chart(days: Sequence[Mapping[str, Any]]) -> str:
    """The acted-on rate per day as an SVG line with its 95% interval as a band (days with no decided finding are
    skipped), drawn with presentation attributes only, so the page's style policy needs no exception."""
    points = [d for d in days if d["decided"]]
    w, h = CHART_W - PAD_L - PAD_R, CHART_H - PAD_T - PAD_B
    parts = [
        f"<svg id=rate-chart xmlns='http://www.w3.org/2000/svg' width='{CHART_W}' height='{CHART_H}' "
        f"viewBox='0 0 {CHART_W} {CHART_H}' role='img' aria-label='Acted-on rate per day'>",
        f"<rect x='0' y='0' width='{CHART_W}' height='{CHART_H}' fill='#fff' stroke='#d0d7de'/>",
    ]
    for pct in (0, 25, 50, 75, 100):
        y = PAD_T + h * (1 - pct / 100)
        parts.append(f"<line x1='{PAD_L}' x2='{CHART_W - PAD_R}' y1='{y:.1f}' y2='{y:.1f}' stroke='#eaeef2'/>")
        parts.append(
            f"<text x='{PAD_L - 6}' y='{y + 4:.1f}' text-anchor='end' font-size='11' fill='#59636e'>{pct}%</text>"
        )
    if not points:
        parts.append(
            f"<text x='{CHART_W / 2}' y='{CHART_H / 2}' text-anchor='middle' fill='#59636e'>No decided finding yet.</text>"
        )
        return "".join(parts) + "</svg>"
    first, last = points[0]["day"], points[-1]["day"]
    span = max(1, last - first)

    def x(day: int) -> float:
        return PAD_L + (w / 2 if last == first else w * (day - first) / span)

    def y(rate: float) -> float:
        return PAD_T + h * (1 - rate)

    upper = [f"{x(d['day']):.1f},{y(d['interval_95'][1]):.1f}" for d in points]
    lower = [f"{x(d['day']):.1f},{y(d['interval_95'][0]):.1f}" for d in reversed(points)]
    parts.append(f"<polygon points='{' '.join(upper + lower)}' fill='#0969da' fill-opacity='0.12'/>")
    line = " ".join(f"{x(d['day']):.1f},{y(d['acted_on_rate']):.1f}" for d in points)
    parts.append(f"<polyline points='{line}' fill='none' stroke='#0969da' stroke-width='2'/>")
    step = max(1, len(points) // 8)
    for i, d in enumerate(points):
        cx, cy = x(d["day"]), y(d["acted_on_rate"])
        tip = f"{d['date']}: {percent(d['acted_on_rate'])} of {d['decided']} decided"
        parts.append(f"<circle cx='{cx:.1f}' cy='{cy:.1f}' r='3.5' fill='#0969da'><title>{e(tip)}</title></circle>")
        if i % step == 0 or i == len(points) - 1:
            parts.append(
                f"<text x='{cx:.1f}' y='{CHART_H - PAD_B + 18}' text-anchor='middle' font-size='11' fill='#59636e'>"
                f"{e(d['date'][5:])}</text>"
            )
    return "".join(parts) + "</svg>"


def outcome_days(raw: str) -> tuple[float, str]:
    """The period the page shows (``?days=``), and what was wrong with the one asked for."""
    if not raw.strip():
        return DEFAULT_DAYS, ""
    try:
        days = float(raw)
    except ValueError:
        days = -1.0
    if not 0 < days <= 3650:
        return DEFAULT_DAYS, f"days {raw!r} is not a number from 0 to 3650: showing {DEFAULT_DAYS}"
    return days, ""


def _rate_cells(row: Mapping[str, Any]) -> list[str]:
    return [
        f"<td class=n>{percent(row['acted_on_rate'])}</td>",
        f"<td class=n>{interval_text(row['interval_95'])}</td>",
        *(num(row[key]) for _, key in FATE_COLUMNS),
    ]


RATE_HEAD = ("acted-on rate", "95% interval", *(name for name, _ in FATE_COLUMNS))


def _experiment(x: Mapping[str, Any]) -> str:
    rows = []
    for v in x["variants"]:
        settings = ", ".join(f"{k}: {json.dumps(val)}" for k, val in sorted(v["settings"].items())) or "-"
        per = v["findings_per_review"]
        rows.append(
            [
                td(v["variant"]),
                td(settings),
                num(v["reviews"]),
                f"<td class=n>{'-' if per is None else f'{per:.1f}'}</td>",
                f"<td class=n>{e(dollars(v['cost_per_review']))}</td>",
                *_rate_cells(v),
            ]
        )
    head = ("variant", "settings", "reviews", "findings per review", "cost per review", *RATE_HEAD)
    verdict = "significant" if x["significant"] else "not-significant"
    return (
        f"<h3>{e(x['name'])}</h3><p class='{verdict}' id='experiment-{e(x['name'])}-note'>{e(x['note'])}.</p>"
        + table(head, rows, numeric=range(2, len(head)))
    )


def _worst(worst: Sequence[Mapping[str, Any]]) -> str:
    if not worst:
        return "<p class=muted>No category has a decided finding yet.</p>"
    out = []
    for c in worst:
        examples = "".join(
            f"<li><a href='{e(f['url'])}' rel=noreferrer>{e(f['repo'])}#{f['pr']}</a> {e(f['path'])}:{f['line']} "
            f"({e(f['fate'].replace('_', ' '))}): {e(one_line(f['title'], 100))}</li>"
            for f in c["examples"]
        )
        out.append(
            f"<li><b>{e(c['value'])}</b>: {percent(c['acted_on_rate'])} acted on, {c['fixed']} of {c['decided']} "
            f"decided<ul>{examples}</ul></li>"
        )
    return f"<ol id=worst>{''.join(out)}</ol>"


def outcomes_page(report: Mapping[str, Any], *, days: float, repo: str) -> str:
    overall = report["overall"]
    form = (
        "<form class=filter method=get action='/dashboard/outcomes'>"
        f"<label>repository <input name=repo value='{e(repo)}' placeholder='owner/name'></label>"
        f"<label>days <input name=days value='{days:g}' size=4></label><button type=submit>Show</button></form>"
    )
    cards = "".join(
        f"<div class=card id=fate-{key}><b>{overall[key]:,}</b>{e(name)}</div>" for name, key in FATE_COLUMNS
    )
    summary = (
        f"<p id=rate>Acted-on rate over the last {days:g} days: <b>{percent(overall['acted_on_rate'])}</b> "
        f"(95% interval {interval_text(overall['interval_95'])}) of {overall['decided']:,} decided findings, "
        f"{report['reviews']:,} reviews. Acted on = fixed / (fixed + dismissed + open at merge); findings still open "
        "and those of pull requests closed without merging are not counted.</p>"
    )
    experiments = "".join(_experiment(x) for x in report["experiments"]) or (
        "<p class=muted>No experiment: set one in .github/reviewer.yml or REVIEWER_EXPERIMENT (docs/operations.md).</p>"
    )
    dimensions = "".join(
        f"<h3>By {e(d.replace('_', ' '))}</h3>"
        + table(
            (d.replace("_", " "), *RATE_HEAD),
            ([td(r["value"]), *_rate_cells(r)] for r in report["by"][d][:SHOWN_VALUES]),
            numeric=range(1, len(RATE_HEAD) + 1),
            empty="No findings.",
        )
        for d in DIMENSIONS
    )
    return (
        form
        + summary
        + f"<div class=cards>{cards}</div>"
        + "<h2>Acted-on rate per day (the band is its 95% interval)</h2>"
        + rate_chart(report["days"])
        + "<h2>Experiments</h2>"
        + experiments
        + "<h2>Worst categories</h2>"
        + _worst(report["worst_categories"])
        + "<h2>By dimension</h2>"
        + dimensions
    )
