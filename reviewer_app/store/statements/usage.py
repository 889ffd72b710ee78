"""Model tokens spent, interactive and batched: per repository and model (admin usage, metrics), and per day (the
dashboard's spend)."""

from __future__ import annotations

from reviewer_app.store.statements.dialects import Dialects, numbered

# Model tokens per repository, model and way of asking since the cut-off, what reviews cost: interactive (the
# attempts that called the model) and batched (requests answered through Message Batches, counted when the batch
# reported them); integers in both dialects (PostgreSQL's SUM of integers is NUMERIC).
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
        SELECT j.repo_full_name, 'reviews', b.model, 1, j.id, b.input_tokens, b.output_tokens, b.cache_creation_tokens,
               b.cache_read_tokens
          FROM batch_requests b JOIN jobs j ON j.id = b.job_id
         WHERE b.ended_at >= ? AND (b.input_tokens > 0 OR b.output_tokens > 0)) u
 GROUP BY u.repo, u.kind, u.model, u.batched
 ORDER BY SUM(u.input_tokens) + SUM(u.output_tokens) DESC, u.repo, u.kind, u.model, u.batched
"""

# Model tokens per day (UTC), repository and model over attempts started in a period (the attempts_spend index
# covers it). A column added to the grouping (say, batched or interactive) splits every row the same way.
_SPEND_BY_DAY = """
SELECT {day} AS day, u.repo AS repo, u.model AS model, u.batched AS batched, COUNT(DISTINCT u.job_id) AS jobs,
       CAST(SUM(u.input_tokens) AS BIGINT) AS input_tokens, CAST(SUM(u.output_tokens) AS BIGINT) AS output_tokens,
       CAST(SUM(u.cache_creation_tokens) AS BIGINT) AS cache_creation_tokens,
       CAST(SUM(u.cache_read_tokens) AS BIGINT) AS cache_read_tokens
  FROM (SELECT a.started_at AS at, j.repo_full_name AS repo, COALESCE(a.model, '') AS model, 0 AS batched,
               j.id AS job_id, a.input_tokens, a.output_tokens, a.cache_creation_tokens, a.cache_read_tokens
          FROM attempts a JOIN jobs j ON j.id = a.job_id
         WHERE a.started_at >= ? AND a.started_at < ? AND (a.input_tokens > 0 OR a.output_tokens > 0)
        UNION ALL
        SELECT b.ended_at, j.repo_full_name, b.model, 1, j.id, b.input_tokens, b.output_tokens,
               b.cache_creation_tokens, b.cache_read_tokens
          FROM batch_requests b JOIN jobs j ON j.id = b.job_id
         WHERE b.ended_at >= ? AND b.ended_at < ? AND (b.input_tokens > 0 OR b.output_tokens > 0)) u
 GROUP BY {day}, u.repo, u.model, u.batched
 ORDER BY 1, 2, 3, 4
"""
SPEND_BY_DAY = Dialects(
    _SPEND_BY_DAY.format(day="CAST(u.at / 86400 AS INTEGER)"),
    numbered(_SPEND_BY_DAY.format(day="CAST(FLOOR(u.at / 86400) AS BIGINT)")),
)

__all__ = ["USAGE_BY_REPO", "SPEND_BY_DAY"]
