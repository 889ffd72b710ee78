"""Named SQL of the PostgreSQL store: the shared statements renumbered for asyncpg, and the PostgreSQL-only ones."""

from __future__ import annotations

from reviewer_app.core.states import TERMINAL, JobState
from reviewer_app.store import sql

CHANNEL = "reviewer_jobs"


def numbered(query: str) -> str:
    """The query with each ``?`` placeholder (outside string literals) renumbered as ``$1, $2, ...``."""
    out: list[str] = []
    n, quoted = 0, False
    for ch in query:
        if ch == "'":
            quoted = not quoted
        if ch == "?" and not quoted:
            n += 1
            out.append(f"${n}")
        else:
            out.append(ch)
    return "".join(out)


# The shared statements, portable once renumbered; each keeps the guard its name says.
PENDING_JOBS_OF_PR = numbered(sql.PENDING_JOBS_OF_PR)
SUPERSEDE_IF_PENDING = numbered(sql.SUPERSEDE_IF_PENDING)
FINISH_SUPERSEDED_ATTEMPT = numbered(sql.FINISH_SUPERSEDED_ATTEMPT)
INSERT_FOLLOWING_REQUEST = numbered(sql.INSERT_FOLLOWING_REQUEST)
SET_SUPERSEDED_BY = numbered(sql.SET_SUPERSEDED_BY)
CANCEL_PR_PENDING = numbered(sql.CANCEL_PR_PENDING)
RENEW_IF_LEASE_HELD = numbered(sql.RENEW_IF_LEASE_HELD)
PRUNE_FINISHED_EFFECTS = numbered(sql.PRUNE_FINISHED_EFFECTS)
RENEW_MANY_IF_LEASE_HELD = f"""
UPDATE jobs SET lease_expires_at = $1, updated_at = $2
  FROM unnest($3::bigint[], $4::text[]) AS held(id, token)
 WHERE jobs.id = held.id AND jobs.lease_token = held.token AND jobs.state = '{JobState.RUNNING.value}'
RETURNING jobs.lease_token
"""
REQUEUE_IF_LEASE_HELD = numbered(sql.REQUEUE_IF_LEASE_HELD)
FINISH_ATTEMPT = numbered(sql.FINISH_ATTEMPT)
ADD_ATTEMPT_USAGE = numbered(sql.ADD_ATTEMPT_USAGE)
EXPIRE_TO_QUEUE = numbered(sql.EXPIRE_TO_QUEUE)
EXPIRE_TO_FAILED = numbered(sql.EXPIRE_TO_FAILED)
OPERATOR_CANCEL = numbered(sql.OPERATOR_CANCEL)
OPERATOR_RETRY = numbered(sql.OPERATOR_RETRY)
NEEDS_CHECK_SYNC = numbered(sql.NEEDS_CHECK_SYNC)
SET_CHECK_RUN_IF_UNCHANGED = numbered(sql.SET_CHECK_RUN_IF_UNCHANGED)
FORGET_CHECK_RUN_STATUS = numbered(sql.FORGET_CHECK_RUN_STATUS)
CLAIM_CHECK_RUN_CREATION = numbered(sql.CLAIM_CHECK_RUN_CREATION)
INSERT_EFFECT = numbered(sql.INSERT_EFFECT)
PENDING_EFFECTS = numbered(sql.PENDING_EFFECTS)
COMMENTED_SINCE = numbered(sql.COMMENTED_SINCE)
UPSERT_INSTALLATION = numbered(sql.UPSERT_INSTALLATION)
CANCEL_INSTALLATION_PENDING = numbered(sql.CANCEL_INSTALLATION_PENDING)
CANCEL_REPO_PENDING = numbered(sql.CANCEL_REPO_PENDING)
LAST_REVIEWED_HEAD = numbered(sql.LAST_REVIEWED_HEAD)
RECORD_PUBLISHED_REVIEW = numbered(sql.RECORD_PUBLISHED_REVIEW)
USAGE_BY_REPO = numbered(sql.USAGE_BY_REPO)

# Take the migration lock of one schema; held until the migrating transaction ends.
LOCK_MIGRATIONS = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"

# The two admission locks, each keyed the same way wherever it is taken (a key written twice could drift apart and
# silently stop serialising). {installation}, {repo} and {pr} are the statement's parameters.
_INSTALLATION_LOCK = (
    "pg_advisory_xact_lock(hashtextextended('reviewer-app:installation:' || {installation}::bigint, 0))"
)
_PR_LOCK = "pg_advisory_xact_lock(hashtextextended('reviewer-app:pr:' || {repo}::bigint || ':' || {pr}::bigint, 0))"

# Serialise admissions of one pull request across processes, as SQLite's single writer does: a newer head then
# always sees (and supersedes) the older head's committed job instead of both staying queued.
LOCK_PR_ADMISSION = "SELECT " + _PR_LOCK.format(repo="$1", pr="$2")

# Serialise admissions that touch one installation (uninstall, budget counts); taken before the PR lock.
LOCK_INSTALLATION_ADMISSION = "SELECT " + _INSTALLATION_LOCK.format(installation="$1")

# Serialise help answers to one pull request (repository name, PR number), so two asked at once post one.
LOCK_REPLY_ADMISSION = (
    "SELECT pg_advisory_xact_lock(hashtextextended('reviewer-app:reply:' || $1::text || '#' || $2::bigint, 0))"
)

# Both admission locks of an Enqueue in one round trip, installation first (a NULL installation takes only the PR
# lock). A statement of its own: the pre-check that follows must take its snapshot after the locks are held.
LOCK_ENQUEUE_ADMISSION = (
    f"SELECT CASE WHEN $1::bigint IS NULL THEN NULL ELSE {_INSTALLATION_LOCK.format(installation='$1')} END,"
    f" {_PR_LOCK.format(repo='$2', pr='$3')}"
)

# Everything an Enqueue must know before inserting, in one round trip under the locks (as on SQLite).
ENQUEUE_PRECHECK = f"""
SELECT (SELECT reason FROM installations WHERE id = $1 AND active = 0) AS inactive_reason,
       EXISTS (SELECT 1 FROM settings WHERE key = $2 AND value = '1') AS paused,
       (SELECT id FROM jobs WHERE revision_key = $3 AND state IN ({sql.LIVE_STATES})) AS live_id,
       CASE WHEN $4::boolean THEN (SELECT COUNT(*) FROM jobs WHERE installation_id = $1 AND created_at > $5
                                   AND {sql.SPENT_JOB}) ELSE 0 END AS reviews_today,
       CASE WHEN $6::boolean THEN (SELECT COUNT(*) FROM jobs WHERE repo_id = $7 AND pr_number = $8 AND priority = 0
                                   AND created_at > $9) ELSE 0 END AS manual_recent,
       CASE WHEN $10::boolean THEN EXISTS (SELECT 1 FROM jobs WHERE repo_id = $7 AND pr_number = $8
                                          AND state IN ({sql.PENDING_STATES})) ELSE FALSE END AS has_pending
"""

AUTHOR_SPENT_SINCE = numbered(
    sql.AUTHOR_SPENT_SINCE.replace("json_extract(details, '$.author')", "(details::jsonb ->> 'author')")
)

REQUESTS_BY_SINCE = numbered(
    sql.REQUESTS_BY_SINCE.replace("json_extract(details, '$.requested_by')", "(details::jsonb ->> 'requested_by')")
)

# Claim the delivery id first: a concurrent redelivery waits on this row and then sees it as a duplicate.
INSERT_DELIVERY_IF_NEW = """
INSERT INTO deliveries (delivery_id, event, action, received_at, outcome) VALUES ($1, $2, $3, $4, 'admitting')
ON CONFLICT (delivery_id) DO NOTHING RETURNING delivery_id
"""

SELECT_DELIVERY = "SELECT outcome, job_id FROM deliveries WHERE delivery_id = $1"

# Record what the claimed delivery led to (same transaction that claimed it).
RECORD_DELIVERY_OUTCOME = "UPDATE deliveries SET outcome = $2, job_id = $3 WHERE delivery_id = $1"

# A new revision only: the unique key over live jobs makes a concurrent duplicate insert nothing.
INSERT_JOB_IF_NEW_REVISION = f"""
INSERT INTO jobs (revision_key, repo_id, repo_full_name, installation_id, pr_number, head_sha, trigger, priority,
                  state, details, attempts, max_attempts, next_attempt_at, event_at, created_at, updated_at,
                  outcome, finished_at, before_sha)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 0, $11, $12, $13, $14, $14, $15, $16, $17)
ON CONFLICT (revision_key) WHERE state IN ({sql.LIVE_STATES}) DO NOTHING RETURNING id
"""

SELECT_LIVE_JOB_BY_REVISION = f"SELECT id FROM jobs WHERE revision_key = $1 AND state IN ({sql.LIVE_STATES})"

# Claim: lease up to $4 eligible queued jobs (not while the queue is paused), skipping rows another claimer has
# locked, with a random token per row; the attempt rows are written by the same statement, and the claimed rows
# come back whole, so a worker starts without reading its job again.
CLAIM_QUEUED = f"""
WITH claimed AS (
    UPDATE jobs SET state = '{JobState.RUNNING.value}', lease_owner = $1,
           lease_token = replace(gen_random_uuid()::text, '-', ''), lease_expires_at = $2,
           attempts = attempts + 1, started_at = COALESCE(started_at, $3), updated_at = $3
     WHERE id IN (SELECT id FROM jobs
                   WHERE state = '{JobState.QUEUED.value}' AND next_attempt_at <= $3
                     AND NOT EXISTS (SELECT 1 FROM settings WHERE key = 'queue_paused' AND value = '1')
                   ORDER BY priority, next_attempt_at, id
                   LIMIT $4 FOR UPDATE SKIP LOCKED)
    RETURNING {sql.JOB_COLUMNS}
), recorded AS (
    INSERT INTO attempts (job_id, attempt, lease_owner, lease_token, started_at)
    SELECT id, attempts, $1, lease_token, $3 FROM claimed
)
SELECT {sql.JOB_COLUMNS} FROM claimed ORDER BY id
"""

# sql.FINISH_IF_LEASE_HELD and sql.FINISH_ATTEMPT for a batch of finishes, in one statement (one round trip and one
# commit for all): each job leaves `running` for its terminal state only while its attempt's token still holds the
# lease, and that attempt's history row is closed with the state, or with 'lease_lost' when the lease was no longer
# held. Returns the tokens whose job it finished.
FINISH_JOBS_AND_ATTEMPTS = f"""
WITH input AS (
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::double precision[],
                         $7::text[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[])
        AS i(job_id, token, state, outcome, error, at, model, input_tokens, output_tokens, cache_creation_tokens,
             cache_read_tokens)
), finished AS (
    UPDATE jobs SET state = i.state, outcome = i.outcome, last_error = COALESCE(i.error, jobs.last_error),
           finished_at = i.at, updated_at = i.at, lease_token = NULL, lease_expires_at = NULL
      FROM input i
     WHERE jobs.id = i.job_id AND jobs.lease_token = i.token AND jobs.state = '{JobState.RUNNING.value}'
    RETURNING i.token
), closed AS (
    UPDATE attempts SET finished_at = i.at,
           outcome = CASE WHEN i.token IN (SELECT token FROM finished) THEN i.state ELSE 'lease_lost' END,
           error = i.error, model = COALESCE(i.model, attempts.model),
           input_tokens = attempts.input_tokens + i.input_tokens,
           output_tokens = attempts.output_tokens + i.output_tokens,
           cache_creation_tokens = attempts.cache_creation_tokens + i.cache_creation_tokens,
           cache_read_tokens = attempts.cache_read_tokens + i.cache_read_tokens
      FROM input i
     WHERE attempts.lease_token = i.token AND attempts.finished_at IS NULL
)
SELECT token FROM finished
"""

# Expired leases, locked in id order; a row another rescuer is already handling is skipped, not waited for.
SELECT_EXPIRED_SKIP_LOCKED = f"""
SELECT id, lease_token, attempts, max_attempts FROM jobs
 WHERE state = '{JobState.RUNNING.value}' AND lease_expires_at < $1
 ORDER BY id FOR UPDATE SKIP LOCKED
"""

NEXT_WAKEUP = f"""
SELECT MIN(t) FROM (SELECT MIN(next_attempt_at) AS t FROM jobs WHERE state = '{JobState.QUEUED.value}'
                    UNION ALL SELECT MIN(lease_expires_at) FROM jobs WHERE state = '{JobState.RUNNING.value}') AS w
"""

UPSERT_SETTING = """
INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value
"""

# Wake every host's dispatcher once the transaction commits; the payload names the schema, so stores that share
# a database but not a schema ignore each other's wake-ups.
NOTIFY_WAKEUP = f"SELECT pg_notify('{CHANNEL}', current_schema())"

SELECT_ATTEMPTS = """
SELECT job_id, attempt, lease_owner, started_at, finished_at, outcome, error, model, input_tokens, output_tokens,
       cache_creation_tokens, cache_read_tokens FROM attempts WHERE job_id = $1 ORDER BY id
"""

# An outbox effect was tried: count it, keep the error, and mark it sent when it went through.
MARK_EFFECT = """
UPDATE outbox SET attempts = attempts + 1, last_error = $1, sent_at = CASE WHEN $2::boolean THEN $3::double precision END
 WHERE id = $4
"""

SELECT_INSTALLATION_ACTIVE = "SELECT active FROM installations WHERE id = $1"

# Retention: the oldest finished jobs, skipping rows another host's pruner holds.
PRUNABLE_JOBS = f"""
SELECT id FROM jobs WHERE state IN ({", ".join(f"'{s.value}'" for s in sorted(TERMINAL))}) AND finished_at < $1
 ORDER BY finished_at, id LIMIT $2 FOR UPDATE SKIP LOCKED
"""

# A job that stays may name a pruned one as its superseder; its outcome text still says which.
FORGET_PRUNED_SUPERSEDERS = "UPDATE jobs SET superseded_by = NULL WHERE superseded_by = ANY($1::bigint[])"
DELETE_PRUNED_ATTEMPTS = "DELETE FROM attempts WHERE job_id = ANY($1::bigint[])"
DELETE_PRUNED_JOBS = "DELETE FROM jobs WHERE id = ANY($1::bigint[])"
PRUNE_DELIVERIES = """
DELETE FROM deliveries WHERE delivery_id IN (SELECT delivery_id FROM deliveries WHERE received_at < $1 LIMIT $2)
"""
