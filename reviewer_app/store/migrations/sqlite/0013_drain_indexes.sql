-- Fewer index moves on the drain's path (claim: queued -> running; finish: running -> a terminal state), the dashboard
-- and metrics reading through the indexes the drain keeps anyway (docs/benchmarks.md, "The drain, before and after").
--
-- jobs_by_state (migration 0011, the dashboard's job list by state) moved on every state change, and on SQLite it
-- took the claim's plan: without statistics the planner searched it for state = 'queued' and sorted every queued job
-- to take the next 32, instead of walking jobs_claimable in order. The list reads the primary key newest first;
-- pending states have their partial indexes (jobs_claimable, jobs_running), failures jobs_failed. The SQLite claim
-- now names its index (INDEXED BY jobs_claimable).
DROP INDEX IF EXISTS jobs_by_state;
-- jobs_pending_created moved on every claim (queued -> running: out and back in) and every finish. The oldest
-- pending job is read from the oldest queued one, kept by an index a claim leaves once and a finish never touches,
-- and from the few running ones (jobs_running) (statements.OLDEST_PENDING).
DROP INDEX IF EXISTS jobs_pending_created;
CREATE INDEX jobs_queued_created ON jobs (created_at) WHERE state = 'queued';
-- Keyed on the state, this index was looked at on every state change; keyed on the publication intent, a claim or
-- a finish never touches it (neither writes publish_intent_at or review_id).
DROP INDEX IF EXISTS jobs_awaiting_reconciliation;
CREATE INDEX jobs_awaiting_reconciliation ON jobs (publish_intent_at) WHERE publish_intent_at IS NOT NULL AND review_id IS NULL;
