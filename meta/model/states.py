"""State machines for tasks and attempts: explicit transition tables, nothing implicit.

A job's state is derived from its tasks (``derive_job_state``). A task is the durable unit of
work; an attempt is one try at running it on Slurm. Every transition is applied with a stimulus
id by ``meta.store.transitions``; this module only says which moves are legal.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class AttemptState(StrEnum):
    """AttemptState is where one try of a task stands."""

    CREATED = "created"  # committed by the cycle, capacity reserved, not yet sent to Slurm
    LAUNCHING = "launching"  # sbatch sent (or about to be)
    LAUNCH_UNKNOWN = "launch_unknown"  # sbatch timed out: Slurm may or may not have the job
    RUNNING = "running"
    STOPPING = "stopping"  # cancel or preemption requested, Slurm not yet done
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    PREEMPTED = "preempted"
    LOST = "lost"  # Slurm has no record past the grace period
    CANCELLED = "cancelled"


class TaskState(StrEnum):
    """TaskState is where one schedulable unit (gang, partition, evaluation) stands."""

    PENDING = "pending"  # waiting for the scheduler
    SCHEDULED = "scheduled"  # has a live attempt that is not yet running
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class JobState(StrEnum):
    """JobState is derived from the job's tasks, never stored as a source of truth."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    CANCELLING = "cancelling"


A = AttemptState
ATTEMPT_TRANSITIONS: dict[AttemptState, frozenset[AttemptState]] = {
    # a victim evicted before it was ever sent to Slurm ends preempted at once
    A.CREATED: frozenset({A.LAUNCHING, A.CANCELLED, A.LOST, A.PREEMPTED}),
    A.LAUNCHING: frozenset(
        {A.RUNNING, A.LAUNCH_UNKNOWN, A.FAILED, A.STOPPING, A.SUCCEEDED, A.CANCELLED, A.PREEMPTED, A.LOST}
    ),
    # an unknown launch is looked up: found (running or already ended), or absent (relaunch the
    # same attempt, or give it up as lost), or stopped while we looked
    A.LAUNCH_UNKNOWN: frozenset(
        {A.LAUNCHING, A.RUNNING, A.SUCCEEDED, A.FAILED, A.STOPPING, A.CANCELLED, A.PREEMPTED, A.LOST}
    ),
    A.RUNNING: frozenset({A.SUCCEEDED, A.FAILED, A.STOPPING, A.PREEMPTED, A.LOST, A.CANCELLED}),
    A.STOPPING: frozenset({A.CANCELLED, A.PREEMPTED, A.SUCCEEDED, A.FAILED, A.LOST}),
    A.SUCCEEDED: frozenset(),
    A.FAILED: frozenset(),
    A.PREEMPTED: frozenset(),
    A.LOST: frozenset(),
    A.CANCELLED: frozenset(),
}

LIVE_ATTEMPT_STATES: frozenset[AttemptState] = frozenset(
    {A.CREATED, A.LAUNCHING, A.LAUNCH_UNKNOWN, A.RUNNING, A.STOPPING}
)
TERMINAL_ATTEMPT_STATES: frozenset[AttemptState] = frozenset(AttemptState) - LIVE_ATTEMPT_STATES

T = TaskState
TASK_TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    # pending -> failed: a task whose spec cannot be run is quarantined before any attempt
    T.PENDING: frozenset({T.SCHEDULED, T.CANCELLED, T.FAILED}),
    # an attempt that ends in preemption or loss sends the task back to pending when it retries
    T.SCHEDULED: frozenset({T.RUNNING, T.PENDING, T.SUCCEEDED, T.FAILED, T.CANCELLED}),
    T.RUNNING: frozenset({T.SUCCEEDED, T.FAILED, T.CANCELLED, T.PENDING}),
    T.FAILED: frozenset({T.PENDING}),  # retry
    T.CANCELLED: frozenset({T.PENDING}),  # retry
    T.SUCCEEDED: frozenset(),
}
TERMINAL_TASK_STATES: frozenset[TaskState] = frozenset({T.SUCCEEDED, T.FAILED, T.CANCELLED})


class IllegalTransition(Exception):
    """IllegalTransition is raised for a move the transition table does not allow."""

    def __init__(self, entity: str, entity_id: str, current: str, target: str):
        super().__init__(f"{entity} {entity_id}: illegal transition {current} -> {target}")
        self.entity, self.entity_id, self.current, self.target = entity, entity_id, current, target


def attempt_can(current: AttemptState, target: AttemptState) -> bool:
    """attempt_can tells whether an attempt may move from ``current`` to ``target``."""
    return target in ATTEMPT_TRANSITIONS[current]


def task_can(current: TaskState, target: TaskState) -> bool:
    """task_can tells whether a task may move from ``current`` to ``target``."""
    return target in TASK_TRANSITIONS[current]


def task_state_for_attempt(state: AttemptState) -> TaskState | None:
    """task_state_for_attempt is the task state a live attempt implies (None for terminal ones)."""
    if state == A.RUNNING or state == A.STOPPING:
        return T.RUNNING
    if state in LIVE_ATTEMPT_STATES:
        return T.SCHEDULED
    return None


def derive_job_state(task_states: Iterable[TaskState], cancel_requested: bool = False) -> JobState:
    """derive_job_state folds task states into the job's state."""
    states = list(task_states)
    if not states:
        return JobState.PENDING
    live = any(s in {T.SCHEDULED, T.RUNNING} for s in states)
    if all(s == T.SUCCEEDED for s in states):
        return JobState.SUCCEEDED  # a finished job stays finished, even if cancel came late
    if cancel_requested:
        return JobState.CANCELLING if live else JobState.CANCELLED
    if live:
        return JobState.RUNNING
    if T.PENDING in states:
        return JobState.PENDING
    if T.FAILED in states:
        return JobState.FAILED
    return JobState.CANCELLED
