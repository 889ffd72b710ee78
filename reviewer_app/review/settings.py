"""The server's review settings, read once from the configuration: the defaults a repository's own settings
(.github/reviewer.yml, review/repo_config.py) may narrow or turn on."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from reviewer_app.codebase import CodebaseSettings
from reviewer_app.codebase.settings import UnpackLimits
from reviewer_app.core.experiments import Experiment, operator_experiment
from reviewer_app.review.explore import ToolLimits
from reviewer_app.settings.config import Config


@dataclass(frozen=True)
class ReviewSettings:
    max_input_tokens: int = 60000
    max_parts: int = 3
    ignore: tuple[str, ...] = ()
    wait_seconds: float = 10.0  # before a job that waits on another one looks again
    context_lines: int = 150  # unchanged lines shown around the changes of one file (0: none)
    repository_tools: bool = False  # the server's default for repositories that do not say
    tool_limits: ToolLimits = field(default_factory=ToolLimits)
    dry_run: bool = False  # post nothing anywhere (REVIEWER_DRY_RUN; a repository may ask for it alone)
    verify: bool = True  # the verification pass, for repositories whose .github/reviewer.yml does not say
    learnings_prompt_tokens: int = 1500  # prompt tokens the repository's relevant learnings may take (0: none)
    signal_reads: int = 20  # review comments whose reactions a review reads at most (review/signals.py)
    learnings_per_repo: int = 100  # learnings a repository keeps at most (a signal past it teaches nothing)
    learning_max_chars: int = 300  # characters of one learning at most
    experiment: Experiment | None = None  # the operator's (REVIEWER_EXPERIMENT), for repositories that run none
    # The repository at the head (codebase/): off here, so a ReviewSettings built by hand fetches no archive.
    codebase: CodebaseSettings = field(default_factory=lambda: CodebaseSettings(enabled=False))

    @classmethod
    def from_config(cls, cfg: Config) -> ReviewSettings:
        """The settings of ``cfg``, for the App's reviews and for `reviewer-app review` alike."""
        return cls(
            max_input_tokens=cfg.max_input_tokens,
            max_parts=cfg.max_parts,
            # A job waiting on another (a ready_for_review job on its draft's review of the same head) looks again
            # after the first retry delay.
            wait_seconds=cfg.retry_base_seconds,
            context_lines=cfg.context_lines,
            repository_tools=cfg.repository_tools,
            tool_limits=ToolLimits(
                cfg.max_tool_turns, cfg.max_tool_bytes, cfg.codebase_tool_calls, cfg.codebase_tool_bytes
            ),
            dry_run=cfg.dry_run,
            verify=cfg.verify,
            learnings_prompt_tokens=cfg.learnings_prompt_tokens,
            signal_reads=cfg.signal_reads,
            learnings_per_repo=cfg.learnings_per_repo,
            learning_max_chars=cfg.learning_max_chars,
            experiment=operator_experiment(cfg.experiment)[0],
            codebase=codebase_settings(cfg),
        )


def codebase_settings(cfg: Config) -> CodebaseSettings:
    """The codebase room's settings; its cache next to the SQLite database unless REVIEWER_CODEBASE_DIR says."""
    folder = Path(cfg.codebase_dir) if cfg.codebase_dir else None
    if folder is None:
        db = cfg.sqlite_path
        in_file = db and db != ":memory:" and not db.startswith("file::memory:")
        folder = (
            Path(db).parent / "codebase-cache" if in_file else Path(tempfile.gettempdir()) / "reviewer-app-codebase"
        )
    mb = 1024 * 1024
    return CodebaseSettings(
        enabled=cfg.codebase,
        cache_dir=folder,
        cache_bytes=cfg.codebase_cache_mb * mb,
        refresh_seconds=cfg.codebase_refresh_seconds,
        refresh_commits=cfg.codebase_refresh_commits,
        limits=UnpackLimits(
            max_archive_bytes=cfg.codebase_max_archive_mb * mb,
            max_total_bytes=3 * cfg.codebase_max_archive_mb * mb,
            max_files=cfg.codebase_max_files,
            max_members=max(cfg.codebase_max_files * 3, 1000),
        ),
        related_tokens=cfg.codebase_context_tokens,
        tool_calls=cfg.codebase_tool_calls,
        tool_bytes=cfg.codebase_tool_bytes,
    )
