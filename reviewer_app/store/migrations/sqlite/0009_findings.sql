-- What the app posted on a pull request, one row per inline finding, so a later revision's review neither repeats
-- it nor leaves its thread open once the code it pointed at changed. A finding is found again by content, not line
-- number: the commented line and its neighbourhood (JSON lists of lines), normalised by core/findings.py. job_id is
-- not a foreign key: a pruned job leaves its findings behind, since the threads they name are still on GitHub.
CREATE TABLE findings (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    repo_id INTEGER NOT NULL,
    pr_number INTEGER NOT NULL,
    job_id INTEGER NOT NULL,
    review_id INTEGER,
    head_sha TEXT NOT NULL,
    path TEXT NOT NULL,
    line INTEGER NOT NULL,
    line_text TEXT NOT NULL,
    before_lines TEXT NOT NULL,
    after_lines TEXT NOT NULL,
    severity TEXT NOT NULL,
    title TEXT NOT NULL,
    body_digest TEXT NOT NULL,
    comment_id INTEGER,
    thread_id TEXT,
    state TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'resolved')),
    created_at REAL NOT NULL,
    resolved_at REAL,
    UNIQUE (job_id, path, line, body_digest)
);
CREATE INDEX findings_by_pr ON findings (repo_id, pr_number, state);
