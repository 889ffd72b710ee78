-- How many automatic events for a running job's own revision were admitted while it ran (each a duplicate): a job
-- that decided to skip its head (a draft, reviews turned off) ends skipped only if none came meanwhile, otherwise it
-- decides again on the pull request as it is now (a draft marked ready while its job was deciding).
ALTER TABLE jobs ADD COLUMN pokes INTEGER NOT NULL DEFAULT 0
