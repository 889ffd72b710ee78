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
_PREFIXES = (
    ("skipped: ", CancelReason.SKIPPED),
    ("covered: ", CancelReason.COVERED),
    ("refused: ", CancelReason.REFUSED),
)


def cancel_reason(outcome: str) -> CancelReason:
    """The reason a cancelled job's outcome text gives."""
    if outcome in _ENDINGS:
        return _ENDINGS[outcome]
    for prefix, reason in _PREFIXES:
        if outcome.startswith(prefix):
            return reason
    return CancelReason.OTHER
