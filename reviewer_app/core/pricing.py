"""What model tokens cost: a price table per model (US dollars per million tokens) and the Message Batches discount."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

BATCH_FACTOR = 0.5  # Message Batches bill every kind of token at half the interactive price


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens of one model, asked interactively."""

    input: float
    output: float
    cache_write: float  # a 5-minute cache write
    cache_read: float
    batch_factor: float = BATCH_FACTOR


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
    """The price of ``model``: its own entry, else the longest entry its name starts with (a dated model id such as
    claude-sonnet-4-5-20250929 takes claude-sonnet-4-5's), else None."""
    if model in prices:
        return prices[model]
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
