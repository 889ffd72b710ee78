"""What the app published on a pull request: its reviews (the head of the newest) and their findings (migration 0009),
for the reviews of its later revisions."""

from __future__ import annotations

# The head of the PR's newest published review (a job superseded right after it posted counts too).
LAST_REVIEWED_HEAD = """
SELECT head_sha FROM jobs WHERE repo_id = ? AND pr_number = ? AND review_id IS NOT NULL
 ORDER BY COALESCE(finished_at, updated_at) DESC, id DESC LIMIT 1
"""

# A review is on GitHub: record it whatever became of the lease (it is a fact about GitHub, not a claim on the job).
RECORD_PUBLISHED_REVIEW = "UPDATE jobs SET review_id = ? WHERE id = ? AND review_id IS NULL"

FINDING_COLUMNS = (
    "id, repo_id, pr_number, job_id, review_id, head_sha, path, line, line_text, before_lines, after_lines, severity,"
    " title, body_digest, comment_id, thread_id, state"
)

# A review's findings are kept once: recording them again (a retry, a publication found by its marker) adds nothing.
INSERT_FINDING_IF_NEW = """
INSERT INTO findings (repo_id, pr_number, job_id, review_id, head_sha, path, line, line_text, before_lines,
                      after_lines, severity, title, body_digest, comment_id, thread_id, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (job_id, path, line, body_digest) DO NOTHING
"""

SELECT_OPEN_FINDINGS = f"""
SELECT {FINDING_COLUMNS} FROM findings WHERE repo_id = ? AND pr_number = ? AND state = 'open' ORDER BY id
"""

# What GitHub told us later (the comment's id, its thread's node id) never overwrites what it told us first.
LINK_FINDING = """
UPDATE findings SET comment_id = COALESCE(comment_id, ?), thread_id = COALESCE(thread_id, ?) WHERE id = ?
"""

RESOLVE_FINDING_IF_OPEN = "UPDATE findings SET state = 'resolved', resolved_at = ? WHERE id = ? AND state = 'open'"

COUNT_RESOLVED_FINDINGS = "SELECT COUNT(*) FROM findings WHERE repo_id = ? AND pr_number = ? AND state = 'resolved'"

__all__ = [
    "LAST_REVIEWED_HEAD",
    "RECORD_PUBLISHED_REVIEW",
    "FINDING_COLUMNS",
    "INSERT_FINDING_IF_NEW",
    "SELECT_OPEN_FINDINGS",
    "LINK_FINDING",
    "RESOLVE_FINDING_IF_OPEN",
    "COUNT_RESOLVED_FINDINGS",
]
