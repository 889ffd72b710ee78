"""Named SQL of the store, each name saying the guard it applies: written once with ``?`` placeholders where both
dialects agree (the PostgreSQL driver renumbers them), as a ``Dialects`` pair only where they really differ."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from reviewer_app.core.pr_work import LIVE_STATES as LIVE_STATES_TUPLE
from reviewer_app.core.pr_work import PENDING_STATES as PENDING_STATES_TUPLE
from reviewer_app.core.states import TERMINAL, JobEvent, JobState, sources_of


@dataclass(frozen=True, slots=True)
class Dialects:
    """One statement in each dialect's words; None: the dialect has nothing to do (the step is skipped)."""

    sqlite: str | None
    postgres: str | None


Statement = str | Dialects


@lru_cache(maxsize=512)
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


def for_sqlite(stmt: Statement) -> str | None:
    return stmt.sqlite if isinstance(stmt, Dialects) else stmt


def for_postgres(stmt: Statement) -> str | None:
    return stmt.postgres if isinstance(stmt, Dialects) else numbered(stmt)


def _states(event: JobEvent) -> str:
    return ", ".join(f"'{s.value}'" for s in sorted(sources_of(event)))


LIVE_STATES = ", ".join(f"'{s}'" for s in LIVE_STATES_TUPLE)  # a job that answers for its revision key
PENDING_STATES = ", ".join(f"'{s}'" for s in PENDING_STATES_TUPLE)

JOB_COLUMNS = (
    "id, revision_key, repo_id, repo_full_name, installation_id, pr_number, head_sha, trigger, priority, state,"
    " details, attempts, max_attempts, next_attempt_at, lease_owner, lease_token, lease_expires_at, last_error,"
    " superseded_by, outcome, check_run_id, check_run_status, review_id, publish_intent_at, answer, event_at,"
    " created_at, started_at, finished_at, updated_at, check_run_claim, cancel_reason, pokes, before_sha"
)

# -- admission: the PR's review work (core/pr_work.py decides, these statements apply) -------------------------

# The pull request's queued and running jobs, what core.pr_work.plan_enqueue decides over.
PENDING_JOBS_OF_PR = f"""
SELECT id, head_sha, trigger, state, event_at, before_sha FROM jobs
 WHERE repo_id = ? AND pr_number = ? AND state IN ({PENDING_STATES}) ORDER BY id
"""

# One pending job made pointless (a newer head), or moved on (a request following the PR to its newest head).
SUPERSEDE_IF_PENDING = f"""
UPDATE jobs SET state = '{JobState.SUPERSEDED.value}', superseded_by = ?, outcome = ?, finished_at = ?,
       updated_at = ?, lease_token = NULL, lease_expires_at = NULL
 WHERE id = ? AND state IN ({_states(JobEvent.SUPERSEDE)})
RETURNING id
"""

# Close the open attempt of a job superseded at admission.
FINISH_SUPERSEDED_ATTEMPT = """
UPDATE attempts SET finished_at = ?, outcome = 'superseded' WHERE finished_at IS NULL AND job_id = ?
"""

# A requested review that follows the PR: a queued copy of the request (same revision key, details and attempts
# allowance) with no head yet; the worker reviews the head it finds. Its predecessor is superseded first, so the
# live revision key stays unique.
INSERT_FOLLOWING_REQUEST = """
INSERT INTO jobs (revision_key, repo_id, repo_full_name, installation_id, pr_number, head_sha, trigger, priority,
                  state, details, attempts, max_attempts, next_attempt_at, created_at, updated_at, event_at)
SELECT revision_key, repo_id, repo_full_name, installation_id, pr_number, '', trigger, priority,
       'queued', details, 0, max_attempts, ?, ?, ?, event_at FROM jobs WHERE id = ?
RETURNING id
"""

SET_SUPERSEDED_BY = "UPDATE jobs SET superseded_by = ? WHERE id = ?"

# An automatic event for a running job's own revision was admitted (a duplicate): the job's skip, if it decided on
# the pull request as it was before, no longer stands (SKIP_IF_LEASE_HELD_AND_UNPOKED).
POKE_IF_RUNNING = f"UPDATE jobs SET pokes = pokes + 1 WHERE id = ? AND state = '{JobState.RUNNING.value}'"

# End an automatic job skipped (cancelled, its outcome says why) only while this attempt holds the lease and no
# event for its revision arrived since the attempt read the job.
SKIP_IF_LEASE_HELD_AND_UNPOKED = f"""
UPDATE jobs SET state = '{JobState.CANCELLED.value}', outcome = ?, cancel_reason = ?, finished_at = ?, updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE id = ? AND lease_token = ? AND state = '{JobState.RUNNING.value}' AND pokes = ?
"""

# Cancel every pending job of one PR (closed, uninstalled).
CANCEL_PR_PENDING = f"""
UPDATE jobs SET state = '{JobState.CANCELLED.value}', outcome = ?, cancel_reason = ?, finished_at = ?, updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE repo_id = ? AND pr_number = ? AND state IN ({_states(JobEvent.CANCEL)})
   AND COALESCE(event_at, created_at) <= ?
RETURNING id
"""
# CANCEL_PR_PENDING's last parameter is the close's time: a job admitted by an event GitHub timed strictly later (a
# reopen, a push) is newer knowledge and stays; a tie (one-second stamps) and a request (no event time) are
# cancelled, as a close always did. For a close of unknown time, a time that cancels everything pending:
CLOSED_AT_UNKNOWN = 1e18

# A pending job found again by an event for its revision (a reopen answered duplicate-revision): it was current as
# late as that event, so a close older than the event does not cancel it. Parameters: event time, job, event time.
RAISE_EVENT_AT_IF_PENDING = f"""
UPDATE jobs SET event_at = ? WHERE id = ? AND state IN ({_states(JobEvent.CANCEL)})
   AND (event_at IS NULL OR event_at < ?)
"""
# A webhook for a head the sweep admitted first (the sweep runs at start-up too): someone is watching after all,
# so the queued job is no longer "found by the sweep" and asks interactively (core/batching.py). Parameters: the
# webhook's action, job.
_UNSWEEP_IF_QUEUED = f"""
UPDATE jobs SET details = {{set_action}} WHERE id = ? AND state = '{JobState.QUEUED.value}'
   AND {{action}} = 'sweep'
"""
UNSWEEP_IF_QUEUED = Dialects(
    _UNSWEEP_IF_QUEUED.format(
        set_action="json_set(details, '$.action', ?)", action="json_extract(details, '$.action')"
    ),
    numbered(
        _UNSWEEP_IF_QUEUED.format(
            set_action="(details::jsonb || jsonb_build_object('action', ?::text))::text",
            action="(details::jsonb ->> 'action')",
        )
    ),
)

# A push that names the head it replaced, for a head that has a job (a force-push back to it): the job learns that
# its head came after that one, whatever state it is in (a worker reading the head later asks), where it knew
# nothing of its own `before` or this push is newer than what it knew. Parameters: before, job, event time.
LEARN_BEFORE = """
UPDATE jobs SET before_sha = ? WHERE id = ? AND (before_sha IS NULL OR event_at IS NULL OR event_at < ?)
"""

# Renew only while this attempt still holds the lease.
RENEW_IF_LEASE_HELD = f"""
UPDATE jobs SET lease_expires_at = ?, updated_at = ?
 WHERE id = ? AND lease_token = ? AND state = '{JobState.RUNNING.value}'
"""

# Leave `running` for a terminal state, only while this attempt holds the lease.
FINISH_IF_LEASE_HELD = f"""
UPDATE jobs SET state = ?, outcome = ?, cancel_reason = ?, last_error = COALESCE(?, last_error), finished_at = ?,
       updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE id = ? AND lease_token = ? AND state = '{JobState.RUNNING.value}'
"""

# Back to the queue at a later time; a deferral gives the attempt back.
REQUEUE_IF_LEASE_HELD = f"""
UPDATE jobs SET state = '{JobState.QUEUED.value}', next_attempt_at = ?, last_error = ?,
       attempts = attempts - ?, updated_at = ?, lease_token = NULL, lease_expires_at = NULL
 WHERE id = ? AND lease_token = ? AND state = '{JobState.RUNNING.value}'
"""

# Close the attempt's history row (its token is unique per attempt).
FINISH_ATTEMPT = """
UPDATE attempts SET finished_at = ?, outcome = ?, error = ?,
       model = COALESCE(?, model),
       input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,
       cache_creation_tokens = cache_creation_tokens + ?, cache_read_tokens = cache_read_tokens + ?
 WHERE lease_token = ? AND finished_at IS NULL
"""

ADD_ATTEMPT_USAGE = """
UPDATE attempts SET model = COALESCE(?, model),
       input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,
       cache_creation_tokens = cache_creation_tokens + ?, cache_read_tokens = cache_read_tokens + ?
 WHERE lease_token = ?
"""

INSERT_ATTEMPT = """
INSERT INTO attempts (job_id, attempt, lease_owner, lease_token, started_at) VALUES (?, ?, ?, ?, ?)
"""

# Expired leases: the rows to rescue, read inside the rescuing transaction.
SELECT_EXPIRED = f"""
SELECT id, lease_token, attempts, max_attempts FROM jobs
 WHERE state = '{JobState.RUNNING.value}' AND lease_expires_at < ?
"""

EXPIRE_TO_QUEUE = f"""
UPDATE jobs SET state = '{JobState.QUEUED.value}', next_attempt_at = ?, last_error = ?, updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE id = ? AND lease_token = ? AND state = '{JobState.RUNNING.value}'
"""

EXPIRE_TO_FAILED = f"""
UPDATE jobs SET state = '{JobState.FAILED.value}', last_error = ?, outcome = ?, finished_at = ?, updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE id = ? AND lease_token = ? AND state = '{JobState.RUNNING.value}'
"""

OPERATOR_CANCEL = f"""
UPDATE jobs SET state = '{JobState.CANCELLED.value}', outcome = ?, cancel_reason = 'operator', finished_at = ?, updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE id = ? AND state IN ({_states(JobEvent.CANCEL)})
"""

# A job that counts against the daily review limit: pending or finished, and a superseded or cancelled one that was
# claimed (its model call may have begun; a push right after a review starts must not make it free), unless the
# worker skipped it before asking the model.
SPENT_JOB = """(state NOT IN ('superseded', 'cancelled') OR (attempts > 0
  AND COALESCE(cancel_reason, '') NOT IN ('skipped', 'covered')))"""

# An outside author's automatic reviews (or an outside asker's answers) of one installation since a time that count
# against the daily limit (the author or asker is in the job's details). Parameters: installation, since, author,
# whether answers are counted (else reviews).
_AUTHOR_SPENT_SINCE = f"""
SELECT COUNT(*) FROM jobs WHERE installation_id = ? AND created_at > ? AND {SPENT_JOB}
   AND {{author}} = ? AND (trigger LIKE 'reply:%') = {{answers}}
"""
AUTHOR_SPENT_SINCE = Dialects(
    _AUTHOR_SPENT_SINCE.format(author="json_extract(details, '$.author')", answers="?"),
    numbered(_AUTHOR_SPENT_SINCE.format(author="(details::jsonb ->> 'author')", answers="?::boolean")),
)

# An asker's refused questions of one installation since a time: a refusal is shown (a reaction) on the first only.
# Parameters: installation, since, asker.
_REFUSALS_OF_ASKER_SINCE = """
SELECT COUNT(*) FROM jobs WHERE installation_id = ? AND created_at > ? AND trigger LIKE 'reply:%'
   AND cancel_reason = 'refused' AND {asker} = ?
"""
REFUSALS_OF_ASKER_SINCE = Dialects(
    _REFUSALS_OF_ASKER_SINCE.format(asker="json_extract(details, '$.asked_by')"),
    numbered(_REFUSALS_OF_ASKER_SINCE.format(asker="(details::jsonb ->> 'asked_by')")),
)

# One requester's requested reviews of a pull request since a time (the hourly allowance is each requester's, so
# a read-only commenter, refused later by the worker, cannot use up a maintainer's). Parameters: repository, PR,
# since, requester. A request is counted once however often it followed the pull request to a newer head (each
# follow is a row of its own with the request's trigger).
_REQUESTS_BY_SINCE = """
SELECT COUNT(DISTINCT trigger) FROM jobs WHERE repo_id = ? AND pr_number = ? AND priority = 0 AND created_at > ?
   AND {requester} = ?
"""
REQUESTS_BY_SINCE = Dialects(
    _REQUESTS_BY_SINCE.format(requester="json_extract(details, '$.requested_by')"),
    numbered(_REQUESTS_BY_SINCE.format(requester="(details::jsonb ->> 'requested_by')")),
)

# Answers in one thread of a pull request since a time that count against the thread's hourly limit (spent: an
# answer the worker skipped, e.g. for a commenter without write access, does not). Parameters: repository, PR,
# since, thread key.
_THREAD_REPLIES_SINCE = f"""
SELECT COUNT(*) FROM jobs WHERE repo_id = ? AND pr_number = ? AND created_at > ? AND {SPENT_JOB}
   AND trigger LIKE 'reply:%' AND {{thread}} = ?
"""
THREAD_REPLIES_SINCE = Dialects(
    _THREAD_REPLIES_SINCE.format(thread="json_extract(details, '$.thread')"),
    numbered(_THREAD_REPLIES_SINCE.format(thread="(details::jsonb ->> 'thread')")),
)

# An operator's retry of a finished job. A check run GitHub shows completed is forgotten (with any creation claim):
# GitHub does not reliably reopen a completed run, so the new attempt gets a new one (same external_id).
OPERATOR_RETRY = f"""
UPDATE jobs SET state = '{JobState.QUEUED.value}', attempts = 0, next_attempt_at = ?, updated_at = ?,
       finished_at = NULL, outcome = NULL, cancel_reason = NULL,
       check_run_id = CASE WHEN check_run_status = 'completed' THEN NULL ELSE check_run_id END,
       check_run_claim = CASE WHEN check_run_status = 'completed' THEN NULL ELSE check_run_claim END,
       check_run_claim_until = CASE WHEN check_run_status = 'completed' THEN NULL ELSE check_run_claim_until END,
       check_run_status = NULL
 WHERE id = ? AND state IN ({_states(JobEvent.RETRY_BY_OPERATOR)})
   AND NOT EXISTS (SELECT 1 FROM jobs AS live WHERE live.revision_key = jobs.revision_key AND live.id <> jobs.id
                   AND live.state IN ({LIVE_STATES}))
"""

# Jobs whose check run does not show their current phase yet (the key names the phase and the attempt). A running
# job's check run belongs to its worker, so hosts never race to create it (a sync that was already creating it when
# the worker claimed the job shows it in progress itself: CheckRuns.sync_job). An answer in a thread has no check
# run (it reviews no head).
CHECK_KEY = (
    "CASE WHEN state = 'queued' THEN 'queued:' || attempts"
    " WHEN state = 'running' THEN 'in_progress:' || attempts ELSE 'completed' END"
)
NEEDS_CHECK_SYNC = f"""
SELECT {JOB_COLUMNS} FROM jobs
 WHERE installation_id IS NOT NULL AND head_sha <> '' AND state <> 'running' AND trigger NOT LIKE 'reply:%'
   AND COALESCE(check_run_status, '') <> {CHECK_KEY}
   AND installation_id NOT IN (SELECT id FROM installations WHERE active = 0)
 ORDER BY updated_at LIMIT ?
"""

INSERT_EFFECT = """
INSERT INTO outbox (kind, installation_id, repo_full_name, target, content, created_at) VALUES (?, ?, ?, ?, ?, ?)
"""

# Whether the outbox holds a comment (a help answer) for this pull request newer than the cut-off, sent or not.
COMMENTED_SINCE = """
SELECT EXISTS (SELECT 1 FROM outbox WHERE kind = 'comment' AND repo_full_name = ? AND target = ? AND created_at > ?)
"""

# Effects still to send, skipping installations that are gone.
PENDING_EFFECTS = """
SELECT id, kind, installation_id, repo_full_name, target, content, created_at, attempts FROM outbox
 WHERE sent_at IS NULL AND installation_id NOT IN (SELECT id FROM installations WHERE active = 0)
 ORDER BY id LIMIT ?
"""

UPSERT_INSTALLATION = """
INSERT INTO installations (id, account, active, reason, updated_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET account = excluded.account, active = excluded.active, reason = excluded.reason,
                               updated_at = excluded.updated_at
"""

CANCEL_INSTALLATION_PENDING = f"""
UPDATE jobs SET state = '{JobState.CANCELLED.value}', outcome = ?, cancel_reason = ?, finished_at = ?, updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE installation_id = ? AND state IN ({_states(JobEvent.CANCEL)})
RETURNING id
"""


# One creator of a job's check run at a time, across hosts: the worker starting the review and another host's
# check-sync pass can both find no check run for the job and would both create one (GitHub keeps both). The claim
# expires, so a creator that died between creating and recording is replaced; its successor looks for the run by
# external_id before creating. Parameters: owner, until, job id, now, owner.
CLAIM_CHECK_RUN_CREATION = """
UPDATE jobs SET check_run_claim = ?, check_run_claim_until = ?
 WHERE id = ? AND check_run_id IS NULL
   AND (check_run_claim_until IS NULL OR check_run_claim_until <= ? OR check_run_claim = ?)
RETURNING id
"""

# Record what a job's check run shows (its id, and the key of the phase shown), only while the job is still as the
# writer read it: the same state and attempt, and no other check run recorded. A writer that read the job before it
# changed would otherwise record a phase GitHub does not show (a stale sync pass writing `completed` over a run
# another host just put in progress), and no pass would ever look at it again. Parameters: check run id (None: no
# run), key, job id, state read, attempts read, check run id again.
SET_CHECK_RUN_IF_UNCHANGED = """
UPDATE jobs SET check_run_id = COALESCE(check_run_id, ?), check_run_status = ?
 WHERE id = ? AND state = ? AND attempts = ? AND (check_run_id IS NULL OR check_run_id = ?)
"""

# After a check-run write that could not be recorded as above: GitHub may now show an older phase than the job's
# (the writer's PATCH may have landed after a newer one), so the key is cleared and the sync shows the job's phase
# again. The run itself is recorded if the job has none yet (its creator must not lose it).
FORGET_CHECK_RUN_STATUS = """
UPDATE jobs SET check_run_id = COALESCE(check_run_id, ?), check_run_status = NULL WHERE id = ?
"""

CANCEL_REPO_PENDING = f"""
UPDATE jobs SET state = '{JobState.CANCELLED.value}', outcome = ?, cancel_reason = ?, finished_at = ?, updated_at = ?,
       lease_token = NULL, lease_expires_at = NULL
 WHERE installation_id = ? AND repo_id = ? AND state IN ({_states(JobEvent.CANCEL)})
RETURNING id
"""

# The head of the PR's newest published review (a job superseded right after it posted counts too).
LAST_REVIEWED_HEAD = """
SELECT head_sha FROM jobs WHERE repo_id = ? AND pr_number = ? AND review_id IS NOT NULL
 ORDER BY COALESCE(finished_at, updated_at) DESC, id DESC LIMIT 1
"""

# The pull request of the latest job for a head of a repository: a fork's check suite lists no pull request.
PULL_OF_HEAD = "SELECT pr_number FROM jobs WHERE repo_id = ? AND head_sha = ? ORDER BY id DESC LIMIT 1"

# A review is on GitHub: record it whatever became of the lease (it is a fact about GitHub, not a claim on the job).
RECORD_PUBLISHED_REVIEW = "UPDATE jobs SET review_id = ? WHERE id = ? AND review_id IS NULL"

# -- findings (migration 0009) ------------------------------------------------------------------------------

FINDING_COLUMNS = (
    "id, repo_id, pr_number, job_id, review_id, head_sha, path, line, line_text, before_lines, after_lines, severity,"
    " title, body_digest, comment_id, thread_id, state"
)

# A review's findings are kept once: recording them again (a retry, a publication found by its marker) adds nothing.
INSERT_FINDING_IF_NEW = """
INSERT INTO findings (repo_id, pr_number, job_id, review_id, head_sha, path, line, line_text, before_lines,
                      after_lines, severity, title, body_digest, comment_id, thread_id, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (job_id, path, line, body_digest) DO NOTHING
"""

SELECT_OPEN_FINDINGS = f"""
SELECT {FINDING_COLUMNS} FROM findings WHERE repo_id = ? AND pr_number = ? AND state = 'open' ORDER BY id
"""

# What GitHub told us later (the comment's id, its thread's node id) never overwrites what it told us first.
LINK_FINDING = """
UPDATE findings SET comment_id = COALESCE(comment_id, ?), thread_id = COALESCE(thread_id, ?) WHERE id = ?
"""

RESOLVE_FINDING_IF_OPEN = "UPDATE findings SET state = 'resolved', resolved_at = ? WHERE id = ? AND state = 'open'"

COUNT_RESOLVED_FINDINGS = "SELECT COUNT(*) FROM findings WHERE repo_id = ? AND pr_number = ? AND state = 'resolved'"

# -- missed-webhook recovery (tables of migration 0003) ------------------------------------------------------

# Claim one GUID for a redelivery request: new, or left unfinished by a claimer that died or gave it back.
CLAIM_REDELIVERY_IF_UNCLAIMED = """
INSERT INTO redeliveries (guid, delivery_id, owner, claimed_at) VALUES (?, ?, ?, ?)
ON CONFLICT (guid) DO UPDATE SET delivery_id = excluded.delivery_id, owner = excluded.owner,
                                 claimed_at = excluded.claimed_at
 WHERE redeliveries.requested_at IS NULL AND redeliveries.claimed_at < ?
RETURNING guid
"""

# GitHub took the request (or refused it for good, with the error): never ask for this GUID again.
MARK_REDELIVERY_REQUESTED_IF_CLAIMED = """
UPDATE redeliveries SET requested_at = ?, error = ? WHERE guid = ? AND owner = ? AND requested_at IS NULL
"""

# The request failed for now: keep the error, and let the next pass (of any host) claim the GUID again.
RELEASE_REDELIVERY_IF_CLAIMED = """
UPDATE redeliveries SET claimed_at = 0, error = ? WHERE guid = ? AND owner = ? AND requested_at IS NULL
"""

# Rows about deliveries GitHub no longer keeps.
FORGET_REDELIVERIES = """
DELETE FROM redeliveries WHERE COALESCE(requested_at, claimed_at) < ?
"""

# A pass of a periodic duty: taken when free, expired, or already ours.
TAKE_DUTY_LEASE_IF_FREE = """
INSERT INTO duty_leases (duty, owner, expires_at) VALUES (?, ?, ?)
ON CONFLICT (duty) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
 WHERE duty_leases.expires_at <= ? OR duty_leases.owner = excluded.owner
RETURNING duty
"""

RELEASE_DUTY_LEASE_IF_HELD = """
UPDATE duty_leases SET expires_at = ? WHERE duty = ? AND owner = ?
"""

# Model tokens per repository and model since a time: what reviews cost (integers in both dialects: PostgreSQL's
# SUM of integers is NUMERIC).
# Model tokens per repository, model and way of asking: interactive (the attempts that called the model) and batched
# (requests answered through Message Batches, counted when the batch reported them), since the cut-off.
USAGE_BY_REPO = """
SELECT u.repo AS repo, u.kind AS kind, u.model AS model, u.batched AS batched, COUNT(DISTINCT u.job_id) AS jobs,
       CAST(SUM(u.input_tokens) AS BIGINT) AS input_tokens, CAST(SUM(u.output_tokens) AS BIGINT) AS output_tokens,
       CAST(SUM(u.cache_creation_tokens) AS BIGINT) AS cache_creation_tokens,
       CAST(SUM(u.cache_read_tokens) AS BIGINT) AS cache_read_tokens
  FROM (SELECT j.repo_full_name AS repo, CASE WHEN j.trigger LIKE 'reply:%' THEN 'answers' ELSE 'reviews' END AS kind,
               COALESCE(a.model, '') AS model, 0 AS batched, j.id AS job_id,
               a.input_tokens, a.output_tokens, a.cache_creation_tokens, a.cache_read_tokens
          FROM attempts a JOIN jobs j ON j.id = a.job_id
         WHERE a.started_at >= ? AND (a.input_tokens > 0 OR a.output_tokens > 0)
        UNION ALL
        SELECT j.repo_full_name, 'reviews', b.model, 1, j.id, b.input_tokens, b.output_tokens, b.cache_creation_tokens,
               b.cache_read_tokens
          FROM batch_requests b JOIN jobs j ON j.id = b.job_id
         WHERE b.ended_at >= ? AND (b.input_tokens > 0 OR b.output_tokens > 0)) u
 GROUP BY u.repo, u.kind, u.model, u.batched
 ORDER BY SUM(u.input_tokens) + SUM(u.output_tokens) DESC, u.repo, u.kind, u.model, u.batched
"""

# Retention: effects the outbox finished with (sent, or given up on) before the cut-off, a batch at a time.
PRUNE_FINISHED_EFFECTS = """
DELETE FROM outbox WHERE id IN (SELECT id FROM outbox WHERE sent_at IS NOT NULL AND sent_at < ? LIMIT ?)
"""

# -- statements whose words differ per dialect (or that one dialect does not need) ----------------------------

_INSTALLATION_KEY = "hashtextextended('reviewer-app:installation:' || {installation}::bigint, 0)"
_PR_KEY = "hashtextextended('reviewer-app:pr:' || {repo}::bigint || ':' || {pr}::bigint, 0)"

# Take the migration lock of one schema (PostgreSQL); held until the migrating transaction ends.
LOCK_MIGRATIONS = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"

# Several hosts admit at once on PostgreSQL, so a decision first takes transaction-scoped advisory locks, always in
# the same order (installation, then pull request): two heads of one PR, a budget count and an uninstall then see
# each other's committed rows, as SQLite's single writer gives them (SQLite needs no lock: the steps are skipped).
# The unique keys (delivery id, revision key) stay the last word on duplicates.
LOCK_PR_ADMISSION = Dialects(None, f"SELECT pg_advisory_xact_lock({_PR_KEY.format(repo='$1', pr='$2')})")
LOCK_INSTALLATION_ADMISSION = Dialects(
    None, f"SELECT pg_advisory_xact_lock({_INSTALLATION_KEY.format(installation='$1')})"
)
# Help answers to one pull request (repository name, PR number), so two asked at once post one.
LOCK_REPLY_ADMISSION = Dialects(
    None, "SELECT pg_advisory_xact_lock(hashtextextended('reviewer-app:reply:' || $1::text || '#' || $2::bigint, 0))"
)

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
            WHEN $6::boolean THEN pg_advisory_xact_lock({_INSTALLATION_KEY.format(installation="$5")})
            ELSE pg_advisory_xact_lock_shared({_INSTALLATION_KEY.format(installation="$5")}) END,
       pg_advisory_xact_lock({_PR_KEY.format(repo="$7", pr="$8")}),
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
                WHEN exclusive THEN pg_advisory_xact_lock({_INSTALLATION_KEY.format(installation="installation")})
                ELSE pg_advisory_xact_lock_shared({_INSTALLATION_KEY.format(installation="installation")}) END
               AS installation_lock,
           pg_advisory_xact_lock({_PR_KEY.format(repo="repo", pr="pr")}) AS pr_lock
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

# `/review resume`: the head skipped while paused is queued again, when the pull request's newest job with a head
# is that skip and its revision has no live job. A copy of the skipped job, queued. Parameters: now (due, created,
# updated), repository, PR, the paused skip's outcome.
RESUME_PAUSED_HEAD = f"""
INSERT INTO jobs (revision_key, repo_id, repo_full_name, installation_id, pr_number, head_sha, trigger, priority,
                  state, details, attempts, max_attempts, next_attempt_at, event_at, created_at, updated_at,
                  before_sha)
SELECT j.revision_key, j.repo_id, j.repo_full_name, j.installation_id, j.pr_number, j.head_sha, j.trigger, j.priority,
       '{JobState.QUEUED.value}', j.details, 0, j.max_attempts, ?, j.event_at, ?, ?, j.before_sha
  FROM jobs j
 WHERE j.id = (SELECT id FROM jobs WHERE repo_id = ? AND pr_number = ? AND head_sha <> '' ORDER BY id DESC LIMIT 1)
   AND j.outcome = ?
   AND NOT EXISTS (SELECT 1 FROM jobs l WHERE l.revision_key = j.revision_key AND l.state IN ({LIVE_STATES}))
RETURNING id
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

UPSERT_SETTING = (
    "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
SELECT_SETTING = "SELECT value FROM settings WHERE key = ?"
# Record a state-changing command (core.admission.applied_command_key) unless it was already: 1 row, first time.
CLAIM_COMMAND_IF_NEW = "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING"

# Claim: lease up to ?4 eligible queued jobs (not while the queue is paused) with a random token per row; the
# claimed rows come back whole, so a worker starts without reading its job again. Parameters: owner, lease expiry,
# now, limit. PostgreSQL skips rows another claimer has locked and writes the attempt rows in the same statement.
# SQLite is told its index: without statistics its planner may search another index on state and sort every queued
# job to take the first few (an index on (state, id) once made the claim O(backlog); tests/test_query_plans.py).
CLAIM_QUEUED = Dialects(
    f"""
UPDATE jobs SET state = '{JobState.RUNNING.value}', lease_owner = ?1, lease_token = lower(hex(randomblob(16))),
       lease_expires_at = ?2, attempts = attempts + 1, started_at = COALESCE(started_at, ?3), updated_at = ?3
 WHERE id IN (SELECT id FROM jobs INDEXED BY jobs_claimable
               WHERE state = '{JobState.QUEUED.value}' AND next_attempt_at <= ?3
                AND NOT EXISTS (SELECT 1 FROM settings WHERE key = 'queue_paused' AND value = '1')
              ORDER BY priority, next_attempt_at, id LIMIT ?4)
RETURNING {JOB_COLUMNS}
""",
    f"""
WITH claimed AS (
    UPDATE jobs SET state = '{JobState.RUNNING.value}', lease_owner = $1,
           lease_token = replace(gen_random_uuid()::text, '-', ''), lease_expires_at = $2,
           attempts = attempts + 1, started_at = COALESCE(started_at, $3), updated_at = $3
     WHERE id IN (SELECT id FROM jobs
                   WHERE state = '{JobState.QUEUED.value}' AND next_attempt_at <= $3
                     AND NOT EXISTS (SELECT 1 FROM settings WHERE key = 'queue_paused' AND value = '1')
                   ORDER BY priority, next_attempt_at, id
                   LIMIT $4 FOR UPDATE SKIP LOCKED)
    RETURNING {JOB_COLUMNS}
), recorded AS (
    INSERT INTO attempts (job_id, attempt, lease_owner, lease_token, started_at)
    SELECT id, attempts, $1, lease_token, $3 FROM claimed
)
SELECT {JOB_COLUMNS} FROM claimed ORDER BY id
""",
)
# The claimed attempts' history rows (PostgreSQL's claim wrote them already).
RECORD_CLAIMED_ATTEMPTS = Dialects(INSERT_ATTEMPT, None)

# Renew every lease still held, each fenced by its own token. Parameters: expiry, now, JSON [{"id", "token"}].
RENEW_MANY_IF_LEASE_HELD = Dialects(
    f"""
UPDATE jobs SET lease_expires_at = ?1, updated_at = ?2
  FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.token') AS token FROM json_each(?3)) AS held
 WHERE jobs.id = held.id AND jobs.lease_token = held.token AND jobs.state = '{JobState.RUNNING.value}'
RETURNING jobs.lease_token
""",
    f"""
UPDATE jobs SET lease_expires_at = $1, updated_at = $2
  FROM json_to_recordset($3::json) AS held(id bigint, token text)
 WHERE jobs.id = held.id AND jobs.lease_token = held.token AND jobs.state = '{JobState.RUNNING.value}'
RETURNING jobs.lease_token
""",
)

# FINISH_IF_LEASE_HELD and FINISH_ATTEMPT for a batch of finishes in one PostgreSQL statement (one round trip and
# one commit for all): each job leaves `running` only while its attempt's token still holds the lease; that
# attempt's history row is closed with the state, or with 'lease_lost'. Returns the tokens whose job it finished.
FINISH_JOBS_AND_ATTEMPTS = Dialects(
    None,
    f"""
WITH input AS (
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::double precision[],
                         $7::text[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::text[])
        AS i(job_id, token, state, outcome, error, at, model, input_tokens, output_tokens, cache_creation_tokens,
             cache_read_tokens, cancel_reason)
), finished AS (
    UPDATE jobs SET state = i.state, outcome = i.outcome, cancel_reason = i.cancel_reason,
           last_error = COALESCE(i.error, jobs.last_error),
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
""",
)

# The same on SQLite, in two statements over a JSON array (it has no data-modifying CTEs): the jobs first, each by
# its id and only under its token, RETURNING the ids finished; then every attempt of the batch closed with the state
# or 'lease_lost', as the first statement decided. Rows as procedures.finish_together builds them.
FINISH_JOBS_FROM_JSON = Dialects(
    f"""
UPDATE jobs SET state = i.state, outcome = i.outcome, cancel_reason = i.cancel_reason,
       last_error = COALESCE(i.error, jobs.last_error), finished_at = i.at, updated_at = i.at,
       lease_token = NULL, lease_expires_at = NULL
  FROM (SELECT json_extract(value, '$[0]') AS job_id, json_extract(value, '$[1]') AS token,
               json_extract(value, '$[2]') AS state, json_extract(value, '$[3]') AS outcome,
               json_extract(value, '$[4]') AS error, json_extract(value, '$[5]') AS at,
               json_extract(value, '$[11]') AS cancel_reason
          FROM json_each(?)) AS i
 WHERE jobs.id = i.job_id AND jobs.lease_token = i.token AND jobs.state = '{JobState.RUNNING.value}'
RETURNING jobs.id
""",
    None,
)
CLOSE_ATTEMPTS_FROM_JSON = Dialects(
    """
UPDATE attempts SET finished_at = i.at, outcome = i.outcome, error = i.error, model = COALESCE(i.model, attempts.model),
       input_tokens = attempts.input_tokens + i.input_tokens, output_tokens = attempts.output_tokens + i.output_tokens,
       cache_creation_tokens = attempts.cache_creation_tokens + i.cache_creation_tokens,
       cache_read_tokens = attempts.cache_read_tokens + i.cache_read_tokens
  FROM (SELECT json_extract(value, '$[0]') AS token, json_extract(value, '$[1]') AS at,
               json_extract(value, '$[2]') AS outcome, json_extract(value, '$[3]') AS error,
               json_extract(value, '$[4]') AS model, json_extract(value, '$[5]') AS input_tokens,
               json_extract(value, '$[6]') AS output_tokens, json_extract(value, '$[7]') AS cache_creation_tokens,
               json_extract(value, '$[8]') AS cache_read_tokens
          FROM json_each(?)) AS i
 WHERE attempts.lease_token = i.token AND attempts.finished_at IS NULL
""",
    None,
)

# Expired leases, read inside the rescuing transaction; PostgreSQL locks them in id order and skips a row another
# rescuer is already handling.
SELECT_EXPIRED_FOR_RESCUE = Dialects(SELECT_EXPIRED, numbered(SELECT_EXPIRED) + " ORDER BY id FOR UPDATE SKIP LOCKED")

NEXT_WAKEUP = f"""
SELECT MIN(t) FROM (SELECT MIN(next_attempt_at) AS t FROM jobs WHERE state = '{JobState.QUEUED.value}'
                    UNION ALL SELECT MIN(lease_expires_at) FROM jobs WHERE state = '{JobState.RUNNING.value}') AS w
"""

SELECT_ATTEMPTS = """
SELECT job_id, attempt, lease_owner, started_at, finished_at, outcome, error, model, input_tokens, output_tokens,
       cache_creation_tokens, cache_read_tokens FROM attempts WHERE job_id = ? ORDER BY id
"""

# An outbox effect was tried: count it, keep the error, and mark it sent when it went through. Parameters: error,
# done?, now, effect id.
MARK_EFFECT = Dialects(
    "UPDATE outbox SET attempts = attempts + 1, last_error = ?, sent_at = CASE WHEN ? THEN ? END WHERE id = ?",
    "UPDATE outbox SET attempts = attempts + 1, last_error = $1,"
    " sent_at = CASE WHEN $2::boolean THEN $3::double precision END WHERE id = $4",
)

SELECT_INSTALLATION_ACTIVE = "SELECT active FROM installations WHERE id = ?"
SELECT_DELIVERY_ID = "SELECT 1 FROM deliveries WHERE delivery_id = ?"

# GUIDs (a JSON array) neither admitted here nor already asked for again.
DELIVERIES_TO_RECOVER = Dialects(
    "SELECT j.value FROM json_each(?) AS j"
    " WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.delivery_id = j.value)"
    "   AND NOT EXISTS (SELECT 1 FROM redeliveries r WHERE r.guid = j.value AND r.requested_at IS NOT NULL)",
    "SELECT g FROM json_array_elements_text($1::json) AS g"
    " WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.delivery_id = g)"
    "   AND NOT EXISTS (SELECT 1 FROM redeliveries r WHERE r.guid = g AND r.requested_at IS NOT NULL)",
)

# Retention: the oldest finished jobs. On SQLite the newest job always stays: a new row gets max(id) + 1, and a job
# id must never be reused (review markers and check runs name it); PostgreSQL's sequence never goes back, and its
# pruner skips rows another host's pruner holds.
_TERMINAL = ", ".join(f"'{s.value}'" for s in sorted(TERMINAL))
PRUNABLE_JOBS = Dialects(
    f"SELECT id FROM jobs WHERE state IN ({_TERMINAL}) AND finished_at < ?"
    " AND id < (SELECT MAX(id) FROM jobs) ORDER BY finished_at, id LIMIT ?",
    f"SELECT id FROM jobs WHERE state IN ({_TERMINAL}) AND finished_at < $1"
    " ORDER BY finished_at, id LIMIT $2 FOR UPDATE SKIP LOCKED",
)
PRUNE_DELIVERIES = """
DELETE FROM deliveries WHERE delivery_id IN (SELECT delivery_id FROM deliveries WHERE received_at < ? LIMIT ?)
"""


def forget_pruned_superseders(n: int) -> str:
    """A job that stays may name a pruned one as its superseder; its outcome text still says which."""
    return f"UPDATE jobs SET superseded_by = NULL WHERE superseded_by IN ({', '.join('?' * n)})"


def delete_pruned_attempts(n: int) -> str:
    return f"DELETE FROM attempts WHERE job_id IN ({', '.join('?' * n)})"


def delete_pruned_jobs(n: int) -> str:
    return f"DELETE FROM jobs WHERE id IN ({', '.join('?' * n)})"


_STATE_VALUES = frozenset(st.value for st in JobState)


# The partial index holding every job of one state: a list of that state reads it, not the whole history.
# Running jobs are few and may be old; the others are read newest first along the primary key, which finds a page
# of queued jobs (the newest) or of failed ones (a few in a hundred) soon enough.
_STATE_INDEX = {"running": "jobs_running"}


def list_jobs_query(
    *, states: Sequence[str], repo: str | None, pr_number: int | None, before_id: int | None
) -> tuple[Statement, list[Any]] | None:
    """Jobs newest first, filtered (the last parameter, the limit, is the caller's); None when no state asked for is
    one this version knows. Running jobs are read through their partial index: SQLite is told so (without statistics
    it walks the primary key back through the history to find the few running ones); PostgreSQL's planner finds it."""
    where: list[str] = ["1 = 1"]
    params: list[Any] = []
    if before_id is not None:
        where.append("id < ?")
        params.append(before_id)
    index = None
    if states:
        known = sorted({str(st) for st in states} & _STATE_VALUES)
        if not known:
            return None
        index = _STATE_INDEX.get(known[0]) if len(known) == 1 else None
        if index is not None:  # written as a literal, so the partial index applies
            where.append(f"state = '{known[0]}'")
        else:
            where.append(f"state IN ({', '.join('?' * len(known))})")
            params.extend(known)
    if repo:
        where.append("repo_full_name = ?")
        params.append(repo)
    if pr_number is not None:
        where.append("pr_number = ?")
        params.append(pr_number)
    query = f"SELECT {JOB_COLUMNS} FROM jobs{{index}} WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?"
    if index is None:
        return query.format(index=""), params
    return Dialects(query.format(index=f" INDEXED BY {index}"), numbered(query.format(index=""))), params


STATE_COUNTS = "SELECT state, COUNT(*) FROM jobs GROUP BY state"
# The oldest job not yet finished: the first entry of jobs_queued_created, and the few running jobs (jobs_running).
OLDEST_PENDING = f"""
SELECT MIN(t) FROM (SELECT MIN(created_at) AS t FROM jobs WHERE state = '{JobState.QUEUED.value}'
                    UNION ALL SELECT MIN(created_at) FROM jobs WHERE state = '{JobState.RUNNING.value}') AS pending
"""
EXPIRED_LEASES = "SELECT COUNT(*) FROM jobs WHERE state = 'running' AND lease_expires_at < ?"
AWAITING_RECONCILIATION = (
    "SELECT COUNT(*) FROM jobs WHERE publish_intent_at IS NOT NULL AND review_id IS NULL"
    " AND state IN ('queued', 'running')"
)

# -- the worker registry: the processes running against this database (migration 0011) ------------------------

# Register a process, or refresh its row on each beat (a row pruned while the process was cut off comes back).
UPSERT_WORKER = """
INSERT INTO workers (id, host, pid, role, version, slots, lease_seconds, started_at, heartbeat_at, jobs_running)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, jobs_running = excluded.jobs_running,
       slots = excluded.slots
"""
DEREGISTER_WORKER = "DELETE FROM workers WHERE id = ?"
SELECT_WORKERS = """
SELECT id, host, pid, role, version, slots, lease_seconds, started_at, heartbeat_at, jobs_running
  FROM workers ORDER BY role, host, started_at, id
"""
# Every running job with its lease holder (the jobs_running index): whose jobs a gone process held, and when the
# rescuer hands them back.
RUNNING_JOBS_BY_OWNER = f"""
SELECT id, lease_owner, repo_full_name, pr_number, lease_expires_at FROM jobs
 WHERE state = '{JobState.RUNNING.value}' ORDER BY lease_expires_at, id
"""
# Retention: processes whose last heartbeat is older than the cut-off.
PRUNE_WORKERS = "DELETE FROM workers WHERE heartbeat_at < ?"

# -- the dashboard's reads ------------------------------------------------------------------------------------

# The queue now: pending jobs per state (their partial indexes), and finished jobs per state since a time (the
# jobs_finished index), so the count does not grow with the history the retention keeps.
_QUEUE_COUNTS = f"""
SELECT '{JobState.QUEUED.value}' AS state, COUNT(*) AS n FROM jobs WHERE state = '{JobState.QUEUED.value}'
UNION ALL SELECT '{JobState.RUNNING.value}', COUNT(*) FROM jobs WHERE state = '{JobState.RUNNING.value}'
UNION ALL SELECT state, COUNT(*) FROM jobs {{index}} WHERE finished_at >= ? AND state IN ({_TERMINAL}) GROUP BY state
"""
# SQLite would walk jobs_by_state over the whole history (it groups by state): it is told to read the range.
QUEUE_COUNTS = Dialects(
    _QUEUE_COUNTS.format(index="INDEXED BY jobs_finished"), numbered(_QUEUE_COUNTS.format(index=""))
)

# Failures since a time, newest first (the jobs_failed index).
FAILED_SINCE = f"""
SELECT {JOB_COLUMNS} FROM jobs WHERE state = '{JobState.FAILED.value}' AND finished_at >= ?
 ORDER BY finished_at DESC LIMIT ?
"""

# Model tokens per day (UTC), repository and model over attempts started in a period (the attempts_spend index
# covers it). A column added to the grouping (say, batched or interactive) splits every row the same way.
_SPEND_BY_DAY = """
SELECT {day} AS day, u.repo AS repo, u.model AS model, u.batched AS batched, COUNT(DISTINCT u.job_id) AS jobs,
       CAST(SUM(u.input_tokens) AS BIGINT) AS input_tokens, CAST(SUM(u.output_tokens) AS BIGINT) AS output_tokens,
       CAST(SUM(u.cache_creation_tokens) AS BIGINT) AS cache_creation_tokens,
       CAST(SUM(u.cache_read_tokens) AS BIGINT) AS cache_read_tokens
  FROM (SELECT a.started_at AS at, j.repo_full_name AS repo, COALESCE(a.model, '') AS model, 0 AS batched,
               j.id AS job_id, a.input_tokens, a.output_tokens, a.cache_creation_tokens, a.cache_read_tokens
          FROM attempts a JOIN jobs j ON j.id = a.job_id
         WHERE a.started_at >= ? AND a.started_at < ? AND (a.input_tokens > 0 OR a.output_tokens > 0)
        UNION ALL
        SELECT b.ended_at, j.repo_full_name, b.model, 1, j.id, b.input_tokens, b.output_tokens,
               b.cache_creation_tokens, b.cache_read_tokens
          FROM batch_requests b JOIN jobs j ON j.id = b.job_id
         WHERE b.ended_at >= ? AND b.ended_at < ? AND (b.input_tokens > 0 OR b.output_tokens > 0)) u
 GROUP BY {day}, u.repo, u.model, u.batched
 ORDER BY 1, 2, 3, 4
"""
SPEND_BY_DAY = Dialects(
    _SPEND_BY_DAY.format(day="CAST(u.at / 86400 AS INTEGER)"),
    numbered(_SPEND_BY_DAY.format(day="CAST(FLOOR(u.at / 86400) AS BIGINT)")),
)

# -- Message Batches: requests of jobs sent at half price, their results handed to the jobs (review/batches.py) --

BATCH_REQUEST_COLUMNS = (
    "custom_id, job_id, part_key, batch_id, model, state, result, error, submitted_at, ended_at, input_tokens,"
    " output_tokens, cache_creation_tokens, cache_read_tokens"
)

INSERT_BATCH_REQUEST = """
INSERT INTO batch_requests (custom_id, job_id, part_key, batch_id, model, submitted_at) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (custom_id) DO NOTHING
"""

SELECT_BATCH_REQUESTS_OF_JOB = (
    f"SELECT {BATCH_REQUEST_COLUMNS} FROM batch_requests WHERE job_id = ? ORDER BY submitted_at, custom_id"
)

# Batches the duty still waits on: any request of theirs not reported yet (withdrawn ones too, for their tokens).
OPEN_BATCHES = "SELECT DISTINCT batch_id FROM batch_requests WHERE ended_at IS NULL ORDER BY batch_id LIMIT ?"

SELECT_OPEN_REQUESTS_OF_BATCH = "SELECT custom_id FROM batch_requests WHERE batch_id = ? AND ended_at IS NULL"

# A batch's report on one request, written once (the first report wins; a second duty pass finds it ended). Only a
# request still pending takes the result: a withdrawn one keeps its state and gets only its tokens.
SETTLE_BATCH_REQUEST_IF_OPEN = """
UPDATE batch_requests
   SET state = CASE WHEN state = 'pending' THEN ? ELSE state END,
       result = CASE WHEN state = 'pending' THEN ? ELSE result END,
       error = CASE WHEN state = 'pending' THEN ? ELSE error END,
       ended_at = ?, input_tokens = ?, output_tokens = ?, cache_creation_tokens = ?, cache_read_tokens = ?
 WHERE custom_id = ? AND ended_at IS NULL
RETURNING job_id, state
"""

# The job waiting on a settled request runs now (it waits `queued` with a far retry time while the batch runs).
WAKE_QUEUED_JOB = f"""
UPDATE jobs SET next_attempt_at = ?, updated_at = ?
 WHERE id = ? AND state = '{JobState.QUEUED.value}' AND next_attempt_at > ?
"""

# Requests whose job ended while they were batched (superseded, cancelled, failed): withdrawn, never answered to a
# job; the batches they belong to, to cancel those left with nothing pending.
WITHDRAW_REQUESTS_OF_ENDED_JOBS = f"""
UPDATE batch_requests SET state = 'withdrawn'
 WHERE state = 'pending'
   AND job_id IN (SELECT id FROM jobs WHERE state IN ({_TERMINAL}))
RETURNING batch_id
"""

PENDING_REQUESTS_OF_BATCH = "SELECT COUNT(*) FROM batch_requests WHERE batch_id = ? AND state = 'pending'"


def delete_pruned_batch_requests(n: int) -> str:
    return f"DELETE FROM batch_requests WHERE job_id IN ({', '.join('?' * n)})"
