"""`reviewer-app usage`: model tokens per repository, kind and model, what they cost and what batching saved."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reviewer_app.core.pricing import DEFAULT_PRICES, Price, cost


def usage_report(rows: list[dict[str, Any]], prices: Mapping[str, Price]) -> dict[str, Any]:
    """The store's usage rows with what they cost and saved (US dollars, from ``prices``; None where the model has no
    price), and the totals: interactive and batched tokens apart, and what batching saved."""
    priced: list[dict[str, Any]] = []
    for r in rows:
        c = cost(
            prices,
            r["model"],
            input_tokens=r["input_tokens"],
            output_tokens=r["output_tokens"],
            cache_creation_tokens=r["cache_creation_tokens"],
            cache_read_tokens=r["cache_read_tokens"],
            batched=r["batched"],
        )
        priced.append({**r, "cost_usd": c.dollars, "saved_usd": c.saved})
    totals: dict[str, Any] = {}
    for way, batched in (("interactive", False), ("batched", True)):
        mine = [r for r in priced if r["batched"] is batched]
        totals[f"{way}_tokens"] = sum(
            r["input_tokens"] + r["output_tokens"] + r["cache_creation_tokens"] + r["cache_read_tokens"] for r in mine
        )
        totals[f"{way}_usd"] = sum(r["cost_usd"] or 0.0 for r in mine)
    totals["saved_usd"] = sum(r["saved_usd"] or 0.0 for r in priced)
    totals["unpriced_models"] = sorted({r["model"] or "unknown" for r in priced if r["cost_usd"] is None})
    return {"rows": priced, "totals": totals}


def render_usage(rows: list[dict[str, Any]], days: float, prices: Mapping[str, Price] = DEFAULT_PRICES) -> str:
    if not rows:
        return f"no model usage in the last {days:g} days"
    report = usage_report(rows, prices)
    head = f"model tokens in the last {days:g} days (interactive: attempts that called the model; batched: Message Batches):"
    cols = (
        "repository",
        "kind",
        "model",
        "way",
        "jobs",
        "input",
        "output",
        "cache write",
        "cache read",
        "cost",
        "saved",
    )
    table = [cols]
    for r in report["rows"]:
        table.append(
            (
                r["repo"],
                r["kind"],
                r["model"] or "unknown",
                "batched" if r["batched"] else "interactive",
                str(r["jobs"]),
                str(r["input_tokens"]),
                str(r["output_tokens"]),
                str(r["cache_creation_tokens"]),
                str(r["cache_read_tokens"]),
                _dollars(r["cost_usd"]),
                _dollars(r["saved_usd"]) if r["batched"] else "-",
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(cols))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in table]
    t = report["totals"]
    lines.append(
        f"interactive: {t['interactive_tokens']} tokens, {_dollars(t['interactive_usd'])}; batched: "
        f"{t['batched_tokens']} tokens, {_dollars(t['batched_usd'])}; saved by batching: {_dollars(t['saved_usd'])}"
    )
    if t["unpriced_models"]:
        lines.append(f"no price for {', '.join(t['unpriced_models'])}: set REVIEWER_PRICES to count them")
    return "\n".join([head, *lines])


def _dollars(value: float | None) -> str:
    return "?" if value is None else f"${value:,.2f}"
