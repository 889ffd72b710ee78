"""A repository's learnings and the feedback on its findings (migrations 0015, 0017: a learning's status)."""

from __future__ import annotations

from reviewer_app.store.statements.dialects import Dialects
from reviewer_app.store.statements.findings import FINDING_COLUMNS

LEARNING_COLUMNS = (
    "id, repo, path_glob, text, kind, source_kind, source_url, author, created_at, times_applied, last_applied, status,"
    " ack_comment_id"
)

SELECT_LEARNING_BY_TEXT = f"SELECT {LEARNING_COLUMNS} FROM learnings WHERE repo = ? AND path_glob = ? AND text = ?"
SELECT_LEARNINGS_OF_REPO = f"SELECT {LEARNING_COLUMNS} FROM learnings WHERE repo = ? ORDER BY id"
SELECT_LEARNING = f"SELECT {LEARNING_COLUMNS} FROM learnings WHERE repo = ? AND id = ?"
COUNT_LEARNINGS_OF_REPO = "SELECT COUNT(*) FROM learnings WHERE repo = ?"
# Several hosts add learnings at once on PostgreSQL: one repository's adds take turns, so its limit holds (SQLite's
# single writer gives that order already).
LOCK_REPO_LEARNINGS = Dialects(
    None, "SELECT pg_advisory_xact_lock(hashtextextended('reviewer-app:learnings:' || $1::text, 0))"
)
# Kept once per (repo, path_glob, text): a second add of the same learning (a retried command) adds nothing.
INSERT_LEARNING_IF_NEW = f"""
INSERT INTO learnings (repo, path_glob, text, kind, source_kind, source_url, author, created_at, status)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (repo, path_glob, text) DO NOTHING
RETURNING {LEARNING_COLUMNS}
"""
DELETE_LEARNING = "DELETE FROM learnings WHERE repo = ? AND id = ?"
# A pending learning made active by a writer's confirmation; an active one is left as it is.
ACTIVATE_LEARNING_IF_PENDING = f"""
UPDATE learnings SET status = 'active' WHERE repo = ? AND id = ? AND status = 'pending' RETURNING {LEARNING_COLUMNS}
"""
# The app's acknowledgement of the pending learning a reply proposed (found by the reply's link, so a retried answer
# that found its comment posted records it too).
SET_LEARNING_ACK = "UPDATE learnings SET ack_comment_id = ? WHERE repo = ? AND source_url = ? AND status = 'pending'"
PENDING_LEARNINGS_WITH_ACK = (
    f"SELECT {LEARNING_COLUMNS} FROM learnings WHERE repo = ? AND status = 'pending' AND ack_comment_id IS NOT NULL"
    " ORDER BY id DESC LIMIT ?"
)
MARK_LEARNING_APPLIED = (
    "UPDATE learnings SET times_applied = times_applied + 1,"
    " last_applied = CASE WHEN last_applied IS NULL OR last_applied < ? THEN ? ELSE last_applied END WHERE id = ?"
)
# The repositories with learnings or feedback, each with the full name its newest job records (an operator's view;
# jobs_by_pr finds a repository's jobs).
LEARNING_REPOS = """
SELECT r.repo, (SELECT j.repo_full_name FROM jobs j WHERE j.repo_id = CAST(r.repo AS BIGINT) ORDER BY j.id DESC LIMIT 1)
  FROM (SELECT repo FROM learnings UNION SELECT repo FROM finding_feedback) r ORDER BY r.repo
"""
# A repository named by its full name (case-insensitive, as GitHub compares them): the id its newest job records (a
# scan of the jobs table, for the CLI only).
REPO_ID_OF_NAME = "SELECT repo_id FROM jobs WHERE LOWER(repo_full_name) = LOWER(?) ORDER BY id DESC LIMIT 1"

INSERT_FEEDBACK_IF_NEW = """
INSERT INTO finding_feedback (repo, finding_key, signal, author, source_url, at) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (repo, finding_key, author, signal) DO NOTHING
"""
FEEDBACK_COUNTS = """
SELECT finding_key, SUM(CASE WHEN signal = '+1' THEN 1 ELSE 0 END), SUM(CASE WHEN signal = '-1' THEN 1 ELSE 0 END)
  FROM finding_feedback WHERE repo = ? GROUP BY finding_key
"""

# A repository's newest findings, to name the findings its feedback counts are on (findings_by_pr finds them).
RECENT_FINDINGS_OF_REPO = f"SELECT {FINDING_COLUMNS} FROM findings WHERE repo_id = ? ORDER BY id DESC LIMIT ?"

__all__ = [
    "RECENT_FINDINGS_OF_REPO",
    "LEARNING_COLUMNS",
    "SELECT_LEARNING_BY_TEXT",
    "SELECT_LEARNINGS_OF_REPO",
    "SELECT_LEARNING",
    "COUNT_LEARNINGS_OF_REPO",
    "LOCK_REPO_LEARNINGS",
    "INSERT_LEARNING_IF_NEW",
    "DELETE_LEARNING",
    "ACTIVATE_LEARNING_IF_PENDING",
    "SET_LEARNING_ACK",
    "PENDING_LEARNINGS_WITH_ACK",
    "MARK_LEARNING_APPLIED",
    "LEARNING_REPOS",
    "REPO_ID_OF_NAME",
    "INSERT_FEEDBACK_IF_NEW",
    "FEEDBACK_COUNTS",
]
