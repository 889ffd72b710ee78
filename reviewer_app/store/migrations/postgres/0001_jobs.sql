-- Jobs, deliveries and attempts: the durable backlog (the same tables, columns and indexes as on SQLite).
-- Timestamps are epoch seconds (DOUBLE PRECISION), as on SQLite; details and answer are JSON kept as TEXT,
-- so every value round-trips exactly as the SQLite backend stores it.
CREATE TABLE jobs (
    id BIGSERIAL PRIMARY KEY,
    revision_key TEXT NOT NULL UNIQUE,
    repo_id BIGINT NOT NULL,
    repo_full_name TEXT NOT NULL,
    installation_id BIGINT,
    pr_number BIGINT NOT NULL,
    head_sha TEXT NOT NULL,
    trigger TEXT NOT NULL,
    priority INTEGER NOT NULL DEFAULT 10,
    state TEXT NOT NULL CHECK (state IN ('queued','running','succeeded','failed','superseded','cancelled')),
    details TEXT NOT NULL DEFAULT '{}',
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    next_attempt_at DOUBLE PRECISION NOT NULL,
    lease_owner TEXT,
    lease_token TEXT,
    lease_expires_at DOUBLE PRECISION,
    last_error TEXT,
    superseded_by BIGINT REFERENCES jobs(id),
    outcome TEXT,
    check_run_id BIGINT,
    check_run_status TEXT,
    review_id BIGINT,
    publish_intent_at DOUBLE PRECISION,
    answer TEXT,
    event_at DOUBLE PRECISION,
    created_at DOUBLE PRECISION NOT NULL,
    started_at DOUBLE PRECISION,
    finished_at DOUBLE PRECISION,
    updated_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX jobs_claimable ON jobs (priority, next_attempt_at, id) WHERE state = 'queued';
CREATE INDEX jobs_running ON jobs (lease_expires_at) WHERE state = 'running';
CREATE INDEX jobs_by_pr ON jobs (repo_id, pr_number, state);
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE deliveries (
    delivery_id TEXT PRIMARY KEY,
    event TEXT NOT NULL,
    action TEXT,
    received_at DOUBLE PRECISION NOT NULL,
    outcome TEXT NOT NULL,
    job_id BIGINT
);
CREATE INDEX deliveries_received ON deliveries (received_at);

CREATE TABLE attempts (
    id BIGSERIAL PRIMARY KEY,
    job_id BIGINT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    attempt INTEGER NOT NULL,
    lease_owner TEXT NOT NULL,
    lease_token TEXT NOT NULL UNIQUE,
    started_at DOUBLE PRECISION NOT NULL,
    finished_at DOUBLE PRECISION,
    outcome TEXT,
    error TEXT,
    model TEXT,
    input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    cache_creation_tokens BIGINT NOT NULL DEFAULT 0,
    cache_read_tokens BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX attempts_job ON attempts (job_id, attempt);

CREATE TABLE settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
