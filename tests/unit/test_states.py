"""State machines: the transition tables, their invariants and the derived job state."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

import pytest

from meta.model.states import (
    ATTEMPT_TRANSITIONS,
    LIVE_ATTEMPT_STATES,
    TASK_TRANSITIONS,
    TERMINAL_ATTEMPT_STATES,
    TERMINAL_TASK_STATES,
    AttemptState,
    IllegalTransition,
    JobState,
    TaskState,
    attempt_can,
    derive_job_state,
    task_can,
    task_state_for_attempt,
)

A, T, J = AttemptState, TaskState, JobState
LIVE_TASK_STATES = frozenset(TaskState) - TERMINAL_TASK_STATES


def reachable(table: Mapping[StrEnum, frozenset], start: StrEnum) -> set:
    """reachable is every state reachable from ``start`` in one or more moves."""
    seen: set = set()
    frontier = [start]
    while frontier:
        for nxt in table[frontier.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    return seen


# --- the tables are complete and well-formed --------------------------------------------------


@pytest.mark.parametrize(
    ("table", "enum"), [(ATTEMPT_TRANSITIONS, AttemptState), (TASK_TRANSITIONS, TaskState)]
)
def test_every_state_has_a_row(table: Mapping, enum: type[StrEnum]) -> None:
    assert set(table) == set(enum)
    for source, targets in table.items():
        assert isinstance(targets, frozenset), source
        assert targets <= set(enum), source


@pytest.mark.parametrize(("table"), [ATTEMPT_TRANSITIONS, TASK_TRANSITIONS])
def test_no_state_moves_to_itself(table: Mapping) -> None:
    for source, targets in table.items():
        assert source not in targets, source


def test_state_values_are_lowercase_names() -> None:
    for enum in (AttemptState, TaskState, JobState):
        for member in enum:
            assert member.value == member.name.lower()


# --- attempts ---------------------------------------------------------------------------------


@pytest.mark.parametrize("state", sorted(TERMINAL_ATTEMPT_STATES))
def test_terminal_attempt_states_have_no_exits(state: AttemptState) -> None:
    assert ATTEMPT_TRANSITIONS[state] == frozenset()
    for target in AttemptState:
        assert not attempt_can(state, target)


def test_live_attempt_states_are_exactly_those_with_exits() -> None:
    with_exits = {state for state, targets in ATTEMPT_TRANSITIONS.items() if targets}
    assert LIVE_ATTEMPT_STATES == with_exits
    assert LIVE_ATTEMPT_STATES == {A.CREATED, A.LAUNCHING, A.LAUNCH_UNKNOWN, A.RUNNING, A.STOPPING}
    assert LIVE_ATTEMPT_STATES.isdisjoint(TERMINAL_ATTEMPT_STATES)
    assert LIVE_ATTEMPT_STATES | TERMINAL_ATTEMPT_STATES == set(AttemptState)
    assert TERMINAL_ATTEMPT_STATES == {A.SUCCEEDED, A.FAILED, A.PREEMPTED, A.LOST, A.CANCELLED}


@pytest.mark.parametrize("state", sorted(LIVE_ATTEMPT_STATES))
def test_every_live_attempt_state_can_reach_a_terminal_one(state: AttemptState) -> None:
    assert reachable(ATTEMPT_TRANSITIONS, state) & TERMINAL_ATTEMPT_STATES
    # and it can get there without ever running (cancelled) or by losing it (lost)
    assert A.CANCELLED in reachable(ATTEMPT_TRANSITIONS, state)


@pytest.mark.parametrize("state", sorted(LIVE_ATTEMPT_STATES))
def test_every_live_attempt_can_be_cancelled_or_lost_directly(state: AttemptState) -> None:
    # Slurm may forget any attempt; a user may cancel any attempt (via stopping once it was sent)
    assert attempt_can(state, A.LOST)
    assert attempt_can(state, A.CANCELLED)


def test_every_attempt_state_is_reachable_from_created() -> None:
    assert reachable(ATTEMPT_TRANSITIONS, A.CREATED) == set(AttemptState) - {A.CREATED}


@pytest.mark.parametrize(
    ("current", "target", "allowed"),
    [
        (A.CREATED, A.LAUNCHING, True),
        (A.CREATED, A.RUNNING, False),  # never runs without being launched
        (A.CREATED, A.SUCCEEDED, False),
        (A.LAUNCHING, A.RUNNING, True),
        (A.LAUNCHING, A.LAUNCH_UNKNOWN, True),
        (A.LAUNCH_UNKNOWN, A.LAUNCHING, True),  # relaunch after a lookup found nothing
        (A.LAUNCH_UNKNOWN, A.RUNNING, True),
        (A.RUNNING, A.LAUNCHING, False),
        (A.RUNNING, A.STOPPING, True),
        (A.RUNNING, A.CREATED, False),
        (A.STOPPING, A.RUNNING, False),  # a stop is never undone
        (A.STOPPING, A.PREEMPTED, True),
        (A.SUCCEEDED, A.RUNNING, False),
        (A.FAILED, A.LAUNCHING, False),  # a retry is a new attempt, never a revived one
        (A.CANCELLED, A.CREATED, False),
    ],
)
def test_attempt_can(current: AttemptState, target: AttemptState, allowed: bool) -> None:
    assert attempt_can(current, target) is allowed
    assert (target in ATTEMPT_TRANSITIONS[current]) is allowed


# --- tasks ------------------------------------------------------------------------------------


def test_task_terminal_states() -> None:
    assert TERMINAL_TASK_STATES == {T.SUCCEEDED, T.FAILED, T.CANCELLED}
    assert LIVE_TASK_STATES == {T.PENDING, T.SCHEDULED, T.RUNNING}


def test_succeeded_task_has_no_exits() -> None:
    assert TASK_TRANSITIONS[T.SUCCEEDED] == frozenset()
    for target in TaskState:
        assert not task_can(T.SUCCEEDED, target)


@pytest.mark.parametrize("state", [T.FAILED, T.CANCELLED])
def test_failed_and_cancelled_tasks_only_leave_by_retry(state: TaskState) -> None:
    # the only exit of an ended task is the user's retry, which queues it again
    assert TASK_TRANSITIONS[state] == frozenset({T.PENDING})


@pytest.mark.parametrize("state", sorted(LIVE_TASK_STATES))
def test_every_live_task_state_can_reach_a_terminal_one(state: TaskState) -> None:
    assert reachable(TASK_TRANSITIONS, state) >= TERMINAL_TASK_STATES
    assert task_can(state, T.CANCELLED)  # cancel works from every live state


def test_every_task_state_is_reachable_from_pending() -> None:
    assert reachable(TASK_TRANSITIONS, T.PENDING) == set(TaskState)


@pytest.mark.parametrize(
    ("current", "target", "allowed"),
    [
        (T.PENDING, T.SCHEDULED, True),
        (T.PENDING, T.RUNNING, False),  # only through an attempt
        (T.PENDING, T.SUCCEEDED, False),
        (T.PENDING, T.FAILED, True),  # quarantined before any attempt: its own data cannot run
        (T.SCHEDULED, T.RUNNING, True),
        (T.SCHEDULED, T.PENDING, True),
        (T.RUNNING, T.SCHEDULED, False),
        (T.RUNNING, T.PENDING, True),  # preempted or lost, retried
        (T.FAILED, T.PENDING, True),
        (T.FAILED, T.RUNNING, False),
        (T.CANCELLED, T.SCHEDULED, False),
        (T.SUCCEEDED, T.PENDING, False),  # success is final: not even a retry
    ],
)
def test_task_can(current: TaskState, target: TaskState, allowed: bool) -> None:
    assert task_can(current, target) is allowed


# --- attempts drive tasks ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempt", "task"),
    [
        (A.CREATED, T.SCHEDULED),
        (A.LAUNCHING, T.SCHEDULED),
        (A.LAUNCH_UNKNOWN, T.SCHEDULED),
        (A.RUNNING, T.RUNNING),
        (A.STOPPING, T.RUNNING),
    ]
    + [(state, None) for state in sorted(TERMINAL_ATTEMPT_STATES)],
)
def test_task_state_for_attempt(attempt: AttemptState, task: TaskState | None) -> None:
    assert task_state_for_attempt(attempt) == task


# how a task may follow an attempt that ends in each terminal state (lifecycle._task_follows)
_TASK_AFTER_END = {
    A.SUCCEEDED: {T.SUCCEEDED},
    A.CANCELLED: {T.CANCELLED},
    A.FAILED: {T.FAILED, T.PENDING},
    A.PREEMPTED: {T.FAILED, T.PENDING},
    A.LOST: {T.FAILED, T.PENDING},
}


@pytest.mark.parametrize(
    ("source", "target"),
    sorted((source, target) for source, targets in ATTEMPT_TRANSITIONS.items() for target in targets),
)
def test_every_attempt_transition_is_followable_by_its_task(
    source: AttemptState, target: AttemptState
) -> None:
    task_before = task_state_for_attempt(source)
    assert task_before is not None  # sources are live
    implied = task_state_for_attempt(target)
    if implied is not None:
        assert implied == task_before or task_can(task_before, implied)
        return
    for task_after in _TASK_AFTER_END[target]:
        assert task_can(task_before, task_after), f"task {task_before} -> {task_after}"


def test_illegal_transition_message() -> None:
    error = IllegalTransition("task", "t-1", T.SUCCEEDED, T.PENDING)
    assert "t-1" in str(error) and "succeeded -> pending" in str(error)
    assert (error.entity, error.current, error.target) == ("task", T.SUCCEEDED, T.PENDING)


# --- derive_job_state -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tasks", "cancel_requested", "job"),
    [
        ([], False, J.PENDING),
        ([T.PENDING], False, J.PENDING),
        ([T.PENDING, T.PENDING], False, J.PENDING),
        ([T.SUCCEEDED], False, J.SUCCEEDED),
        ([T.SUCCEEDED] * 4, False, J.SUCCEEDED),
        ([T.SUCCEEDED, T.RUNNING], False, J.RUNNING),
        ([T.PENDING, T.RUNNING], False, J.RUNNING),
        ([T.SCHEDULED], False, J.RUNNING),
        ([T.SCHEDULED, T.PENDING, T.SUCCEEDED], False, J.RUNNING),
        ([T.FAILED, T.RUNNING], False, J.RUNNING),  # still working on the rest
        ([T.PENDING, T.SUCCEEDED], False, J.PENDING),  # e.g. a partition waiting for its retry
        ([T.PENDING, T.FAILED], False, J.PENDING),
        ([T.FAILED], False, J.FAILED),
        ([T.SUCCEEDED, T.FAILED], False, J.FAILED),
        ([T.SUCCEEDED, T.FAILED, T.CANCELLED], False, J.FAILED),
        ([T.CANCELLED], False, J.CANCELLED),
        ([T.SUCCEEDED, T.CANCELLED], False, J.CANCELLED),
        # cancel requested: live tasks → cancelling, none live → cancelled
        ([T.RUNNING], True, J.CANCELLING),
        ([T.SCHEDULED, T.CANCELLED], True, J.CANCELLING),
        ([T.CANCELLED, T.CANCELLED], True, J.CANCELLED),
        ([T.PENDING], True, J.CANCELLED),  # pending tasks are not live: nothing to wait for
        ([T.SUCCEEDED, T.CANCELLED], True, J.CANCELLED),
        ([T.FAILED, T.CANCELLED], True, J.CANCELLED),
    ],
)
def test_derive_job_state(tasks: list[TaskState], cancel_requested: bool, job: JobState) -> None:
    assert derive_job_state(tasks, cancel_requested) == job
    assert derive_job_state(reversed(tasks), cancel_requested) == job  # order does not matter
    assert derive_job_state(iter(tasks), cancel_requested) == job  # any iterable, consumed once


def test_cancel_requested_after_success_keeps_succeeded() -> None:
    assert derive_job_state([T.SUCCEEDED, T.SUCCEEDED], cancel_requested=True) == J.SUCCEEDED


def test_derive_job_state_default_is_no_cancel() -> None:
    assert derive_job_state([T.RUNNING]) == J.RUNNING
