"""Job states and their legal transitions, as one table (see docs/architecture.md)."""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SUPERSEDED = "superseded"
    CANCELLED = "cancelled"


class JobEvent(StrEnum):
    CLAIM = "claim"  # dispatcher takes the job under a lease
    SUCCEED = "succeed"  # review published, or found already published
    RETRY = "retry"  # transient failure: back to the queue with a later next_attempt_at
    DEFER = "defer"  # rate limited or shut down: back to the queue without burning an attempt
    FAIL = "fail"  # permanent error or attempts exhausted
    EXPIRE = "expire"  # rescuer: the lease ran out while running
    SUPERSEDE = "supersede"  # a newer head of the same PR
    CANCEL = "cancel"  # PR closed, app uninstalled, operator
    RETRY_BY_OPERATOR = "retry_by_operator"  # admin `jobs retry`


PENDING = frozenset({JobState.QUEUED, JobState.RUNNING})
TERMINAL = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.SUPERSEDED, JobState.CANCELLED})

TRANSITIONS: dict[tuple[JobState, JobEvent], JobState] = {
    (JobState.QUEUED, JobEvent.CLAIM): JobState.RUNNING,
    (JobState.QUEUED, JobEvent.SUPERSEDE): JobState.SUPERSEDED,
    (JobState.QUEUED, JobEvent.CANCEL): JobState.CANCELLED,
    (JobState.RUNNING, JobEvent.SUCCEED): JobState.SUCCEEDED,
    (JobState.RUNNING, JobEvent.RETRY): JobState.QUEUED,
    (JobState.RUNNING, JobEvent.DEFER): JobState.QUEUED,
    (JobState.RUNNING, JobEvent.FAIL): JobState.FAILED,
    # An expired lease goes back to the queue (or to failed when no attempt is left: see rescuer).
    (JobState.RUNNING, JobEvent.EXPIRE): JobState.QUEUED,
    (JobState.RUNNING, JobEvent.SUPERSEDE): JobState.SUPERSEDED,
    (JobState.RUNNING, JobEvent.CANCEL): JobState.CANCELLED,
    (JobState.FAILED, JobEvent.RETRY_BY_OPERATOR): JobState.QUEUED,
    (JobState.CANCELLED, JobEvent.RETRY_BY_OPERATOR): JobState.QUEUED,
}


class IllegalTransition(ValueError):
    def __init__(self, state: JobState, event: JobEvent) -> None:
        super().__init__(f"a job in state {state.value!r} cannot {event.value!r}")
        self.state = state
        self.event = event


def transition(state: JobState, event: JobEvent) -> JobState:
    """The state after ``event``; raises IllegalTransition when the table has no such row."""
    try:
        return TRANSITIONS[(JobState(state), JobEvent(event))]
    except KeyError:
        raise IllegalTransition(JobState(state), JobEvent(event)) from None


def sources_of(event: JobEvent) -> frozenset[JobState]:
    """States from which ``event`` is legal: the store uses this to build each guarded UPDATE."""
    return frozenset(s for (s, e) in TRANSITIONS if e == event)
