-- The processes running against this database (serve, serve --no-worker, worker), one row each: registered at
-- start, refreshed on the lease-renewal beat, removed on a clean stop. A row whose heartbeat is older than its own
-- lease is a process gone without a word (killed, crashed, cut off); the cleaner prunes it a day later.
-- The id is the process's lease owner name, so the running jobs it holds are jobs.lease_owner = workers.id.
CREATE TABLE workers (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    role TEXT NOT NULL,
    version TEXT NOT NULL,
    slots INTEGER NOT NULL,
    lease_seconds REAL NOT NULL,
    started_at REAL NOT NULL,
    heartbeat_at REAL NOT NULL,
    jobs_running INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX workers_heartbeat ON workers (heartbeat_at);
-- The dashboard's reads: jobs newest first by state or by repository (and pull request), failures of the last day,
-- and model spend per day (a covering index: the spend query reads no attempt row).
CREATE INDEX jobs_by_state ON jobs (state, id);
CREATE INDEX jobs_by_repo ON jobs (repo_full_name, pr_number, id);
CREATE INDEX jobs_failed ON jobs (finished_at) WHERE state = 'failed';
-- Publications awaiting reconciliation (the queue's stats, every metrics scrape) without a scan of the backlog.
CREATE INDEX jobs_awaiting_reconciliation ON jobs (state) WHERE publish_intent_at IS NOT NULL AND review_id IS NULL;
CREATE INDEX jobs_pending_created ON jobs (created_at) WHERE state IN ('queued', 'running');
CREATE INDEX attempts_spend ON attempts (started_at, job_id, model, input_tokens, output_tokens, cache_creation_tokens, cache_read_tokens)
