"""Cycle step 8, gates: held jobs, unsatisfied dependencies and begin times wait before the policy.

The spec says what a job waits for (``dependency``, ``begin``), the store says whether it is held
(``jobs.hold``) and how far the jobs it depends on have come. This module reads those few facts
for the waiting tasks that have a gate at all (most have none: one indexed query for holds and a
look at each spec), hands them to the pure ``meta.policy.dependencies.gate`` and splits the
waiting tasks into those the policy may place and those that wait with a typed reason. Jobs whose
dependency can never be satisfied and that asked for it (``--kill-on-invalid-dep=yes``, or the
site's ``kill_invalid_depend``) are returned to be cancelled. ``aftercorr`` is decided per array
element (task), everything else per job. A task that may go ages from when it became eligible
(its submit time as the policy sees it moves to the begin time or when its dependency held).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Protocol

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from meta.model.dependency import Dependency
from meta.model.spec import AnySpec
from meta.model.states import JobState, TaskState, derive_job_state
from meta.policy.dependencies import (
    Gates,
    ObservedJob,
    Phase,
    element_key,
    eligible_since,
    gate,
    gate_changes_at,
)
from meta.policy.plan import PendingReason
from meta.policy.snapshot import PendingTask
from meta.store import audit
from meta.store.chunks import among, chunked
from meta.store.lifecycle import cancel_job
from meta.store.models import Attempt, Job, Task
from meta.store.transitions import transition_task

_IN_CHUNK = 500  # references per IN (...) list (each may match the short id or the id)
_PHASE_OF = {JobState.SUCCEEDED: Phase.SUCCEEDED, JobState.FAILED: Phase.FAILED, JobState.CANCELLED: Phase.CANCELLED}
_LIVE_OR_WAITING = (TaskState.PENDING.value, TaskState.SCHEDULED.value, TaskState.RUNNING.value)


class Specs(Protocol):
    """Specs is what the gates need of the spec cache: the gating part of a job's spec by id."""

    def gate_facts(self, session: Session, job_id: str) -> GateFacts | None:
        """gate_facts is what of the job's spec may gate it (None: nothing does)."""


@dataclass(frozen=True, slots=True)
class GateFacts:
    """GateFacts is what the gates read of a job's spec: its dependency, begin time and choice on an invalid one."""

    dependency: Dependency | None
    begin: float | None
    kill_on_invalid_dep: bool | None


def gate_facts(spec: AnySpec) -> GateFacts | None:
    """gate_facts is the part of a spec the gates read, or None when it names no dependency and no begin time."""
    dependency = spec.parsed_dependency()
    if dependency is None and spec.begin is None:
        return None
    return GateFacts(dependency, spec.begin.timestamp() if spec.begin else None, spec.kill_on_invalid_dep)


@dataclass
class GateResult:
    """GateResult splits the waiting tasks: ``open`` go to the policy, the others wait with ``reasons``."""

    open: list[PendingTask] = field(default_factory=list)
    reasons: dict[str, PendingReason] = field(default_factory=dict)  # task id -> why it waits
    job_of_task: dict[str, str] = field(default_factory=dict)  # gated task id -> job id
    doomed: dict[str, str] = field(default_factory=dict)  # job id -> the reason it is cancelled
    doomed_tasks: dict[str, str] = field(default_factory=dict)  # aftercorr: array element (task id) -> reason
    wake_at: float | None = None  # the next time a gate may open or close by time alone (daemon's rest)


def job_gates(spec: AnySpec, hold: str | None) -> Gates | None:
    """job_gates is what may keep a job from the policy, or None when nothing can."""
    return gates_of(gate_facts(spec), hold)


def gates_of(facts: GateFacts | None, hold: str | None) -> Gates | None:
    """gates_of is what may keep a job from the policy given its spec's gate facts and hold, or None when nothing can."""
    if hold is None and facts is None:
        return None
    if facts is None:
        return Gates(hold=hold, dependency=None, begin=None)
    return Gates(hold=hold, dependency=facts.dependency, begin=facts.begin)


def apply_gates(
    session: Session, pending: Sequence[PendingTask], specs: Specs, now: datetime, kill_default: bool
) -> GateResult:
    """apply_gates keeps held, dependent and not-yet-begun jobs from the policy and says why each waits."""
    holds = dict(session.execute(select(Job.id, Job.hold).where(Job.hold.is_not(None))).all())
    gated: dict[str, tuple[Gates, GateFacts | None]] = {}
    for job_id in dict.fromkeys(task.job_id for task in pending):
        facts = specs.gate_facts(session, job_id)
        gates = gates_of(facts, holds.get(job_id))
        if gates is not None:
            gated[job_id] = (gates, facts)
    result = GateResult()
    if not gated:
        result.open = list(pending)
        return result
    dependencies = {job_id: gates.dependency for job_id, (gates, _) in gated.items() if gates.dependency}
    observed = observe_jobs(session, {ref for dep in dependencies.values() for ref in dep.jobs()})
    corr = {job_id for job_id, dep in dependencies.items() if dep.corresponding()}
    observed.update(observe_elements(session, {ref for job_id in corr for ref in dependencies[job_id].jobs()}))
    elements = task_names(session, [task.task_id for task in pending if task.job_id in corr])
    blocked = singleton_blocked(session, [job_id for job_id, dep in dependencies.items() if dep.singleton()])
    verdicts: dict[tuple[str, str | None], tuple[PendingReason | None, bool]] = {}
    for task in pending:
        if task.job_id not in gated:
            result.open.append(task)
            continue
        gates, facts = gated[task.job_id]
        element = elements.get(task.task_id) if task.job_id in corr else None  # aftercorr: element by element
        key = (task.job_id, element)
        if key not in verdicts:
            verdicts[key] = gate(gates, observed, now.timestamp(), task.job_id in blocked, element)
            result.wake_at = _sooner(result.wake_at, gate_changes_at(gates, observed, now.timestamp(), element))
        reason, never = verdicts[key]
        if reason is None:
            # its age counts from when it became eligible, as Slurm's (begin time, dependency satisfied)
            since = eligible_since(gates, observed, now.timestamp(), element)
            result.open.append(task if since is None or since <= task.submit_time else replace(task, submit_time=since))
            continue
        result.reasons[task.task_id] = reason
        result.job_of_task[task.task_id] = task.job_id
        chosen = facts.kill_on_invalid_dep if facts is not None else None
        kill = chosen if chosen is not None else kill_default
        if never and kill:
            doomed = result.doomed_tasks if element is not None else result.doomed
            doomed[task.task_id if element is not None else task.job_id] = reason.message
    return result


def _sooner(a: float | None, b: float | None) -> float | None:
    """_sooner is the earlier of two optional moments."""
    return b if a is None else a if b is None else min(a, b)


def task_names(session: Session, task_ids: Sequence[str]) -> dict[str, str]:
    """task_names is each task's name (an array element's index), by task id."""
    names: dict[str, str] = {}
    for chunk in chunked(task_ids, _IN_CHUNK):
        names.update(session.execute(select(Task.id, Task.name).where(among(session, Task.id, chunk))).all())
    return names


def observe_elements(session: Session, refs: Iterable[str]) -> dict[str, ObservedJob]:
    """observe_elements is each element (task) of the referenced jobs, keyed ``REF_NAME`` (for aftercorr)."""
    wanted = sorted(set(refs))
    found: dict[str, ObservedJob] = {}
    for chunk in chunked(wanted, _IN_CHUNK):
        rows = session.execute(
            select(Job.id, Job.short_id, Job.cancel_requested, Task.name, Task.state, Task.updated_at)
            .join(Task, Task.job_id == Job.id)
            .where(or_(among(session, Job.short_id, chunk), among(session, Job.id, chunk)))
        )
        for job_id, short_id, cancel_requested, name, state, updated_at in rows:
            element = observed_job([TaskState(state)], cancel_requested, None, updated_at, short_id)
            found[element_key(short_id, name)] = found[element_key(job_id, name)] = element
    return found


def observe_jobs(session: Session, refs: Iterable[str]) -> dict[str, ObservedJob]:
    """observe_jobs is each referenced job's phase and start, keyed by the reference (short id or id)."""
    wanted = sorted(set(refs))
    found: dict[str, ObservedJob] = {}
    for chunk in chunked(wanted, _IN_CHUNK):
        jobs = session.execute(
            select(Job.id, Job.short_id, Job.cancel_requested).where(or_(among(session, Job.short_id, chunk), among(session, Job.id, chunk)))
        ).all()
        ids = [job_id for job_id, _, _ in jobs]
        states = _task_states(session, ids)
        started = dict(
            session.execute(
                select(Attempt.job_id, func.min(Attempt.started_at)).where(among(session, Attempt.job_id, ids)).group_by(Attempt.job_id)
            ).all()
        )
        for job_id, short_id, cancel_requested in jobs:
            tasks, ended_at = states.get(job_id, ([], None))
            observation = observed_job(tasks, cancel_requested, started.get(job_id), ended_at, short_id)
            found[short_id] = found[job_id] = observation
    return found


def _task_states(session: Session, job_ids: list[str]) -> dict[str, tuple[list[TaskState], datetime | None]]:
    """_task_states is each job's task states and the last time one of its tasks changed."""
    grouped: dict[str, tuple[list[TaskState], datetime | None]] = {}
    rows = session.execute(
        select(Task.job_id, Task.state, func.count(), func.max(Task.updated_at))
        .where(among(session, Task.job_id, job_ids))
        .group_by(Task.job_id, Task.state)
    )
    for job_id, state, count, updated in rows:
        states, last = grouped.get(job_id, ([], None))
        states.extend([TaskState(state)] * min(count, 2))  # the fold needs presence, not the count
        grouped[job_id] = (states, updated if last is None or (updated and updated > last) else last)
    return grouped


def observed_job(
    tasks: list[TaskState], cancel_requested: bool, started_at: datetime | None, ended_at: datetime | None,
    short_id: str = "",
) -> ObservedJob:
    """observed_job folds a job's tasks into the phase a dependency reads (ended, started or waiting)."""
    state = derive_job_state(tasks, cancel_requested)
    if state in _PHASE_OF:
        moment = started_at or ended_at  # Slurm's "after": from the start, or the cancel of a job that never started
        end = ended_at.timestamp() if ended_at else None
        return ObservedJob(_PHASE_OF[state], moment.timestamp() if moment else None, short_id, end)
    running = TaskState.RUNNING in tasks
    if started_at is not None or running:
        return ObservedJob(Phase.STARTED, started_at.timestamp() if started_at else None, short_id)
    return ObservedJob(Phase.WAITING, None, short_id)


def singleton_blocked(session: Session, job_ids: Sequence[str]) -> set[str]:
    """singleton_blocked is the jobs another job of the same name and user keeps waiting.

    Slurm's rule: a job of the same name and user that runs, or that waits and was submitted
    earlier, blocks a singleton. Owners are uids (jobs older than issue 12: the submitter's name).
    """
    if not job_ids:
        return set()
    mine = session.execute(
        select(Job.id, Job.name, Job.owner_uid, Job.submitted_by, Job.submitted_at).where(among(session, Job.id, list(job_ids)))
    ).all()
    names = sorted({row.name for row in mine})
    rows = session.execute(
        select(Job.id, Job.name, Job.owner_uid, Job.submitted_by, Job.submitted_at, Task.state)
        .join(Task, Task.job_id == Job.id)
        .where(among(session, Job.name, names), Job.cancel_requested.is_(False), Task.state.in_(_LIVE_OR_WAITING))
        .distinct()
    ).all()
    others: dict[tuple, list[tuple[tuple, bool]]] = {}
    for row in rows:
        key = (row.name, row.owner_uid if row.owner_uid is not None else row.submitted_by)
        others.setdefault(key, []).append(((row.submitted_at, row.id), row.state != TaskState.PENDING.value))
    blocked = set()
    for row in mine:
        key = (row.name, row.owner_uid if row.owner_uid is not None else row.submitted_by)
        order = (row.submitted_at, row.id)
        if any(other != order and (live or other < order) for other, live in others.get(key, [])):
            blocked.add(row.id)
    return blocked


def cancel_doomed_tasks(session: Session, doomed: dict[str, str]) -> int:
    """cancel_doomed_tasks cancels array elements whose aftercorr can never be satisfied (--kill-on-invalid-dep), audited."""
    cancelled = 0
    for task in session.scalars(select(Task).where(among(session, Task.id, sorted(doomed)), Task.state == TaskState.PENDING.value)):
        reason = f"DependencyNeverSatisfied: {doomed[task.id]} (--kill-on-invalid-dep)"
        transition_task(session, task.id, TaskState.CANCELLED, f"kill-invalid-dep:{task.id}:{task.version}",
                        reason=reason, actor="scheduler")  # fmt: skip
        job = session.get(Job, task.job_id)
        assert job is not None
        audit.record(session, "scheduler", "job.cancel", f"{job.short_id}_{task.name}", tenant=job.tenant, reason=reason)
        cancelled += 1
    return cancelled


def cancel_doomed(session: Session, doomed: dict[str, str]) -> int:
    """cancel_doomed cancels jobs whose dependency can never be satisfied (--kill-on-invalid-dep), audited."""
    cancelled = 0
    for job in session.scalars(select(Job).where(among(session, Job.id, sorted(doomed)))):
        if job.cancel_requested:
            continue
        reason = f"DependencyNeverSatisfied: {doomed[job.id]} (--kill-on-invalid-dep)"
        cancel_job(session, job, "scheduler", reason=reason)
        audit.record(session, "scheduler", "job.cancel", job.short_id, tenant=job.tenant, reason=reason)
        cancelled += 1
    return cancelled
