"""What model tokens cost: one price table per model (Anthropic's list prices here, REVIEWER_PRICES adds or replaces
entries), the Message Batches discount, and the sum. `reviewer-app usage` and the dashboard's spend both use it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from reviewer_app.core.providers import anthropic_model_name

BATCH_FACTOR = 0.5  # Message Batches bill every kind of token at half the interactive price
PRICE_FIELDS = ("input", "output", "cache_write", "cache_read")


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens of one model, asked interactively."""

    input: float
    output: float
    cache_write: float  # a 5-minute cache write
    cache_read: float
    batch_factor: float = BATCH_FACTOR


# By model name prefix: a dated model id (claude-sonnet-4-5-20250929) takes the price of the longest name it starts
# with.
DEFAULT_PRICES: dict[str, Price] = {
    "claude-opus-4-6": Price(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-5": Price(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-1": Price(15.0, 75.0, 18.75, 1.50),
    "claude-opus-4": Price(15.0, 75.0, 18.75, 1.50),
    "claude-sonnet-4-5": Price(3.0, 15.0, 3.75, 0.30),
    "claude-sonnet-4": Price(3.0, 15.0, 3.75, 0.30),
    "claude-3-7-sonnet": Price(3.0, 15.0, 3.75, 0.30),
    "claude-haiku-4-5": Price(1.0, 5.0, 1.25, 0.10),
    "claude-3-5-haiku": Price(0.80, 4.0, 1.0, 0.08),
    "claude-3-haiku": Price(0.25, 1.25, 0.30, 0.03),
}


class PriceError(ValueError):
    """REVIEWER_PRICES cannot be read; the message says which entry and why."""


def parse_prices(text: str, base: Mapping[str, Price] = DEFAULT_PRICES) -> dict[str, Price]:
    """``base`` with the entries of ``text`` added or replaced. ``text`` is a JSON object of models, each with
    ``input``, ``output``, ``cache_write``, ``cache_read`` (US dollars per million tokens; a missing one is 0) and
    optionally ``batch_factor``: ``{"my-model": {"input": 3, "output": 15}}``."""
    table = dict(base)
    if not text.strip():
        return table
    try:
        data = json.loads(text)
    except ValueError:
        raise PriceError("REVIEWER_PRICES is not valid JSON; see docs/configuration.md") from None
    if not isinstance(data, dict):
        raise PriceError('REVIEWER_PRICES must be a JSON object: {"model": {"input": ..., "output": ...}}')
    for model, entry in data.items():
        if not isinstance(entry, dict) or set(entry) - {*PRICE_FIELDS, "batch_factor"}:
            raise PriceError(f"REVIEWER_PRICES[{model!r}] must name only {', '.join(PRICE_FIELDS)} (and batch_factor)")
        values = {k: entry.get(k, 0) for k in PRICE_FIELDS}
        if "batch_factor" in entry:
            values["batch_factor"] = entry["batch_factor"]
        if not all(isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in values.values()):
            raise PriceError(f"REVIEWER_PRICES[{model!r}]: prices must be numbers >= 0")
        table[str(model)] = Price(**{k: float(v) for k, v in values.items()})
    return table


@dataclass(frozen=True)
class Cost:
    """What a set of tokens cost, and what it would have cost asked interactively (None: the model is not priced)."""

    dollars: float | None
    interactive_dollars: float | None

    @property
    def saved(self) -> float | None:
        if self.dollars is None or self.interactive_dollars is None:
            return None
        return self.interactive_dollars - self.dollars


def price_of(prices: Mapping[str, Price], model: str) -> Price | None:
    """The price of ``model``: its own entry, else the longest entry its name (the Claude API's name of a Bedrock or
    Vertex AI id) starts with, else None."""
    if model in prices:
        return prices[model]
    model = anthropic_model_name(model)
    matches = [name for name in prices if model.startswith(name)]
    return prices[max(matches, key=len)] if matches else None


def cost(
    prices: Mapping[str, Price],
    model: str,
    *,
    input_tokens: int,
    output_tokens: int,
    cache_creation_tokens: int,
    cache_read_tokens: int,
    batched: bool,
) -> Cost:
    price = price_of(prices, model)
    if price is None:
        return Cost(None, None)
    full = (
        input_tokens * price.input
        + output_tokens * price.output
        + cache_creation_tokens * price.cache_write
        + cache_read_tokens * price.cache_read
    ) / 1_000_000
    return Cost(full * price.batch_factor if batched else full, full)


def estimate(row: Mapping[str, object], prices: Mapping[str, Price]) -> float | None:
    """What one usage row cost (``model``, the four token counts, and ``batched`` when the row says); None when the
    model has no price."""
    return cost(
        prices,
        str(row.get("model") or ""),
        input_tokens=int(row.get("input_tokens") or 0),  # type: ignore[call-overload]
        output_tokens=int(row.get("output_tokens") or 0),  # type: ignore[call-overload]
        cache_creation_tokens=int(row.get("cache_creation_tokens") or 0),  # type: ignore[call-overload]
        cache_read_tokens=int(row.get("cache_read_tokens") or 0),  # type: ignore[call-overload]
        batched=bool(row.get("batched")),
    ).dollars
