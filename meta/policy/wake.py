"""Wake: the next moment the passing of time alone changes how the policy sees a waiting task.

A task turns aged at ``submit_time + max_wait_s``, urgent when its deadline's slack falls to
``deadline_urgency_s`` (ordering.py) and late once the deadline passed; each may move it in the
order with nothing else changing. The daemon rests (reuses its last pass) while nothing it reads
changed, but never past this moment.
"""

from __future__ import annotations

from collections.abc import Iterable

from meta.policy.config import SchedulerConfig
from meta.policy.snapshot import PendingTask


def next_wake(pending: Iterable[PendingTask], now: float, config: SchedulerConfig) -> float | None:
    """next_wake is the earliest time after ``now`` at which a task turns aged, urgent or late, or None."""
    soonest: float | None = None
    for task in pending:
        for moment in _turning_points(task, config):
            if moment > now and (soonest is None or moment < soonest):
                soonest = moment
    return soonest


def _turning_points(task: PendingTask, config: SchedulerConfig) -> tuple[float, ...]:
    """_turning_points are the moments a task turns aged and, with a deadline, urgent and then late."""
    aged = task.submit_time + config.max_wait_s
    if task.deadline is None:
        return (aged,)
    return aged, task.deadline - task.runtime_estimate_s - config.deadline_urgency_s, task.deadline
