"""The settings of the codebase context (reviewer_app/codebase/): the repository at the head, cached, indexed and
searched; part of the table in `reviewer_app/settings/table.py`."""

from __future__ import annotations

from reviewer_app.settings.setting import Setting

CODEBASE_SETTINGS: tuple[Setting, ...] = (
    Setting(
        "REVIEWER_CODEBASE",
        "codebase",
        bool,
        True,
        "show the model the cross-file code a change depends on or is used by, from the repository's archive at the "
        "base overlaid with the pull request's files, for repositories whose .github/reviewer.yml does not say",
    ),
    Setting(
        "REVIEWER_CODEBASE_DIR",
        "codebase_dir",
        str,
        "",
        "folder of the cached repository trees and their indexes (default: codebase-cache next to the SQLite "
        "database; with PostgreSQL or an in-memory database, reviewer-app-codebase in the system's temporary folder); "
        "only a cache: any host rebuilds it",
    ),
    Setting(
        "REVIEWER_CODEBASE_CACHE_MB",
        "codebase_cache_mb",
        int,
        4096,
        "disk the cached trees may take, all repositories together; the least recently used go first",
        minimum=1,
    ),
    Setting(
        "REVIEWER_CODEBASE_REFRESH_SECONDS",
        "codebase_refresh_seconds",
        float,
        86400.0,
        "a cached tree of an older base is fetched again once it is this old",
        minimum=0,
    ),
    Setting(
        "REVIEWER_CODEBASE_REFRESH_COMMITS",
        "codebase_refresh_commits",
        int,
        50,
        "... or once this many newer base heads have been reviewed against it",
        minimum=1,
    ),
    Setting(
        "REVIEWER_CODEBASE_MAX_FILES",
        "codebase_max_files",
        int,
        60000,
        "files a repository's archive may hold (a larger repository is reviewed without its codebase)",
        minimum=1,
    ),
    Setting(
        "REVIEWER_CODEBASE_MAX_ARCHIVE_MB",
        "codebase_max_archive_mb",
        int,
        200,
        "size of a repository's gzipped archive at most; unpacked, it may hold three times as much",
        minimum=1,
    ),
    Setting(
        "REVIEWER_CODEBASE_CONTEXT_TOKENS",
        "codebase_context_tokens",
        int,
        6000,
        "prompt tokens of cross-file code (callers, callees, interfaces) one review request may take, within "
        "REVIEWER_MAX_INPUT_TOKENS (0: none)",
        minimum=0,
    ),
    Setting(
        "REVIEWER_CODEBASE_TOOL_CALLS",
        "codebase_tool_calls",
        int,
        24,
        "search_code, find_definition, find_references and snapshot reads one review request may make",
        minimum=0,
    ),
    Setting(
        "REVIEWER_CODEBASE_TOOL_BYTES",
        "codebase_tool_bytes",
        int,
        120000,
        "bytes of codebase tool output one review request may receive, all turns together",
        minimum=0,
    ),
)
