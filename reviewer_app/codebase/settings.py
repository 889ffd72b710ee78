"""The codebase room's settings: where the snapshots are cached, how big an archive may be, when a snapshot is old,
and how much of it a review may show or search."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class UnpackLimits:
    """What an archive may hold before it is refused (or, for one file, skipped)."""

    max_archive_bytes: int = 200 * 1024 * 1024  # the gzipped download
    max_total_bytes: int = 600 * 1024 * 1024  # unpacked, all files kept
    max_file_bytes: int = 1024 * 1024  # a larger file is skipped (not written, not indexed)
    max_files: int = 60_000
    max_members: int = 200_000  # entries of every kind, skipped ones included: a tar of empty entries is work too


@dataclass(frozen=True)
class CodebaseSettings:
    """``enabled``: the codebase context and its tools (a repository turns them off with ``codebase: false``)."""

    enabled: bool = True
    cache_dir: Path = Path("codebase-cache")  # per repository: the base tree, its manifest and its index
    cache_bytes: int = 4 * 1024 * 1024 * 1024  # on disk, all repositories; least recently used go first
    refresh_seconds: float = 24 * 3600  # a snapshot of an older base is refetched past this age ...
    refresh_commits: int = 50  # ... or once the base branch has moved this many times since (base heads seen)
    limits: UnpackLimits = UnpackLimits()
    related_tokens: int = 6_000  # cross-file context per review, within its token budget
    tool_calls: int = 24  # codebase tool calls per review (search, definitions, references, reads)
    tool_bytes: int = 120_000  # codebase tool output per review
    index_workers: int | None = None  # processes parsing a new tree (None: one per core, at most 4; 1: in-process)
