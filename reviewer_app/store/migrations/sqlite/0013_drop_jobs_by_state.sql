-- jobs_by_state (migration 0011, for the dashboard's job list by state) cost every state change an index move,
-- and on SQLite it took the claim's plan: without statistics the planner searched it for state = 'queued' and
-- sorted every queued job to take the next 32, instead of walking jobs_claimable in order. The dashboard's list
-- reads the primary key newest first; pending states have their partial indexes (jobs_claimable, jobs_running),
-- failed jobs jobs_failed. The SQLite claim now names its index (INDEXED BY jobs_claimable).
DROP INDEX IF EXISTS jobs_by_state;
