-- What a repository's team taught the app (issue 29): one row per learning, with its source and an undo (deleted
-- only by the team: `/review forget`, the CLI). repo is the repository's GitHub id in decimal, as the findings table's
-- repo_id; path_glob '' binds it to no path. A learning is kept once per (repo, path_glob, text).
CREATE TABLE learnings (
    id BIGSERIAL PRIMARY KEY,
    repo TEXT NOT NULL,
    path_glob TEXT NOT NULL DEFAULT '',
    text TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('do-not-flag', 'prefer', 'always-check')),
    source_kind TEXT NOT NULL,
    source_url TEXT,
    author TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    times_applied INTEGER NOT NULL DEFAULT 0,
    last_applied DOUBLE PRECISION,
    UNIQUE (repo, path_glob, text)
);

-- A person's +1 or -1 on one of the app's findings, counted on the finding's content (not its comment), so a repeated
-- -1 pattern shows across pull requests. One row per (repo, finding_key, author, signal).
CREATE TABLE finding_feedback (
    id BIGSERIAL PRIMARY KEY,
    repo TEXT NOT NULL,
    finding_key TEXT NOT NULL,
    signal TEXT NOT NULL CHECK (signal IN ('+1', '-1')),
    author TEXT NOT NULL,
    source_url TEXT,
    at DOUBLE PRECISION NOT NULL,
    UNIQUE (repo, finding_key, author, signal)
);
