-- What became of each published finding (core/outcomes.py): its fate, when the event that gave it happened (GitHub's
-- time), and what it was (a push, a reaction, a reply, a resolved thread, the merge or close). And one row per
-- published review: its model, prompt version, settings and experiment variant, what it published and its tokens,
-- so the acted-on rate can be read by any of them. Number 0017 is another change's: migrations apply by number,
-- each once, whatever order they arrive in.
ALTER TABLE findings ADD COLUMN fate TEXT NOT NULL DEFAULT 'open'
    CHECK (fate IN ('open', 'fixed', 'dismissed', 'open_at_merge', 'open_at_close'));
ALTER TABLE findings ADD COLUMN fate_at REAL;
ALTER TABLE findings ADD COLUMN fate_source TEXT;
CREATE INDEX findings_by_created ON findings (created_at);
CREATE INDEX findings_by_fate ON findings (fate);
CREATE TABLE review_runs (
    job_id INTEGER PRIMARY KEY,
    repo_id INTEGER NOT NULL,
    repo_full_name TEXT NOT NULL,
    pr_number INTEGER NOT NULL,
    review_id INTEGER,
    head_sha TEXT NOT NULL,
    model TEXT NOT NULL,
    verify_model TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    settings TEXT NOT NULL,
    experiment TEXT,
    variant TEXT,
    learnings INTEGER NOT NULL,
    findings INTEGER NOT NULL,
    usage TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX review_runs_by_created ON review_runs (created_at);
