"""Admission: a delivery claimed and recorded once, the facts an Enqueue decides over read in one pre-check, the new
job inserted once per live revision, and an installation's or repository's pending jobs cancelled."""

from __future__ import annotations

from reviewer_app.core.states import JobEvent, JobState
from reviewer_app.store.statements.dialects import Dialects, numbered
from reviewer_app.store.statements.jobs import LIVE_STATES, PENDING_STATES, source_states
from reviewer_app.store.statements.limits import SPENT_JOB
from reviewer_app.store.statements.locks import INSTALLATION_KEY, PR_KEY

# PostgreSQL claims the delivery id first: a concurrent redelivery waits on this row and then sees it as seen.
CLAIM_DELIVERY = Dialects(
    None,
    "INSERT INTO deliveries (delivery_id, event, action, received_at, outcome) VALUES ($1, $2, $3, $4, 'admitting')"
    " ON CONFLICT (delivery_id) DO NOTHING",
)

# The hot path of admission on PostgreSQL, one round trip: claim the delivery id and take the admission locks. The
# installation lock is shared (enqueues of one installation run side by side; an uninstall takes it exclusively),
# and exclusive only when the daily budget is counted. Parameters: delivery id, event, action, now, installation,
# exclusive?, repo, PR. A statement of its own: the pre-check that follows takes its snapshot after the locks.
CLAIM_DELIVERY_AND_LOCK_ENQUEUE = Dialects(
    None,
    f"""
WITH claimed AS (
    INSERT INTO deliveries (delivery_id, event, action, received_at, outcome) VALUES ($1, $2, $3, $4, 'admitting')
    ON CONFLICT (delivery_id) DO NOTHING RETURNING 1
)
SELECT CASE WHEN $5::bigint IS NULL THEN NULL
            WHEN $6::boolean THEN pg_advisory_xact_lock({INSTALLATION_KEY.format(installation="$5")})
            ELSE pg_advisory_xact_lock_shared({INSTALLATION_KEY.format(installation="$5")}) END,
       pg_advisory_xact_lock({PR_KEY.format(repo="$7", pr="$8")}),
       (SELECT COUNT(*) FROM claimed) AS claimed
""",
)

# The same for every Enqueue of a batch the PostgreSQL driver commits together, in one round trip: the parameters
# are CLAIM_DELIVERY_AND_LOCK_ENQUEUE's as arrays, in the batch's (lock) order; the locks are taken in that order,
# and a delivery id twice in one batch is claimed by its first admission only. One row per admission, in order.
CLAIM_DELIVERIES_AND_LOCK_ENQUEUES = f"""
WITH input AS MATERIALIZED (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::double precision[], $5::bigint[], $6::boolean[],
                         $7::bigint[], $8::bigint[])
        WITH ORDINALITY AS i(delivery_id, event, action, received_at, installation, exclusive, repo, pr, n)
), claimed AS (
    INSERT INTO deliveries (delivery_id, event, action, received_at, outcome)
    SELECT DISTINCT ON (delivery_id) delivery_id, event, action, received_at, 'admitting' FROM input
     ORDER BY delivery_id, n
    ON CONFLICT (delivery_id) DO NOTHING RETURNING delivery_id
), locked AS MATERIALIZED (
    SELECT n,
           CASE WHEN installation IS NULL THEN NULL
                WHEN exclusive THEN pg_advisory_xact_lock({INSTALLATION_KEY.format(installation="installation")})
                ELSE pg_advisory_xact_lock_shared({INSTALLATION_KEY.format(installation="installation")}) END
               AS installation_lock,
           pg_advisory_xact_lock({PR_KEY.format(repo="repo", pr="pr")}) AS pr_lock
      FROM input
), first_claims AS (
    SELECT n, row_number() OVER (PARTITION BY delivery_id ORDER BY n) = 1 AS first FROM input
)
SELECT l.installation_lock, l.pr_lock,
       CASE WHEN f.first AND i.delivery_id IN (SELECT delivery_id FROM claimed) THEN 1 ELSE 0 END AS claimed
  FROM locked l JOIN first_claims f USING (n) JOIN input i USING (n)
 ORDER BY n
"""

# A delivery recorded by a committed admission (PostgreSQL's own claim in this transaction says 'admitting').
SELECT_SEEN_DELIVERY = "SELECT job_id FROM deliveries WHERE delivery_id = ? AND COALESCE(outcome, '') <> 'admitting'"

# What the delivery led to, recorded in the admitting transaction (over PostgreSQL's claim of it).
RECORD_DELIVERY = """
INSERT INTO deliveries (delivery_id, event, action, received_at, outcome, job_id) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (delivery_id) DO UPDATE SET outcome = excluded.outcome, job_id = excluded.job_id
"""

# Everything an Enqueue must know before inserting, in one statement. Parameters, in order: delivery id (twice),
# installation, pause key, revision key, count the day's reviews?, installation, a day ago, count manual requests?,
# repo, PR, an hour ago, look for pending jobs?, repo, PR.
ENQUEUE_PRECHECK = Dialects(
    f"""
SELECT EXISTS (SELECT 1 FROM deliveries WHERE delivery_id = ?1 AND COALESCE(outcome, '') <> 'admitting') AS seen,
       (SELECT job_id FROM deliveries WHERE delivery_id = ?2) AS seen_job_id,
       (SELECT reason FROM installations WHERE id = ?3 AND active = 0) AS inactive_reason,
       EXISTS (SELECT 1 FROM settings WHERE key = ?4 AND value = '1') AS paused,
       (SELECT id FROM jobs WHERE revision_key = ?5 AND state IN ({LIVE_STATES})) AS live_id,
       CASE WHEN ?6 THEN (SELECT COUNT(*) FROM jobs WHERE installation_id = ?7
                          AND created_at > ?8 AND {SPENT_JOB} AND (trigger LIKE 'reply:%') = ?16)
            ELSE 0 END AS reviews_today,
       CASE WHEN ?9 THEN (SELECT COUNT(DISTINCT trigger) FROM jobs WHERE repo_id = ?10 AND pr_number = ?11
                          AND priority = 0 AND created_at > ?12)
            ELSE 0 END AS manual_recent,
       CASE WHEN ?13 THEN EXISTS (SELECT 1 FROM jobs WHERE repo_id = ?14 AND pr_number = ?15
                                  AND state IN ({PENDING_STATES}))
            ELSE 0 END AS has_pending
""",
    f"""
SELECT EXISTS (SELECT 1 FROM deliveries WHERE delivery_id = $1 AND COALESCE(outcome, '') <> 'admitting') AS seen,
       (SELECT job_id FROM deliveries WHERE delivery_id = $2) AS seen_job_id,
       (SELECT reason FROM installations WHERE id = $3 AND active = 0) AS inactive_reason,
       EXISTS (SELECT 1 FROM settings WHERE key = $4 AND value = '1') AS paused,
       (SELECT id FROM jobs WHERE revision_key = $5 AND state IN ({LIVE_STATES})) AS live_id,
       CASE WHEN $6::boolean THEN (SELECT COUNT(*) FROM jobs WHERE installation_id = $7 AND created_at > $8
                                   AND {SPENT_JOB} AND (trigger LIKE 'reply:%') = $16::boolean)
            ELSE 0 END AS reviews_today,
       CASE WHEN $9::boolean THEN (SELECT COUNT(DISTINCT trigger) FROM jobs WHERE repo_id = $10 AND pr_number = $11
                                   AND priority = 0 AND created_at > $12) ELSE 0 END AS manual_recent,
       CASE WHEN $13::boolean THEN EXISTS (SELECT 1 FROM jobs WHERE repo_id = $14 AND pr_number = $15
                                          AND state IN ({PENDING_STATES})) ELSE FALSE END AS has_pending
""",
)

# ENQUEUE_PRECHECK for several Enqueues of a PostgreSQL batch at once, in one round trip, taken only for those whose
# facts no other admission of the batch writes (postgres._independent_prechecks: each its own pull request, no count
# of the day's or the hour's jobs): the parameters are ENQUEUE_PRECHECK's $1, $3, $4, $5, $13, $14, $15 as arrays,
# one row per admission in their order, in ENQUEUE_PRECHECK's columns (the counts it was not asked for are 0).
ENQUEUE_PRECHECKS_TOGETHER = f"""
SELECT EXISTS (SELECT 1 FROM deliveries WHERE delivery_id = i.delivery_id AND COALESCE(outcome, '') <> 'admitting')
           AS seen,
       (SELECT job_id FROM deliveries WHERE delivery_id = i.delivery_id) AS seen_job_id,
       (SELECT reason FROM installations WHERE id = i.installation AND active = 0) AS inactive_reason,
       EXISTS (SELECT 1 FROM settings WHERE key = i.pause_key AND value = '1') AS paused,
       (SELECT id FROM jobs WHERE revision_key = i.revision_key AND state IN ({LIVE_STATES})) AS live_id,
       0::bigint AS reviews_today, 0::bigint AS manual_recent,
       CASE WHEN i.check_pending THEN EXISTS (SELECT 1 FROM jobs WHERE repo_id = i.repo AND pr_number = i.pr
                                              AND state IN ({PENDING_STATES})) ELSE FALSE END AS has_pending
  FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::boolean[], $6::bigint[], $7::bigint[])
       WITH ORDINALITY AS i(delivery_id, installation, pause_key, revision_key, check_pending, repo, pr, n)
 ORDER BY i.n
"""

# A new job: SQLite's single writer checked the revision key in the pre-check (the id is the row id); on
# PostgreSQL the unique key over live jobs makes a concurrent duplicate insert nothing.
_INSERT_JOB = """
INSERT INTO jobs (revision_key, repo_id, repo_full_name, installation_id, pr_number, head_sha, trigger, priority,
                  state, details, attempts, max_attempts, next_attempt_at, event_at, created_at, updated_at,
                  outcome, finished_at, before_sha, cancel_reason)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
INSERT_JOB_IF_NEW_REVISION = Dialects(
    _INSERT_JOB,
    numbered(_INSERT_JOB) + f"\nON CONFLICT (revision_key) WHERE state IN ({LIVE_STATES}) DO NOTHING RETURNING id",
)

# INSERT_JOB_IF_NEW_REVISION for several independent Enqueues of a PostgreSQL batch at once (their pre-checks ran
# together): its parameters as arrays, the rows inserted in their order; a revision already live inserts nothing
# and returns no row (its admission then reads the live job, as alone). Returns (id, revision_key) per row inserted.
INSERT_JOBS_IF_NEW_REVISIONS = f"""
INSERT INTO jobs (revision_key, repo_id, repo_full_name, installation_id, pr_number, head_sha, trigger, priority,
                  state, details, attempts, max_attempts, next_attempt_at, event_at, created_at, updated_at,
                  outcome, finished_at, before_sha, cancel_reason)
SELECT revision_key, repo_id, repo_full_name, installation_id, pr_number, head_sha, trigger, priority, state, details,
       0, max_attempts, next_attempt_at, event_at, created_at, updated_at, outcome, finished_at, before_sha,
       cancel_reason
  FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::text[],
              $8::integer[], $9::text[], $10::text[], $11::integer[], $12::double precision[],
              $13::double precision[], $14::double precision[], $15::double precision[], $16::text[],
              $17::double precision[], $18::text[], $19::text[])
       WITH ORDINALITY AS i(revision_key, repo_id, repo_full_name, installation_id, pr_number, head_sha, trigger,
                            priority, state, details, max_attempts, next_attempt_at, event_at, created_at,
                            updated_at, outcome, finished_at, before_sha, cancel_reason, n)
 ORDER BY i.n
ON CONFLICT (revision_key) WHERE state IN ({LIVE_STATES}) DO NOTHING
RETURNING id, revision_key
"""

SELECT_LIVE_JOB_BY_REVISION = f"SELECT id FROM jobs WHERE revision_key = ? AND state IN ({LIVE_STATES})"

# An installation's change (core.admission.InstallationChange, ReposRemoved): the installation recorded, and the
# pending jobs of an installation gone (or of its repositories removed) cancelled.
UPSERT_INSTALLATION = """
INSERT INTO installations (id, account, active, reason, updated_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET account = excluded.account, active = excluded.active, reason = excluded.reason,
                               updated_at = excluded.updated_at
"""

CANCEL_INSTALLATION_PENDING = f"""
UPDATE jobs SET state = '{JobState.CANCELLED.value}', outcome = ?, cancel_reason = ?, finished_at = ?, updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE installation_id = ? AND state IN ({source_states(JobEvent.CANCEL)})
RETURNING id
"""

CANCEL_REPO_PENDING = f"""
UPDATE jobs SET state = '{JobState.CANCELLED.value}', outcome = ?, cancel_reason = ?, finished_at = ?, updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE installation_id = ? AND repo_id = ? AND state IN ({source_states(JobEvent.CANCEL)})
RETURNING id
"""

__all__ = [
    "CLAIM_DELIVERY",
    "CLAIM_DELIVERY_AND_LOCK_ENQUEUE",
    "CLAIM_DELIVERIES_AND_LOCK_ENQUEUES",
    "SELECT_SEEN_DELIVERY",
    "RECORD_DELIVERY",
    "ENQUEUE_PRECHECK",
    "ENQUEUE_PRECHECKS_TOGETHER",
    "INSERT_JOB_IF_NEW_REVISION",
    "INSERT_JOBS_IF_NEW_REVISIONS",
    "SELECT_LIVE_JOB_BY_REVISION",
    "UPSERT_INSTALLATION",
    "CANCEL_INSTALLATION_PENDING",
    "CANCEL_REPO_PENDING",
]
