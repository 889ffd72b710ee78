"""Argument types of the command line whose errors read as sentences: "'-1' is not a number above 0"."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def whole_number(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number from ``minimum`` (to ``maximum``)."""
    bounds = f"from {minimum} to {maximum}" if maximum is not None else f"of at least {minimum}"

    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{raw!r} is not a whole number") from None
        if value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"{raw!r} is not a whole number {bounds}")
        return value

    return parse


def number_above(minimum: float) -> Callable[[str], float]:
    """An argparse type: a number greater than ``minimum``."""

    def parse(raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{raw!r} is not a number") from None
        if not value > minimum:  # NaN too
            raise argparse.ArgumentTypeError(f"{raw!r} is not a number above {minimum:g}")
        return value

    return parse
