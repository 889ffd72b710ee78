"""The write pacer's choice of the next write ages (issue #38, point 6): low priority still moves under a steady
stream of higher-priority writes, and the order is otherwise by priority, then arrival. Pure: no loop, no clock."""

from __future__ import annotations

import itertools

from reviewer_app.github.pacing import AGING_TURNS, Waiting, WritePriority, next_up


def simulate(turns: int, stream: WritePriority, backlog: int) -> list[WritePriority]:
    """``turns`` grants on one lane where a write of ``stream`` priority is always waiting (a new one arrives as each
    is sent) and ``backlog`` bulk writes (reactions, thread replies) wait from the start. The priorities granted."""
    order = itertools.count()
    waiting = [Waiting(int(WritePriority.BULK), next(order), 0) for _ in range(backlog)]
    waiting.append(Waiting(int(stream), next(order), 0))
    granted: list[WritePriority] = []
    last_served: dict[int, int] = {}
    for grants in range(turns):
        w = waiting.pop(next_up(waiting, grants, last_served))
        last_served[w.priority] = grants + 1
        granted.append(WritePriority(w.priority))
        if w.priority == stream:
            waiting.append(Waiting(int(stream), next(order), grants + 1))
    return granted


def test_bulk_writes_get_turns_under_sustained_check_run_and_answer_writes() -> None:
    granted = simulate(40, WritePriority.NORMAL, backlog=10)
    bulk = granted.count(WritePriority.BULK)
    # Before: 0 turns in 40. Now a bulk write moves at least once every AGING_TURNS + 1 turns...
    assert bulk >= 40 // (AGING_TURNS + 1)
    gaps = [len(list(g)) for k, g in itertools.groupby(granted) if k == WritePriority.NORMAL]
    assert max(gaps) <= AGING_TURNS
    # ...and the backlog never takes two turns in a row from the stream, which keeps most of them.
    runs = [len(list(g)) for k, g in itertools.groupby(granted) if k == WritePriority.BULK]
    assert max(runs) == 1 and granted.count(WritePriority.NORMAL) > 3 * bulk


def test_bulk_writes_move_even_under_a_stream_of_reviews() -> None:
    assert simulate(40, WritePriority.PUBLISH, backlog=10).count(WritePriority.BULK) > 0


def test_a_fresh_higher_priority_write_goes_first_then_arrival_order() -> None:
    waiting = [Waiting(2, 0, 0), Waiting(1, 1, 0), Waiting(0, 2, 0), Waiting(0, 3, 0)]
    assert next_up(waiting, 0, {}) == 2
    assert next_up([Waiting(1, 5, 0), Waiting(1, 4, 0)], 0, {}) == 1


def test_a_write_passed_over_moves_up_one_step_per_aging_turns() -> None:
    old_bulk = Waiting(2, 0, 0)
    fresh_normal = Waiting(1, 9, AGING_TURNS - 1)
    assert next_up([old_bulk, fresh_normal], AGING_TURNS - 1, {}) == 1  # passed over 3 times: still bulk
    fresh_normal = Waiting(1, 9, AGING_TURNS)
    assert next_up([old_bulk, fresh_normal], AGING_TURNS, {}) == 0  # passed over 4 times: normal, and older
    # A bulk write had a turn at grant 3: the others of its priority count from there.
    assert next_up([old_bulk, fresh_normal], AGING_TURNS, {2: 3}) == 1
