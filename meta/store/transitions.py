"""Applying state transitions durably: stimulus ids, compare-and-swap, and the transition log.

Every move of a task or attempt goes through ``transition_task`` / ``transition_attempt``:
1. if the same stimulus was already applied to the entity, return the recorded result (no-op);
2. check the move against the transition table (``IllegalTransition`` otherwise);
3. ``UPDATE ... WHERE id = :id AND state = :expected AND version = :v`` — losing the race raises
   ``ConcurrentModification`` so the caller retries the whole unit of work;
4. append a line to the transition log in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from meta.model.durations import utcnow
from meta.model.errors import ConcurrentModification, NotFound, StaleFencingToken
from meta.model.states import AttemptState, IllegalTransition, TaskState, attempt_can, task_can
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


@dataclass(frozen=True)
class _Move:
    """_Move is one requested transition of one row, with everything the log line needs."""

    entity: str
    model: type[Attempt] | type[Task]
    row_id: str
    target: str
    stimulus_id: str
    reason: str
    actor: str
    values: dict[str, Any]


def _apply(
    session: Session,
    move: _Move,
    allowed: Callable[[str, str], bool],
    check: Callable[[Any], None] | None = None,
    same_state_is_noop: bool = False,
) -> TransitionResult:
    """_apply runs the four steps of the module docstring for one row."""
    prior = recorded(session, move.entity, move.row_id, move.stimulus_id)
    if prior is not None:
        return TransitionResult(move.row_id, prior.from_state, prior.to_state, applied=False)
    row = session.get(move.model, move.row_id, populate_existing=True)
    if row is None:
        raise NotFound(f"{move.entity} {move.row_id} not found")
    if check is not None:
        check(row)
    current = row.state
    if same_state_is_noop and current == move.target:
        return TransitionResult(move.row_id, current, move.target, applied=False)
    if not allowed(current, move.target):
        raise IllegalTransition(move.entity, move.row_id, current, move.target)
    now = utcnow()
    model = move.model
    result = session.execute(
        update(model)
        .where(model.id == move.row_id, model.state == current, model.version == row.version)
        .values(state=move.target, version=row.version + 1, updated_at=now, **move.values)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        raise ConcurrentModification(f"{move.entity} {move.row_id} changed underneath (was {current})")
    session.add(
        Transition(
            entity=move.entity,
            entity_id=move.row_id,
            job_id=row.job_id,
            stimulus_id=move.stimulus_id,
            from_state=current,
            to_state=move.target,
            reason=move.reason,
            actor=move.actor,
            at=now,
        )
    )
    session.flush()
    session.expire(row)
    return TransitionResult(move.row_id, current, move.target, applied=True)


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

    def check(attempt: Attempt) -> None:
        if fencing_token is not None and fencing_token != attempt.fencing_token:
            raise StaleFencingToken(
                f"attempt {attempt_id}: fencing token {fencing_token} is stale (current {attempt.fencing_token})"
            )
        if expected is not None and attempt.state != expected:
            raise ConcurrentModification(f"attempt {attempt_id} is {attempt.state}, expected {expected}")

    move = _Move("attempt", Attempt, attempt_id, target.value, stimulus_id, reason, actor, dict(values or {}))
    return _apply(session, move, lambda a, b: attempt_can(AttemptState(a), AttemptState(b)), check)


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
    """transition_task moves a task to ``target`` once per stimulus, CAS-guarded and logged.

    A task already in ``target`` (moved there by another path) is left alone: nothing to log.
    """
    move = _Move("task", Task, task_id, target.value, stimulus_id, reason, actor, {"reason": reason, **(values or {})})
    return _apply(session, move, lambda a, b: task_can(TaskState(a), TaskState(b)), same_state_is_noop=True)
