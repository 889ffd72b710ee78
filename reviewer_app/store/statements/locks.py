"""PostgreSQL's advisory locks: a schema's migration lock, and the admission locks that give several hosts the order
SQLite's single writer gives one (on SQLite these steps are skipped)."""

from __future__ import annotations

from reviewer_app.store.statements.dialects import Dialects

INSTALLATION_KEY = "hashtextextended('reviewer-app:installation:' || {installation}::bigint, 0)"
PR_KEY = "hashtextextended('reviewer-app:pr:' || {repo}::bigint || ':' || {pr}::bigint, 0)"

# Take the migration lock of one schema (PostgreSQL); held until the migrating transaction ends.
LOCK_MIGRATIONS = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"

# Several hosts admit at once on PostgreSQL, so a decision first takes transaction-scoped advisory locks, always in
# the same order (installation, then pull request): two heads of one PR, a budget count and an uninstall then see
# each other's committed rows, as SQLite's single writer gives them (SQLite needs no lock: the steps are skipped).
# The unique keys (delivery id, revision key) stay the last word on duplicates.
LOCK_PR_ADMISSION = Dialects(None, f"SELECT pg_advisory_xact_lock({PR_KEY.format(repo='$1', pr='$2')})")
LOCK_INSTALLATION_ADMISSION = Dialects(
    None, f"SELECT pg_advisory_xact_lock({INSTALLATION_KEY.format(installation='$1')})"
)
# Help answers to one pull request (repository name, PR number), so two asked at once post one.
LOCK_REPLY_ADMISSION = Dialects(
    None, "SELECT pg_advisory_xact_lock(hashtextextended('reviewer-app:reply:' || $1::text || '#' || $2::bigint, 0))"
)

__all__ = [
    "INSTALLATION_KEY",
    "PR_KEY",
    "LOCK_MIGRATIONS",
    "LOCK_PR_ADMISSION",
    "LOCK_INSTALLATION_ADMISSION",
    "LOCK_REPLY_ADMISSION",
]
