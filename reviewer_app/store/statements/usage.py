"""Model tokens spent, interactive and batched: per repository and model (admin usage, metrics), and per day (the
dashboard's spend)."""

from __future__ import annotations

from reviewer_app.store.statements.dialects import Dialects, numbered

# Model tokens per repository, kind of work, model and way of asking since the cut-off, what reviews cost:
# interactive (the attempts that called the model) and batched (requests answered through Message Batches, counted
# when the batch reported them); the verification of a review's findings is a kind of its own (an attempt's verify_*
# columns, a batched request whose key starts with 'verify-'); integers in both dialects (PostgreSQL's SUM of
# integers is NUMERIC).
USAGE_BY_REPO = """
SELECT u.repo AS repo, u.kind AS kind, u.model AS model, u.batched AS batched, COUNT(DISTINCT u.job_id) AS jobs,
       CAST(SUM(u.input_tokens) AS BIGINT) AS input_tokens, CAST(SUM(u.output_tokens) AS BIGINT) AS output_tokens,
       CAST(SUM(u.cache_creation_tokens) AS BIGINT) AS cache_creation_tokens,
       CAST(SUM(u.cache_read_tokens) AS BIGINT) AS cache_read_tokens
  FROM (SELECT j.repo_full_name AS repo, CASE WHEN j.trigger LIKE 'reply:%' THEN 'answers' ELSE 'reviews' END AS kind,
               COALESCE(a.model, '') AS model, 0 AS batched, j.id AS job_id,
               a.input_tokens, a.output_tokens, a.cache_creation_tokens, a.cache_read_tokens
          FROM attempts a JOIN jobs j ON j.id = a.job_id
         WHERE a.started_at >= ? AND (a.input_tokens > 0 OR a.output_tokens > 0)
        UNION ALL
        SELECT j.repo_full_name, 'verification', COALESCE(a.verify_model, ''), 0, j.id, a.verify_input_tokens,
               a.verify_output_tokens, a.verify_cache_creation_tokens, a.verify_cache_read_tokens
          FROM attempts a JOIN jobs j ON j.id = a.job_id
         WHERE a.started_at >= ? AND (a.verify_input_tokens > 0 OR a.verify_output_tokens > 0)
        UNION ALL
        SELECT j.repo_full_name, CASE WHEN b.part_key LIKE 'verify-%' THEN 'verification' ELSE 'reviews' END, b.model,
               1, j.id, b.input_tokens, b.output_tokens, b.cache_creation_tokens, b.cache_read_tokens
          FROM batch_requests b JOIN jobs j ON j.id = b.job_id
         WHERE b.ended_at >= ? AND (b.input_tokens > 0 OR b.output_tokens > 0)) u
 GROUP BY u.repo, u.kind, u.model, u.batched
 ORDER BY SUM(u.input_tokens) + SUM(u.output_tokens) DESC, u.repo, u.kind, u.model, u.batched
"""

# Model tokens per day (UTC), repository, model, way of asking and kind (the review, or the verification of its
# findings) over attempts started in a period (the attempts_spend index covers it). A column added to the grouping
# splits every row the same way.
_SPEND_BY_DAY = """
SELECT {day} AS day, u.repo AS repo, u.model AS model, u.batched AS batched, u.verification AS verification,
       COUNT(DISTINCT u.job_id) AS jobs,
       CAST(SUM(u.input_tokens) AS BIGINT) AS input_tokens, CAST(SUM(u.output_tokens) AS BIGINT) AS output_tokens,
       CAST(SUM(u.cache_creation_tokens) AS BIGINT) AS cache_creation_tokens,
       CAST(SUM(u.cache_read_tokens) AS BIGINT) AS cache_read_tokens
  FROM (SELECT a.started_at AS at, j.repo_full_name AS repo, COALESCE(a.model, '') AS model, 0 AS batched,
               0 AS verification, j.id AS job_id, a.input_tokens, a.output_tokens, a.cache_creation_tokens,
               a.cache_read_tokens
          FROM attempts a JOIN jobs j ON j.id = a.job_id
         WHERE a.started_at >= ? AND a.started_at < ? AND (a.input_tokens > 0 OR a.output_tokens > 0)
        UNION ALL
        SELECT a.started_at, j.repo_full_name, COALESCE(a.verify_model, ''), 0, 1, j.id, a.verify_input_tokens,
               a.verify_output_tokens, a.verify_cache_creation_tokens, a.verify_cache_read_tokens
          FROM attempts a JOIN jobs j ON j.id = a.job_id
         WHERE a.started_at >= ? AND a.started_at < ? AND (a.verify_input_tokens > 0 OR a.verify_output_tokens > 0)
        UNION ALL
        SELECT b.ended_at, j.repo_full_name, b.model, 1, CASE WHEN b.part_key LIKE 'verify-%' THEN 1 ELSE 0 END, j.id,
               b.input_tokens, b.output_tokens, b.cache_creation_tokens, b.cache_read_tokens
          FROM batch_requests b JOIN jobs j ON j.id = b.job_id
         WHERE b.ended_at >= ? AND b.ended_at < ? AND (b.input_tokens > 0 OR b.output_tokens > 0)) u
 GROUP BY {day}, u.repo, u.model, u.batched, u.verification
 ORDER BY 1, 2, 3, 4, 5
"""
SPEND_BY_DAY = Dialects(
    _SPEND_BY_DAY.format(day="CAST(u.at / 86400 AS INTEGER)"),
    numbered(_SPEND_BY_DAY.format(day="CAST(FLOOR(u.at / 86400) AS BIGINT)")),
)

__all__ = ["USAGE_BY_REPO", "SPEND_BY_DAY"]
