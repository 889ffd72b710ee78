-- A revision key is unique among live jobs only (queued, running, succeeded): a job that ended without a review
-- (cancelled because the PR closed, superseded, failed) no longer blocks its head when that head is current again.
-- SQLite cannot drop a column's UNIQUE constraint, so the jobs table is rebuilt (attempts, which refer to it, too:
-- dropping a referenced table would cascade into them). Also: the head a synchronize replaced (`before_sha`), the
-- ordering signal that admission trusts over a one-second timestamp. Ids are AUTOINCREMENT from here on: an id
-- appears in review markers and check runs' external_id, so one pruned by retention must never be handed out again.
CREATE TABLE jobs_new (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    revision_key TEXT NOT NULL,
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
    superseded_by INTEGER REFERENCES jobs_new(id),
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
    updated_at REAL NOT NULL,
    check_run_claim TEXT,
    check_run_claim_until REAL,
    before_sha TEXT
);
INSERT INTO jobs_new (id, revision_key, repo_id, repo_full_name, installation_id, pr_number, head_sha, trigger,
    priority, state, details, attempts, max_attempts, next_attempt_at, lease_owner, lease_token, lease_expires_at,
    last_error, superseded_by, outcome, check_run_id, check_run_status, review_id, publish_intent_at, answer,
    event_at, created_at, started_at, finished_at, updated_at, check_run_claim, check_run_claim_until)
SELECT id, revision_key, repo_id, repo_full_name, installation_id, pr_number, head_sha, trigger,
    priority, state, details, attempts, max_attempts, next_attempt_at, lease_owner, lease_token, lease_expires_at,
    last_error, superseded_by, outcome, check_run_id, check_run_status, review_id, publish_intent_at, answer,
    event_at, created_at, started_at, finished_at, updated_at, check_run_claim, check_run_claim_until FROM jobs;
CREATE TABLE attempts_copy AS SELECT * FROM attempts;
DROP TABLE attempts;
DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;
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
INSERT INTO attempts SELECT * FROM attempts_copy;
DROP TABLE attempts_copy;
CREATE INDEX attempts_job ON attempts (job_id, attempt);
CREATE UNIQUE INDEX jobs_live_revision ON jobs (revision_key) WHERE state IN ('queued', 'running', 'succeeded');
CREATE INDEX jobs_revision ON jobs (revision_key);
CREATE INDEX jobs_claimable ON jobs (priority, next_attempt_at, id) WHERE state = 'queued';
CREATE INDEX jobs_running ON jobs (lease_expires_at) WHERE state = 'running';
CREATE INDEX jobs_by_pr ON jobs (repo_id, pr_number, state);
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX jobs_by_installation ON jobs (installation_id, created_at);
CREATE INDEX jobs_live_by_installation ON jobs (installation_id, created_at) WHERE state NOT IN ('superseded', 'cancelled')
