"""How many tokens a text is counted as when fitting a budget (the prompt's, the codebase context's)."""

from __future__ import annotations

import math


def estimate_tokens(text: str) -> int:
    """A cheap token estimate, ceil(len / 3.5).

    It over-estimates on purpose: real tokenizers average about four characters per token on English and code,
    so a budget fitted with this estimate leaves head-room instead of overflowing the context window.
    """
    return math.ceil(len(text) * 2 / 7)
