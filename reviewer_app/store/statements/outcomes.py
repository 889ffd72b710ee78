"""What became of the published findings (migration 0018): their fates, the reviews that published them, and the
reads of the outcomes page, CLI and metrics."""

from __future__ import annotations

from reviewer_app.store.statements.dialects import Dialects

# The fate a settle decides from (core/outcomes.settle); PostgreSQL holds the row until the transaction ends.
SELECT_FATE_FOR_UPDATE = Dialects(
    "SELECT id, fate, fate_at FROM findings WHERE id = ?",
    "SELECT id, fate, fate_at FROM findings WHERE id = $1 FOR UPDATE",
)

SELECT_FINDING_OF_COMMENT = "SELECT id FROM findings WHERE repo_id = ? AND comment_id = ? ORDER BY id LIMIT 1"

# Written only over the fate the decision was made from.
SET_FATE_IF_UNCHANGED = "UPDATE findings SET fate = ?, fate_at = ?, fate_source = ? WHERE id = ? AND fate = ?"

# The pull request was merged or closed: its findings still open keep that fate (core/outcomes.settle from open).
SETTLE_OPEN_FINDINGS_AT_CLOSE = """
UPDATE findings SET fate = ?, fate_at = ?, fate_source = ? WHERE repo_id = ? AND pr_number = ? AND fate = 'open'
"""

# The pull request was reopened (at GitHub's time ?): its findings open at a close before that are open again
# (core/outcomes.settle, reopened).
REOPEN_FINDINGS_CLOSED_BEFORE = """
UPDATE findings SET fate = 'open', fate_at = NULL, fate_source = NULL
 WHERE repo_id = ? AND pr_number = ? AND fate = 'open_at_close' AND fate_at <= ?
"""

# A published review's record is written once: a retry that finds its review published adds nothing.
INSERT_REVIEW_RUN_IF_NEW = """
INSERT INTO review_runs (job_id, repo_id, repo_full_name, pr_number, review_id, head_sha, model, verify_model,
                         prompt_version, settings, experiment, variant, learnings, findings, usage, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (job_id) DO NOTHING
"""

_OUTCOME_ROWS = """
SELECT f.id, f.repo_id, f.pr_number, f.job_id, f.path, f.line, f.severity, f.title, f.fate, f.fate_at,
       f.fate_source, f.comment_id, f.review_id, f.created_at,
       COALESCE(r.repo_full_name, j.repo_full_name) AS repo, r.model, r.prompt_version, r.experiment, r.variant,
       r.learnings
  FROM findings f
  LEFT JOIN review_runs r ON r.job_id = f.job_id
  LEFT JOIN jobs j ON j.id = f.job_id
 WHERE f.created_at >= ?"""

OUTCOME_FINDINGS = _OUTCOME_ROWS + " ORDER BY f.id"
OUTCOME_FINDINGS_OF_REPO = _OUTCOME_ROWS + " AND f.repo_id = ? ORDER BY f.id"

_REVIEW_RUNS = "SELECT * FROM review_runs WHERE created_at >= ?"
REVIEW_RUNS_SINCE = _REVIEW_RUNS + " ORDER BY job_id"
REVIEW_RUNS_OF_REPO_SINCE = _REVIEW_RUNS + " AND repo_id = ? ORDER BY job_id"

# The tokens a job's attempts paid for, per model: the review's and its verification's (what the outcomes page
# prices as the review's cost).
JOB_USAGE = """
SELECT model, SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens,
       SUM(cache_creation_tokens) AS cache_creation_tokens, SUM(cache_read_tokens) AS cache_read_tokens
  FROM attempts WHERE job_id = ? AND model IS NOT NULL AND model <> '' GROUP BY model
UNION ALL
SELECT verify_model, SUM(verify_input_tokens), SUM(verify_output_tokens), SUM(verify_cache_creation_tokens),
       SUM(verify_cache_read_tokens)
  FROM attempts WHERE job_id = ? AND verify_model IS NOT NULL AND verify_model <> '' GROUP BY verify_model
"""

FATE_COUNTS = "SELECT fate, COUNT(*) FROM findings GROUP BY fate"

__all__ = [
    "SELECT_FATE_FOR_UPDATE",
    "SELECT_FINDING_OF_COMMENT",
    "SET_FATE_IF_UNCHANGED",
    "SETTLE_OPEN_FINDINGS_AT_CLOSE",
    "REOPEN_FINDINGS_CLOSED_BEFORE",
    "INSERT_REVIEW_RUN_IF_NEW",
    "OUTCOME_FINDINGS",
    "OUTCOME_FINDINGS_OF_REPO",
    "REVIEW_RUNS_SINCE",
    "REVIEW_RUNS_OF_REPO_SINCE",
    "JOB_USAGE",
    "FATE_COUNTS",
]
