-- A revision key is unique among live jobs only (queued, running, succeeded): a job that ended without a review
-- (cancelled because the PR closed, superseded, failed) no longer blocks its head when that head is current again.
-- Also: the head a synchronize replaced (`before_sha`), the ordering signal admission trusts over a timestamp.
ALTER TABLE jobs DROP CONSTRAINT jobs_revision_key_key;
CREATE UNIQUE INDEX jobs_live_revision ON jobs (revision_key) WHERE state IN ('queued', 'running', 'succeeded');
CREATE INDEX jobs_revision ON jobs (revision_key);
ALTER TABLE jobs ADD COLUMN before_sha TEXT
