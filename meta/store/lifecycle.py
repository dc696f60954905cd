"""Task and attempt lifecycle: creating attempts and moving a task along with its attempt.

The attempt's state machine is driven by launches and by what Slurm reports; the task follows
in the same transaction: a live attempt makes the task scheduled or running, a terminal one
ends the task or — by the job's retry policy — sends it back to pending for a new attempt.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import case, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from meta.model.durations import utcnow
from meta.model.errors import JOB_FAULTS, ConcurrentModification, Conflict, NotFound, invalid_spec_reason
from meta.model.ids import new_uuid
from meta.model.kinds import FailureCategory
from meta.model.limits import MAX_BACKOFF_S
from meta.model.spec import AnySpec, spec_from_json
from meta.model.states import (
    LIVE_ATTEMPT_STATES,
    AttemptState,
    IllegalTransition,
    TaskState,
    attempt_can,
    task_can,
    task_state_for_attempt,
)
from meta.store import audit
from meta.store.chunks import among, chunked
from meta.store.models import Attempt, Job, JobSpecRow, Task, Transition
from meta.store.transitions import TransitionResult, transition_attempt, transition_task

DEFAULT_LEASE_S = 300.0
_LIVE = [state.value for state in LIVE_ATTEMPT_STATES]
_BULK_CHUNK = 1000  # tasks per bulk UPDATE (each brings two bound values to its CASE)

_CATEGORY_OF_END = {
    AttemptState.PREEMPTED: FailureCategory.PREEMPTED,
    AttemptState.LOST: FailureCategory.LOST,
    AttemptState.CANCELLED: FailureCategory.CANCELLED,
}


def job_spec(session: Session, job_id: str) -> AnySpec:
    """job_spec loads the immutable spec of a job."""
    row = session.get(JobSpecRow, job_id)
    if row is None:
        raise NotFound(f"job {job_id} has no spec")
    return spec_from_json(row.spec_json)


def stored_spec(session: Session, job_id: str) -> dict[str, Any]:
    """stored_spec is the spec as it was stored, unvalidated: a quarantined job can still be shown."""
    row = session.get(JobSpecRow, job_id)
    if row is None:
        raise NotFound(f"job {job_id} has no spec")
    return json.loads(row.spec_json)


def live_attempt(session: Session, task_id: str) -> Attempt | None:
    """live_attempt returns the task's live attempt (there is at most one), if any."""
    return session.scalar(
        select(Attempt).where(
            Attempt.task_id == task_id, Attempt.state.in_([s.value for s in LIVE_ATTEMPT_STATES])
        )
    )


def create_attempt(
    session: Session,
    task_id: str,
    stimulus_id: str,
    *,
    placement: list[dict[str, Any]] | None = None,
    lease_s: float = DEFAULT_LEASE_S,
    actor: str = "scheduler",
    reason: str = "placed",
) -> Attempt:
    """create_attempt starts a new attempt with the next fencing token; never beside a live one."""
    task = session.get(Task, task_id, populate_existing=True)
    if task is None:
        raise NotFound(f"task {task_id} not found")
    existing = live_attempt(session, task_id)
    if existing is not None:
        raise Conflict(f"task {task_id} already has live attempt {existing.number} ({existing.state})")
    token = task.fencing_counter + 1
    number = task.attempts_made + 1
    transition_task(
        session,
        task_id,
        TaskState.SCHEDULED,
        stimulus_id,
        reason=reason,
        actor=actor,
        values={"fencing_counter": token, "attempts_made": number, "not_before": None},
    )
    now = utcnow()
    attempt = Attempt(
        id=new_uuid(),
        task_id=task_id,
        job_id=task.job_id,
        number=number,
        state=AttemptState.CREATED.value,
        version=1,
        fencing_token=token,
        lease_expires_at=now + timedelta(seconds=lease_s),
        placement=placement or [],
        reason=reason,
        created_at=now,
        updated_at=now,
    )
    session.add(attempt)
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError as exc:  # the one-live-attempt index caught a concurrent creator
        raise ConcurrentModification(f"task {task_id} got another live attempt concurrently") from exc
    return attempt


@dataclass(frozen=True)
class NewAttempt:
    """NewAttempt is one placement to turn into an attempt: the task, its shares and why."""

    task_id: str
    placement: list[dict[str, Any]]
    reason: str


def create_attempts(
    session: Session,
    wanted: Sequence[NewAttempt],
    stimulus_id: str,
    *,
    lease_s: float = DEFAULT_LEASE_S,
    epoch: int = 0,
    actor: str = "scheduler",
) -> dict[str, str]:
    """create_attempts makes ``create_attempt``'s move for many tasks with a few statements.

    Same rows, tokens and log lines as one at a time. Every task must still be pending, without
    a live attempt and without this stimulus applied, or nothing is created:
    ``ConcurrentModification`` tells the caller to go one by one. Returns task id -> attempt id.
    """
    ids = [w.task_id for w in wanted]
    tasks = {
        row.id: row
        for row in session.execute(
            select(Task.id, Task.job_id, Task.fencing_counter, Task.attempts_made)
            .where(among(session, Task.id, ids), Task.state == TaskState.PENDING.value)
            .with_for_update()
        )
    }
    if len(tasks) != len(set(ids)) or len(ids) != len(set(ids)):
        raise ConcurrentModification("tasks changed before a bulk placement")
    busy = select(Attempt.task_id).where(among(session, Attempt.task_id, ids), Attempt.state.in_(_LIVE)).limit(1)
    done = select(Transition.entity_id).where(
        Transition.entity == "task", among(session, Transition.entity_id, ids), Transition.stimulus_id == stimulus_id
    ).limit(1)
    if session.scalar(busy) is not None or session.scalar(done) is not None:
        raise ConcurrentModification("a task got an attempt before a bulk placement")
    now = utcnow()
    counters = {"fencing_counter": Task.fencing_counter + 1, "attempts_made": Task.attempts_made + 1, "not_before": None}
    # placements carry their own reasons (nearly one per task): one UPDATE per chunk sets each
    # task's through a CASE, where grouping by reason made it one UPDATE per task
    for chunk in chunked(wanted, _BULK_CHUNK):
        reasons = {w.task_id: w.reason for w in chunk}
        _cas_all(session, Task, list(reasons), TaskState.PENDING.value, TaskState.SCHEDULED.value, now,
                 {"reason": case(reasons, value=Task.id), **counters})
    created = {w.task_id: new_uuid() for w in wanted}
    rows = [_attempt_row(created[w.task_id], tasks[w.task_id], w, now, lease_s, epoch) for w in wanted]
    try:
        with session.begin_nested():
            session.execute(insert(Attempt), rows)
    except IntegrityError as exc:  # the one-live-attempt index caught a concurrent creator
        raise ConcurrentModification("a task got another live attempt concurrently") from exc
    session.execute(insert(Transition), [
        _line("task", w.task_id, tasks[w.task_id].job_id, stimulus_id, TaskState.PENDING.value,
              TaskState.SCHEDULED.value, w.reason, actor, now)
        for w in wanted
    ])
    return created


def _attempt_row(attempt_id: str, task: Any, wanted: NewAttempt, now: Any, lease_s: float, epoch: int) -> dict[str, Any]:
    """_attempt_row is the attempt ``create_attempt`` would add for a task row read just before."""
    return {
        "id": attempt_id, "task_id": task.id, "job_id": task.job_id, "number": task.attempts_made + 1,
        "state": AttemptState.CREATED.value, "version": 1, "fencing_token": task.fencing_counter + 1,
        "lease_expires_at": now + timedelta(seconds=lease_s), "placement": wanted.placement,
        "reason": wanted.reason, "epoch": epoch, "created_at": now, "updated_at": now,
    }


def attempt_event(
    session: Session,
    attempt_id: str,
    target: AttemptState,
    stimulus_id: str,
    *,
    reason: str = "",
    actor: str = "",
    fencing_token: int | None = None,
    failure_category: FailureCategory | None = None,
    values: dict[str, Any] | None = None,
) -> TransitionResult:
    """attempt_event moves an attempt and lets its task follow (retry, finish or fail)."""
    changes = dict(values or {})
    now = utcnow()
    category = failure_category or _CATEGORY_OF_END.get(target)
    if category is not None:
        changes["failure_category"] = category.value
    if target == AttemptState.RUNNING:
        changes.setdefault("started_at", now)
    if target not in LIVE_ATTEMPT_STATES:
        changes.setdefault("ended_at", now)
    result = transition_attempt(
        session,
        attempt_id,
        target,
        stimulus_id,
        reason=reason,
        actor=actor,
        fencing_token=fencing_token,
        values=changes,
    )
    if result.applied:
        attempt = session.get(Attempt, attempt_id, populate_existing=True)
        assert attempt is not None
        _task_follows(session, attempt, target, category, stimulus_id, reason, actor)
    return result


def _task_follows(
    session: Session,
    attempt: Attempt,
    target: AttemptState,
    category: FailureCategory | None,
    stimulus_id: str,
    reason: str,
    actor: str,
) -> None:
    """_task_follows applies the task transition an attempt transition implies."""
    implied = task_state_for_attempt(target)
    if implied is not None:
        transition_task(session, attempt.task_id, implied, stimulus_id, reason=reason, actor=actor)
        return
    if target == AttemptState.SUCCEEDED:
        transition_task(session, attempt.task_id, TaskState.SUCCEEDED, stimulus_id, reason=reason, actor=actor)
        return
    if target == AttemptState.CANCELLED:
        transition_task(session, attempt.task_id, TaskState.CANCELLED, stimulus_id, reason=reason, actor=actor)
        return
    _fail_or_retry(session, attempt, category or FailureCategory.UNKNOWN, stimulus_id, reason, actor)


def _fail_or_retry(
    session: Session,
    attempt: Attempt,
    category: FailureCategory,
    stimulus_id: str,
    reason: str,
    actor: str,
) -> None:
    """_fail_or_retry sends the task back to pending when its retry policy allows, else fails it."""
    task = session.get(Task, attempt.task_id, populate_existing=True)
    job = session.get(Job, attempt.job_id)
    assert task is not None and job is not None
    try:
        spec = None if category == FailureCategory.INVALID_SPEC else job_spec(session, job.id)
    except JOB_FAULTS as exc:  # a stored spec the current rules refuse: no retry can help it
        spec, reason = None, invalid_spec_reason(exc)
    if spec is None:
        transition_task(session, task.id, TaskState.FAILED, stimulus_id, reason=reason, actor=actor)
        return
    budget_used = task.attempts_made - task.retry_base
    # an eviction (or a replay off a dark cluster) is the scheduler's own doing: it never spends the user's retry budget
    scheduler_own = category in (FailureCategory.PREEMPTED, FailureCategory.CLUSTER_DARK)
    retry = scheduler_own or spec.retry.retries(category, budget_used)
    if job.cancel_requested:
        # the user cancelled while the attempt was stopping for another reason: the task is cancelled
        transition_task(session, task.id, TaskState.CANCELLED, stimulus_id, reason="cancelled by user", actor=actor)
        return
    if not retry:
        transition_task(session, task.id, TaskState.FAILED, stimulus_id, reason=reason or category.value, actor=actor)
        return
    values: dict[str, Any] = {}
    if scheduler_own:
        values["retry_base"] = task.retry_base + 1
    else:
        # clamped as well as validated: a backoff stored under older rules must not overflow
        values["not_before"] = utcnow() + timedelta(seconds=min(spec.retry.backoff_s, MAX_BACKOFF_S))
    if category == FailureCategory.NODE_FAILURE and attempt.placement:
        # retry elsewhere: the node that failed this attempt is avoided by the next one
        values["avoid_nodes"] = sorted(set(task.avoid_nodes) | set(attempt.nodes()))
    transition_task(
        session,
        task.id,
        TaskState.PENDING,
        stimulus_id,
        reason=f"retrying after {category.value}" + (f": {reason}" if reason else ""),
        actor=actor,
        values=values,
    )


def quarantine_attempt(session: Session, attempt_id: str, problem: BaseException | str, *, actor: str) -> bool:
    """quarantine_attempt fails a live attempt (and its task, never retried) whose job's data broke a step.

    Returns False when the attempt had already left its live state. Audited under ``job.quarantine``.
    """
    attempt = session.get(Attempt, attempt_id, populate_existing=True)
    if attempt is None or attempt.state not in _LIVE:
        return False
    reason = invalid_spec_reason(problem)
    attempt_event(
        session,
        attempt_id,
        AttemptState.FAILED,
        f"quarantine:{attempt_id}:{attempt.version}",
        reason=reason,
        actor=actor,
        failure_category=FailureCategory.INVALID_SPEC,
    )
    _audit_quarantine(session, attempt.job_id, attempt.task_id, reason, actor)
    return True


def quarantine_task(session: Session, task_id: str, problem: BaseException | str, *, actor: str) -> bool:
    """quarantine_task fails a pending task whose job's data cannot be scheduled (audited, never retried)."""
    task = session.get(Task, task_id, populate_existing=True)
    if task is None or task.state != TaskState.PENDING.value:
        return False
    reason = invalid_spec_reason(problem)
    transition_task(session, task_id, TaskState.FAILED, f"quarantine:{task_id}:{task.version}", reason=reason, actor=actor)
    _audit_quarantine(session, task.job_id, task_id, reason, actor)
    return True


def _audit_quarantine(session: Session, job_id: str, task_id: str, reason: str, actor: str) -> None:
    """_audit_quarantine records who quarantined which task and why."""
    job = session.get(Job, job_id)
    subject = job.short_id if job is not None else job_id
    audit.record(session, actor, "job.quarantine", subject, tenant=job.tenant if job else None, task=task_id,
                 reason=reason)


def mark_launching(
    session: Session, attempt_ids: list[str], from_state: AttemptState, *, actor: str = "actuator"
) -> list[str]:
    """mark_launching moves a batch of attempts from ``from_state`` to ``launching`` in one statement.

    The same move ``attempt_event`` makes one at a time — compare-and-swap on the state, one
    transition-log line per attempt with the stimulus ``launch:<attempt>:<version>`` — for a
    burst of launches. The task needs no move: it is already ``scheduled``. Attempts no longer
    in ``from_state`` are left out; the ids actually moved are returned.
    """
    if from_state not in (AttemptState.CREATED, AttemptState.LAUNCH_UNKNOWN):
        raise IllegalTransition("attempt", ",".join(attempt_ids), from_state, AttemptState.LAUNCHING)
    rows = session.execute(
        select(Attempt.id, Attempt.version, Attempt.job_id)
        .where(among(session, Attempt.id, attempt_ids), Attempt.state == from_state.value)
        .with_for_update()
    ).all()
    if not rows:
        return []
    found = {row.id for row in rows}
    moved = [attempt_id for attempt_id in dict.fromkeys(attempt_ids) if attempt_id in found]  # the caller's order
    now = utcnow()
    _cas_all(session, Attempt, moved, from_state.value, AttemptState.LAUNCHING.value, now, {"launch_sent_at": now})
    session.execute(insert(Transition), [
        _line("attempt", row.id, row.job_id, f"launch:{row.id}:{row.version}", from_state.value,
              AttemptState.LAUNCHING.value, "sending to Slurm", actor, now)
        for row in rows
    ])
    return moved


# Bulk moves the reconciler makes for a burst of jobs that started or finished cleanly; the task
# of each attempt follows to this state in the same statement pair.
_BULK_TASK_FOLLOWS = {AttemptState.RUNNING: TaskState.RUNNING, AttemptState.SUCCEEDED: TaskState.SUCCEEDED}


def move_attempts(
    session: Session,
    stimuli: dict[str, str],
    from_state: AttemptState,
    target: AttemptState,
    *,
    reason: str,
    actor: str,
    values: dict[str, Any] | None = None,
) -> None:
    """move_attempts makes ``attempt_event``'s move for many attempts with a few statements.

    ``stimuli`` maps each attempt to its stimulus id (logged as the one-at-a-time path logs it).
    Every attempt must be in ``from_state`` and its task in a state that may follow, or nothing
    moves: ``ConcurrentModification`` / ``IllegalTransition`` tell the caller to go one by one.
    """
    follows = _BULK_TASK_FOLLOWS.get(target)
    if follows is None or not attempt_can(from_state, target):
        raise IllegalTransition("attempt", ",".join(stimuli), from_state, target)
    ids = list(stimuli)
    attempts = session.execute(
        select(Attempt.id, Attempt.job_id, Attempt.task_id)
        .where(among(session, Attempt.id, ids), Attempt.state == from_state.value)
        .with_for_update()
    ).all()
    tasks = session.execute(
        select(Task.id, Task.state).where(among(session, Task.id, [a.task_id for a in attempts])).with_for_update()
    ).all()
    if len(attempts) != len(ids) or len(tasks) != len(ids):
        raise ConcurrentModification("attempts changed before a bulk move")
    moving = [t for t in tasks if t.state != follows.value]
    if any(not task_can(TaskState(t.state), follows) for t in moving):
        raise IllegalTransition("task", ",".join(t.id for t in moving), TaskState(moving[0].state), follows)
    now = utcnow()
    changes = dict(values or {})
    changes.setdefault("started_at" if target == AttemptState.RUNNING else "ended_at", now)
    _cas_all(session, Attempt, ids, from_state.value, target.value, now, changes)
    by_state: dict[str, list[str]] = {}
    for t in moving:
        by_state.setdefault(t.state, []).append(t.id)
    for state, task_ids in by_state.items():
        _cas_all(session, Task, task_ids, state, follows.value, now, {"reason": reason})
    # the task's line carries its attempt's stimulus, as the one-at-a-time path logs it
    of_task = {a.task_id: a for a in attempts}
    lines = [_line("attempt", a.id, a.job_id, stimuli[a.id], from_state.value, target.value, reason, actor, now)
             for a in attempts]
    lines += [_line("task", t.id, of_task[t.id].job_id, stimuli[of_task[t.id].id], t.state, follows.value, reason,
                    actor, now) for t in moving]
    session.execute(insert(Transition), lines)


def _cas_all(session: Session, model: type[Attempt] | type[Task], ids: list[str], current: str, target: str,
             now: Any, values: dict[str, Any]) -> None:
    """_cas_all moves every row of ``ids`` from ``current`` to ``target``, or raises if one moved first."""
    result = session.execute(
        update(model)
        .where(among(session, model.id, ids), model.state == current)
        .values(state=target, version=model.version + 1, updated_at=now, **values)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != len(ids):
        raise ConcurrentModification(f"{model.__tablename__} changed during a bulk move to {target}")


def _line(entity: str, entity_id: str, job_id: str, stimulus_id: str, from_state: str, to_state: str,
          reason: str, actor: str, at: Any) -> dict[str, Any]:
    """_line is one transition-log row."""
    return {"entity": entity, "entity_id": entity_id, "job_id": job_id, "stimulus_id": stimulus_id,
            "from_state": from_state, "to_state": to_state, "reason": reason, "actor": actor, "at": at}


def cancel_job(session: Session, job: Job, actor: str, reason: str = "cancelled by user") -> None:
    """cancel_job marks the job and moves each task toward cancelled (idempotent per job); ``reason`` goes to its waiting tasks."""
    stimulus = f"cancel:{job.id}:{job.version}" if not job.cancel_requested else f"cancel:{job.id}:again"
    if not job.cancel_requested:
        job.cancel_requested = True
        job.version += 1
    for task in session.scalars(select(Task).where(Task.job_id == job.id)):
        state = TaskState(task.state)
        if state == TaskState.PENDING:
            transition_task(session, task.id, TaskState.CANCELLED, stimulus, reason=reason, actor=actor)
            continue
        attempt = live_attempt(session, task.id)
        if attempt is None:
            continue
        cancel_attempt(session, attempt, stimulus, actor)


def cancel_attempt(session: Session, attempt: Attempt, stimulus: str, actor: str) -> None:
    """cancel_attempt ends an attempt not yet sent to Slurm, or marks a sent one for scancel."""
    current = AttemptState(attempt.state)
    if current == AttemptState.CREATED:
        attempt_event(session, attempt.id, AttemptState.CANCELLED, stimulus, reason="cancelled by user", actor=actor)
    elif current != AttemptState.STOPPING:
        # Slurm may be running it: the bridge sends scancel and the reconciler confirms the end
        attempt_event(
            session,
            attempt.id,
            AttemptState.STOPPING,
            stimulus,
            reason="cancel requested by user",
            actor=actor,
            values={"cancel_requested": True},
        )
