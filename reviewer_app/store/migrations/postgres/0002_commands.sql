-- Installations (lifecycle) and the outbox of small GitHub writes decided at admission.
-- `active` stays an INTEGER (0/1), as on SQLite, so the shared statements compare it the same way.
CREATE TABLE installations (
    id BIGINT PRIMARY KEY,
    account TEXT NOT NULL DEFAULT '',
    active INTEGER NOT NULL DEFAULT 1,
    reason TEXT,
    updated_at DOUBLE PRECISION NOT NULL
);

CREATE TABLE outbox (
    id BIGSERIAL PRIMARY KEY,
    kind TEXT NOT NULL,
    installation_id BIGINT NOT NULL,
    repo_full_name TEXT NOT NULL,
    target BIGINT NOT NULL,
    content TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    sent_at DOUBLE PRECISION,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT
);
CREATE INDEX outbox_unsent ON outbox (id) WHERE sent_at IS NULL;
CREATE INDEX jobs_by_installation ON jobs (installation_id, created_at);
