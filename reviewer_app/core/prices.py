"""What model tokens cost: a price table per model (defaults here, REVIEWER_PRICES adds or overrides) and the sum."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens of each kind."""

    input: float
    output: float
    cache_write: float
    cache_read: float

    def cost(
        self, *, input_tokens: int, output_tokens: int, cache_creation_tokens: int, cache_read_tokens: int
    ) -> float:
        return (
            input_tokens * self.input
            + output_tokens * self.output
            + cache_creation_tokens * self.cache_write
            + cache_read_tokens * self.cache_read
        ) / 1_000_000


# Anthropic's list prices for interactive calls (cache writes: the 5-minute cache). A dated model id
# (claude-sonnet-4-5-20250929) takes the price of the longest name it starts with.
DEFAULT_PRICES: dict[str, Price] = {
    "claude-opus-4-5": Price(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-1": Price(15.0, 75.0, 18.75, 1.50),
    "claude-opus-4": Price(15.0, 75.0, 18.75, 1.50),
    "claude-sonnet-4-5": Price(3.0, 15.0, 3.75, 0.30),
    "claude-sonnet-4": Price(3.0, 15.0, 3.75, 0.30),
    "claude-haiku-4-5": Price(1.0, 5.0, 1.25, 0.10),
    "claude-3-5-haiku": Price(0.80, 4.0, 1.0, 0.08),
}


class PriceError(ValueError):
    """REVIEWER_PRICES cannot be read; the message says which entry and why."""


def parse_prices(text: str, base: Mapping[str, Price] = DEFAULT_PRICES) -> dict[str, Price]:
    """``base`` with the entries of ``text`` added or replaced: ``model=input/output/cache_write/cache_read`` in US
    dollars per million tokens, entries separated by commas (``claude-x=3/15/3.75/0.3,claude-y=1/5/1.25/0.1``)."""
    prices = dict(base)
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        model, sep, numbers = entry.partition("=")
        parts = numbers.split("/")
        if not sep or not model.strip() or len(parts) != 4:
            raise PriceError(f"REVIEWER_PRICES entry {entry!r} is not model=input/output/cache_write/cache_read")
        try:
            values = [float(p) for p in parts]
        except ValueError:
            raise PriceError(f"REVIEWER_PRICES entry {entry!r} has a price that is not a number") from None
        if any(v < 0 or v != v for v in values):
            raise PriceError(f"REVIEWER_PRICES entry {entry!r} has a negative price")
        prices[model.strip()] = Price(*values)
    return prices


def price_of(model: str, prices: Mapping[str, Price]) -> Price | None:
    """The price of ``model``: its own entry, else that of the longest model name it starts with; None if unknown."""
    if model in prices:
        return prices[model]
    known = [name for name in prices if model.startswith(name)]
    return prices[max(known, key=len)] if known else None


def estimate(row: Mapping[str, object], prices: Mapping[str, Price]) -> float | None:
    """The cost of one usage row (``model`` and the four token counts); None when the model has no price."""
    price = price_of(str(row.get("model") or ""), prices)
    if price is None:
        return None
    return price.cost(
        input_tokens=int(row.get("input_tokens") or 0),  # type: ignore[call-overload]
        output_tokens=int(row.get("output_tokens") or 0),  # type: ignore[call-overload]
        cache_creation_tokens=int(row.get("cache_creation_tokens") or 0),  # type: ignore[call-overload]
        cache_read_tokens=int(row.get("cache_read_tokens") or 0),  # type: ignore[call-overload]
    )
