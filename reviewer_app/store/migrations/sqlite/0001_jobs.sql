-- Jobs, deliveries and attempts: the durable backlog.
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY,
    revision_key TEXT NOT NULL UNIQUE,
    repo_id INTEGER NOT NULL,
    repo_full_name TEXT NOT NULL,
    installation_id INTEGER,
    pr_number INTEGER NOT NULL,
    head_sha TEXT NOT NULL,
    trigger TEXT NOT NULL,
    priority INTEGER NOT NULL DEFAULT 10,
    state TEXT NOT NULL CHECK (state IN ('queued','running','succeeded','failed','superseded','cancelled')),
    details TEXT NOT NULL DEFAULT '{}',
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    next_attempt_at REAL NOT NULL,
    lease_owner TEXT,
    lease_token TEXT,
    lease_expires_at REAL,
    last_error TEXT,
    superseded_by INTEGER REFERENCES jobs(id),
    outcome TEXT,
    check_run_id INTEGER,
    check_run_status TEXT,
    review_id INTEGER,
    publish_intent_at REAL,
    answer TEXT,
    event_at REAL,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    updated_at REAL NOT NULL
);
CREATE INDEX jobs_claimable ON jobs (priority, next_attempt_at, id) WHERE state = 'queued';
CREATE INDEX jobs_running ON jobs (lease_expires_at) WHERE state = 'running';
CREATE INDEX jobs_by_pr ON jobs (repo_id, pr_number, state);
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE deliveries (
    delivery_id TEXT PRIMARY KEY,
    event TEXT NOT NULL,
    action TEXT,
    received_at REAL NOT NULL,
    outcome TEXT NOT NULL,
    job_id INTEGER
);
CREATE INDEX deliveries_received ON deliveries (received_at);

CREATE TABLE attempts (
    id INTEGER PRIMARY KEY,
    job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    attempt INTEGER NOT NULL,
    lease_owner TEXT NOT NULL,
    lease_token TEXT NOT NULL UNIQUE,
    started_at REAL NOT NULL,
    finished_at REAL,
    outcome TEXT,
    error TEXT,
    model TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cache_creation_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX attempts_job ON attempts (job_id, attempt);

CREATE TABLE settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
