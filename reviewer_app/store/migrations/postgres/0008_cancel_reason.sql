-- Why a job was cancelled, as a closed set of values (reviewer_app/core/cancel_reasons.py) instead of a prefix
-- parsed out of the outcome text; the outcome keeps the words for people. Existing cancelled jobs get theirs here.
ALTER TABLE jobs ADD COLUMN cancel_reason TEXT
    CHECK (cancel_reason IN ('pr_closed', 'uninstalled', 'suspended', 'repo_removed', 'no_access', 'skipped', 'covered', 'refused', 'operator', 'other'));
UPDATE jobs SET cancel_reason = CASE
     WHEN outcome = 'pull request closed' THEN 'pr_closed'
     WHEN outcome = 'the pull request was closed' THEN 'pr_closed'
     WHEN outcome = 'the app was uninstalled' THEN 'uninstalled'
     WHEN outcome = 'the installation was suspended' THEN 'suspended'
     WHEN outcome = 'the repository was removed from the installation' THEN 'repo_removed'
     WHEN outcome = 'GitHub refused the app''s access to the installation (suspended or uninstalled)' THEN 'no_access'
     WHEN outcome LIKE 'skipped: %' THEN 'skipped'
     WHEN outcome LIKE 'covered: %' THEN 'covered'
     WHEN outcome LIKE 'refused: %' THEN 'refused'
     ELSE 'other' END
 WHERE state = 'cancelled'
