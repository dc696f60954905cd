"""Applying state transitions durably: stimulus ids, compare-and-swap, and the transition log.

Every move of a task or attempt goes through ``transition_task`` / ``transition_attempt``:
1. if the same stimulus was already applied to the entity, return the recorded result (no-op);
2. check the move against the transition table (``IllegalTransition`` otherwise);
3. ``UPDATE ... WHERE id = :id AND state = :expected AND version = :v`` — losing the race raises
   ``ConcurrentModification`` so the caller retries the whole unit of work;
4. append a line to the transition log in the same transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from meta.durations import utcnow
from meta.errors import ConcurrentModification, NotFound, StaleFencingToken
from meta.states import (
    AttemptState,
    IllegalTransition,
    TaskState,
    attempt_can,
    task_can,
)
from meta.store.models import Attempt, Task, Transition


@dataclass(frozen=True)
class TransitionResult:
    """TransitionResult says where the entity went and whether this call did the move."""

    entity_id: str
    from_state: str
    to_state: str
    applied: bool


def recorded(session: Session, entity: str, entity_id: str, stimulus_id: str) -> Transition | None:
    """recorded returns the log line of a stimulus already applied to an entity, if any."""
    return session.scalar(
        select(Transition).where(
            Transition.entity == entity,
            Transition.entity_id == entity_id,
            Transition.stimulus_id == stimulus_id,
        )
    )


def _log(
    session: Session,
    entity: str,
    entity_id: str,
    job_id: str,
    stimulus_id: str,
    from_state: str,
    to_state: str,
    reason: str,
    actor: str,
    at: datetime,
) -> None:
    session.add(
        Transition(
            entity=entity,
            entity_id=entity_id,
            job_id=job_id,
            stimulus_id=stimulus_id,
            from_state=from_state,
            to_state=to_state,
            reason=reason,
            actor=actor,
            at=at,
        )
    )


def transition_attempt(
    session: Session,
    attempt_id: str,
    target: AttemptState,
    stimulus_id: str,
    *,
    reason: str = "",
    actor: str = "",
    fencing_token: int | None = None,
    expected: AttemptState | None = None,
    values: dict[str, Any] | None = None,
) -> TransitionResult:
    """transition_attempt moves an attempt to ``target`` once per stimulus, fenced and CAS-guarded."""
    prior = recorded(session, "attempt", attempt_id, stimulus_id)
    if prior is not None:
        return TransitionResult(attempt_id, prior.from_state, prior.to_state, applied=False)
    attempt = session.get(Attempt, attempt_id, populate_existing=True)
    if attempt is None:
        raise NotFound(f"attempt {attempt_id} not found")
    if fencing_token is not None and fencing_token != attempt.fencing_token:
        raise StaleFencingToken(
            f"attempt {attempt_id}: fencing token {fencing_token} is stale (current {attempt.fencing_token})"
        )
    current = AttemptState(attempt.state)
    if expected is not None and current != expected:
        raise ConcurrentModification(f"attempt {attempt_id} is {current}, expected {expected}")
    if not attempt_can(current, target):
        raise IllegalTransition("attempt", attempt_id, current, target)
    now = utcnow()
    changes = {"state": target.value, "version": attempt.version + 1, "updated_at": now, **(values or {})}
    result = session.execute(
        update(Attempt)
        .where(Attempt.id == attempt_id, Attempt.state == current.value, Attempt.version == attempt.version)
        .values(**changes)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        raise ConcurrentModification(f"attempt {attempt_id} changed underneath (was {current})")
    _log(session, "attempt", attempt_id, attempt.job_id, stimulus_id, current, target, reason, actor, now)
    session.flush()
    session.expire(attempt)
    return TransitionResult(attempt_id, current.value, target.value, applied=True)


def transition_task(
    session: Session,
    task_id: str,
    target: TaskState,
    stimulus_id: str,
    *,
    reason: str = "",
    actor: str = "",
    values: dict[str, Any] | None = None,
) -> TransitionResult:
    """transition_task moves a task to ``target`` once per stimulus, CAS-guarded and logged."""
    prior = recorded(session, "task", task_id, stimulus_id)
    if prior is not None:
        return TransitionResult(task_id, prior.from_state, prior.to_state, applied=False)
    task = session.get(Task, task_id, populate_existing=True)
    if task is None:
        raise NotFound(f"task {task_id} not found")
    current = TaskState(task.state)
    if current == target:
        # already there by another stimulus (e.g. a duplicate path): nothing to move, nothing to log
        return TransitionResult(task_id, current.value, target.value, applied=False)
    if not task_can(current, target):
        raise IllegalTransition("task", task_id, current, target)
    now = utcnow()
    changes = {
        "state": target.value,
        "version": task.version + 1,
        "updated_at": now,
        "reason": reason,
        **(values or {}),
    }
    result = session.execute(
        update(Task)
        .where(Task.id == task_id, Task.state == current.value, Task.version == task.version)
        .values(**changes)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        raise ConcurrentModification(f"task {task_id} changed underneath (was {current})")
    _log(session, "task", task_id, task.job_id, stimulus_id, current, target, reason, actor, now)
    session.flush()
    session.expire(task)
    return TransitionResult(task_id, current.value, target.value, applied=True)
