"""The server's review settings, read once from the configuration: the defaults a repository's own settings
(.github/reviewer.yml, review/repo_config.py) may narrow or turn on."""

from __future__ import annotations

from dataclasses import dataclass, field

from reviewer_app.review.explore import ToolLimits


@dataclass(frozen=True)
class ReviewSettings:
    max_input_tokens: int = 60000
    max_parts: int = 3
    ignore: tuple[str, ...] = ()
    wait_seconds: float = 10.0  # before a job that waits on another one looks again
    context_lines: int = 150  # unchanged lines shown around the changes of one file (0: none)
    repository_tools: bool = False  # the server's default for repositories that do not say
    tool_limits: ToolLimits = field(default_factory=ToolLimits)
