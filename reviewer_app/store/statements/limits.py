"""The counts admission's guards read (core.admission.guard_refusal): a day's spent jobs of an author, an asker's
refusals, a requester's requests, a thread's answers."""

from __future__ import annotations

from reviewer_app.store.statements.dialects import Dialects, numbered

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

__all__ = ["SPENT_JOB", "AUTHOR_SPENT_SINCE", "REFUSALS_OF_ASKER_SINCE", "REQUESTS_BY_SINCE", "THREAD_REPLIES_SINCE"]
