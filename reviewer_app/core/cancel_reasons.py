"""Why a job was cancelled: a closed set of reasons, stored in its own column next to the outcome text."""

from __future__ import annotations

from enum import StrEnum

from reviewer_app.core.admission import NO_ACCESS, PR_CLOSED, PR_CLOSED_AT_WORKER, REPO_REMOVED, SUSPENDED, UNINSTALLED


class CancelReason(StrEnum):
    PR_CLOSED = "pr_closed"  # the pull request closed (at admission or found closed by the worker)
    UNINSTALLED = "uninstalled"
    SUSPENDED = "suspended"
    REPO_REMOVED = "repo_removed"
    NO_ACCESS = "no_access"  # GitHub refused the app's access to the installation
    SKIPPED = "skipped"  # the job had nothing to do ("skipped: ..."): paused, draft, not allowed, turned off
    COVERED = "covered"  # another review covers it ("covered: ...")
    REFUSED = "refused"  # a guard refused it ("refused: ..."): a budget or a rate limit
    OPERATOR = "operator"  # `reviewer-app jobs cancel`
    OTHER = "other"


# The episode endings of core.admission, each a reason of its own; the outcome prefixes, each a reason.
_ENDINGS = {
    PR_CLOSED: CancelReason.PR_CLOSED,
    PR_CLOSED_AT_WORKER: CancelReason.PR_CLOSED,
    UNINSTALLED: CancelReason.UNINSTALLED,
    SUSPENDED: CancelReason.SUSPENDED,
    REPO_REMOVED: CancelReason.REPO_REMOVED,
    NO_ACCESS: CancelReason.NO_ACCESS,
}
# The outcome prefix of an automatic job whose head an earlier job already reviewed (a draft reviewed with
# `drafts: true`, then marked ready): its check run, if it had one, completes as success, not as skipped.
COVERED_PREFIX = "covered: "
_PREFIXES = (
    ("skipped: ", CancelReason.SKIPPED),
    (COVERED_PREFIX, CancelReason.COVERED),
    ("refused: ", CancelReason.REFUSED),
)


# A job cancelled for one of these ended with its episode: history, not an answer for its head once the pull
# request (or the installation, or the repository) is back.
EPISODE_ENDED = frozenset(
    {
        CancelReason.PR_CLOSED,
        CancelReason.UNINSTALLED,
        CancelReason.SUSPENDED,
        CancelReason.REPO_REMOVED,
        CancelReason.NO_ACCESS,
    }
)


def cancel_reason(outcome: str) -> CancelReason:
    """The reason a cancelled job's outcome text gives: for the writers, which name the outcome in words (and for
    the migration that filled the column in for older rows). Readers read the column."""
    if outcome in _ENDINGS:
        return _ENDINGS[outcome]
    for prefix, reason in _PREFIXES:
        if outcome.startswith(prefix):
            return reason
    return CancelReason.OTHER


def ended_with_episode(reason: CancelReason | None) -> bool:
    """Whether a job cancelled for ``reason`` ended because its episode did (PR closed, app uninstalled or
    suspended, repository removed)."""
    return reason in EPISODE_ENDED


def explanation(outcome: str | None, reason: CancelReason) -> str:
    """A cancelled job's outcome for people, without the word its reason already says ("skipped: ", ...)."""
    prefix = next((p for p, r in _PREFIXES if r == reason), "")
    return (outcome or "").removeprefix(prefix)
