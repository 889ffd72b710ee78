-- Installations (lifecycle) and the outbox of small GitHub writes decided at admission.
CREATE TABLE installations (
    id INTEGER PRIMARY KEY,
    account TEXT NOT NULL DEFAULT '',
    active INTEGER NOT NULL DEFAULT 1,
    reason TEXT,
    updated_at REAL NOT NULL
);

CREATE TABLE outbox (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    installation_id INTEGER NOT NULL,
    repo_full_name TEXT NOT NULL,
    target INTEGER NOT NULL,
    content TEXT NOT NULL,
    created_at REAL NOT NULL,
    sent_at REAL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT
);
CREATE INDEX outbox_unsent ON outbox (id) WHERE sent_at IS NULL;
CREATE INDEX jobs_by_installation ON jobs (installation_id, created_at);
