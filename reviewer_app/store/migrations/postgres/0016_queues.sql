-- A queue per kind of work (issue 30): reviews and answers are claimed apart, each with slots of its own, so a
-- question is answered while every review slot is busy. A job's queue follows from its trigger (an answer's is
-- "reply:<comment id>", core/admission.py), so the database derives it: no insert names it, and no job can sit in
-- the wrong queue. The claim reads the queue's own range of jobs_claimable, which now leads with it.
ALTER TABLE jobs ADD COLUMN queue TEXT GENERATED ALWAYS AS (
    CASE WHEN substr(trigger, 1, 6) = 'reply:' THEN 'answers' ELSE 'reviews' END
) STORED;
DROP INDEX jobs_claimable;
CREATE INDEX jobs_claimable ON jobs (queue, priority, next_attempt_at, id) WHERE state = 'queued';
-- Each process's slots per queue and how many are busy, as JSON: {"reviews": {"slots": 4, "running": 1}, ...}.
ALTER TABLE workers ADD COLUMN queues TEXT NOT NULL DEFAULT '{}';
