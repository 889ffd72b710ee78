"""The job state machine: one row per (state, event) pair."""

from __future__ import annotations

import itertools

import pytest

from reviewer_app.core.states import TERMINAL, TRANSITIONS, IllegalTransition, JobEvent, JobState, transition

Q, R, S, F, X, C = (
    JobState.QUEUED,
    JobState.RUNNING,
    JobState.SUCCEEDED,
    JobState.FAILED,
    JobState.SUPERSEDED,
    JobState.CANCELLED,
)
E = JobEvent

EXPECTED = {
    (Q, E.CLAIM): R,
    (Q, E.SUPERSEDE): X,
    (Q, E.CANCEL): C,
    (R, E.SUCCEED): S,
    (R, E.RETRY): Q,
    (R, E.DEFER): Q,
    (R, E.FAIL): F,
    (R, E.EXPIRE): Q,
    (R, E.SUPERSEDE): X,
    (R, E.CANCEL): C,
    (F, E.RETRY_BY_OPERATOR): Q,
    (C, E.RETRY_BY_OPERATOR): Q,
}


@pytest.mark.parametrize("state,event", list(itertools.product(JobState, JobEvent)))
def test_every_pair(state: JobState, event: JobEvent) -> None:
    if (state, event) in EXPECTED:
        assert transition(state, event) == EXPECTED[(state, event)]
    else:
        with pytest.raises(IllegalTransition):
            transition(state, event)


def test_table_is_exactly_the_expected_one() -> None:
    assert TRANSITIONS == EXPECTED


def test_succeeded_and_superseded_are_final() -> None:
    for state in (S, X):
        assert not [e for (s, e) in TRANSITIONS if s == state]
    assert TERMINAL == {S, F, X, C}
