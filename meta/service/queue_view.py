"""The queue as squeue shows it: metasched-waiting and launched jobs in one view (``msqueue``).

One row per job: its metasched short id (the id users give metasched's commands), the user's job
name, owner, account (tenant), partition, squeue's compact state, time limit, run time, node
count and node list, the Slurm ids of its live attempts, the clusters it may run on (``-M``;
msqueue tells which cluster a job is on from its nodes' names) and for a waiting job the last
cycle's typed reason (``WaitingForQuota``, ``LowerFairShare``, ...). A page costs four queries however
many jobs it holds: the jobs (with their specs), their task states, their live attempts and
their waiting reasons.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, exists, func, select
from sqlalchemy.orm import Session

from meta.model.arrays import collapsed_id, element_id, parse_element_ref
from meta.model.durations import utcnow
from meta.model.states import LIVE_ATTEMPT_STATES, AttemptState, JobState, TaskState, derive_job_state
from meta.store.models import Attempt, Job, JobSpecRow, Task, TaskReason

# squeue's compact codes for metasched's job states
STATE_CODES = {
    JobState.PENDING: "PD",
    JobState.RUNNING: "R",
    JobState.CANCELLING: "CG",
    JobState.SUCCEEDED: "CD",
    JobState.FAILED: "F",
    JobState.CANCELLED: "CA",
}
# squeue's long names (%T) of the same states
STATE_NAMES = {
    "PD": "PENDING",
    "R": "RUNNING",
    "CG": "COMPLETING",
    "CD": "COMPLETED",
    "F": "FAILED",
    "CA": "CANCELLED",
}
ACTIVE_CODES = frozenset({"PD", "R", "CG"})
ENDED_SHOWN_S = 300  # ended jobs stay in the view this long, as Slurm's default MinJobAge
MAX_QUEUE_ROWS = 10_000
_ACTIVE_TASKS = (TaskState.PENDING.value, TaskState.SCHEDULED.value, TaskState.RUNNING.value)
_LIVE = [state.value for state in LIVE_ATTEMPT_STATES]


@dataclass(frozen=True)
class QueueFilter:
    """QueueFilter is msqueue's selection: users, accounts, partitions, state codes, job ids (empty: any)."""

    users: frozenset[str] = frozenset()
    accounts: frozenset[str] = frozenset()
    partitions: frozenset[str] = frozenset()
    states: frozenset[str] = ACTIVE_CODES
    jobs: frozenset[str] = frozenset()
    names: frozenset[str] = frozenset()
    limit: int = MAX_QUEUE_ROWS
    any_age: bool = False  # ended jobs however long ago (``metasched list``'s columns), not only recent ones


@dataclass
class QueueRow:
    """QueueRow is one job as msqueue prints it."""

    job_id: str  # the short id users give metasched
    uuid: str
    name: str
    user: str
    account: str
    partition: str | None
    kind: str
    state: str  # metasched's job state
    st: str  # squeue's compact code
    time_limit_s: int
    run_time_s: int
    nodes: int
    nodelist: list[str]
    slurm_job_ids: list[str]
    reason: str  # the typed reason of a waiting job; "None" otherwise, as squeue
    submitted_at: str
    tasks: dict[str, int] = field(default_factory=dict)
    array_job_id: str | None = None  # an array element's row: its job's id (job_id is ``JOB_3`` or ``JOB_[2-7%2]``)
    array_task_ids: list[int] = field(default_factory=list)  # the indexes the row stands for
    clusters: list[str] = field(default_factory=list)  # the clusters it may run on (sbatch -M; empty: any)

    def to_dict(self) -> dict[str, Any]:
        """to_dict is the row as JSON."""
        return asdict(self)


def queue_rows(session: Session, tenants: frozenset[str] | None, wanted: QueueFilter) -> list[QueueRow]:
    """queue_rows lists the jobs of ``tenants`` (None: all) that ``wanted`` selects, oldest first."""
    now = utcnow()
    jobs = _jobs(session, tenants, wanted, now)
    if not jobs:
        return []
    ids = [job.id for job, _ in jobs]
    counts = _task_counts(session, ids)
    attempts = _live_attempts(session, ids)
    reasons = _reasons(session, ids)
    rows = [_row(job, spec, counts[job.id], attempts[job.id], reasons.get(job.id), now) for job, spec in jobs]
    if not wanted.any_age:  # msqueue: an array's elements as squeue shows them (``metasched list``: one row per job)
        rows = _with_elements(session, rows, {job.id: spec for job, spec in jobs}, attempts, wanted, now)
    return [row for row in rows if row.st in wanted.states and _partition_ok(row, wanted)][: wanted.limit]


def _jobs(session: Session, tenants: frozenset[str] | None, wanted: QueueFilter, now: datetime) -> list[tuple[Job, str]]:
    """_jobs reads the selected jobs with their stored specs (one query)."""
    active = exists().where(Task.job_id == Job.id, Task.state.in_(_ACTIVE_TASKS))
    query = select(Job, JobSpecRow.spec_json).join(JobSpecRow, JobSpecRow.job_id == Job.id)
    if wanted.any_age:
        pass
    elif wanted.states <= ACTIVE_CODES:
        query = query.where(active)
    else:  # ended jobs are shown for a while after their last task ended, as squeue does
        recent = exists().where(Task.job_id == Job.id, Task.updated_at >= now - timedelta(seconds=ENDED_SHOWN_S))
        query = query.where(active | recent)
    if tenants is not None:
        query = query.where(Job.tenant.in_(sorted(tenants)))
    if wanted.accounts:
        query = query.where(Job.tenant.in_(sorted(wanted.accounts)))
    if wanted.users:
        query = query.where(Job.submitted_by.in_(sorted(wanted.users)))
    if wanted.jobs:
        refs = sorted({parse_element_ref(ref).job for ref in wanted.jobs})  # JOB_3 selects its job's rows
        query = query.where(Job.short_id.in_(refs) | Job.id.in_(refs))
    if wanted.names:
        query = query.where(Job.name.in_(sorted(wanted.names)))
    query = query.order_by(Job.submitted_at, Job.id).limit(wanted.limit * 2)
    return [(job, spec) for job, spec in session.execute(query)]


def _task_counts(session: Session, ids: list[str]) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    rows = session.execute(
        select(Task.job_id, Task.state, func.count()).where(Task.job_id.in_(ids)).group_by(Task.job_id, Task.state)
    )
    for job_id, state, count in rows:
        counts[job_id][state] = count
    return counts


def _live_attempts(session: Session, ids: list[str]) -> dict[str, list[Attempt]]:
    found: dict[str, list[Attempt]] = defaultdict(list)
    for attempt in session.scalars(select(Attempt).where(and_(Attempt.job_id.in_(ids), Attempt.state.in_(_LIVE)))):
        found[attempt.job_id].append(attempt)
    return found


def _reasons(session: Session, ids: list[str]) -> dict[str, str]:
    """_reasons is one typed reason per job: its first waiting task's."""
    found: dict[str, str] = {}
    rows = session.execute(
        select(TaskReason.job_id, TaskReason.code)
        .join(Task, Task.id == TaskReason.task_id)
        .where(TaskReason.job_id.in_(ids), Task.state == TaskState.PENDING.value)
        .order_by(TaskReason.job_id, Task.index)
    )
    for job_id, code in rows:
        found.setdefault(job_id, code)
    return found


def _row(job: Job, spec_json: str, counts: dict[str, int], attempts: list[Attempt], reason: str | None,
         now: datetime) -> QueueRow:  # fmt: skip
    """_row folds one job's facts into its queue row."""
    spec = json.loads(spec_json)
    state = derive_job_state([TaskState(s) for s, n in counts.items() for _ in range(n)], job.cancel_requested)
    started = [a.started_at for a in attempts if a.started_at is not None and a.state == AttemptState.RUNNING.value]
    code = STATE_CODES[state]
    if code == "R" and not started:
        code, reason = "PD", reason or "Launching"  # placed, sbatch sent, not yet running in Slurm
    nodelist = sorted({node for a in attempts for node in a.nodes()})
    return QueueRow(
        job_id=job.short_id,
        uuid=job.id,
        name=job.name,
        user=job.submitted_by or "",
        account=job.tenant,
        partition=spec.get("partition"),
        kind=job.kind,
        state=state.value,
        st=code,
        time_limit_s=int(spec.get("time_limit_s") or 0),
        run_time_s=int((now - min(started)).total_seconds()) if started else 0,
        nodes=len(nodelist) or _requested_nodes(spec),
        nodelist=nodelist,
        slurm_job_ids=sorted((a.slurm_job_id for a in attempts if a.slurm_job_id), key=_numeric),
        reason=(reason or "None") if code == "PD" else "None",
        submitted_at=job.submitted_at.isoformat(),
        tasks=dict(counts),
        clusters=list((spec.get("sbatch") or {}).get("clusters") or ()),
    )


def _requested_nodes(spec: dict[str, Any]) -> int:
    """_requested_nodes is a waiting job's node count: its gang's workers (one node each at most), else 1."""
    return int(spec.get("workers") or 1)


def _numeric(value: str) -> tuple[int, str]:
    return (int(value), "") if value.isdigit() else (0, value)


def _partition_ok(row: QueueRow, wanted: QueueFilter) -> bool:
    return not wanted.partitions or (row.partition or "") in wanted.partitions


def parse_codes(values: Collection[str]) -> frozenset[str]:
    """parse_codes reads squeue's ``-t`` states (codes or long names, ``all``) as compact codes; ValueError names a bad one."""
    codes: set[str] = set()
    by_name = {name: code for code, name in STATE_NAMES.items()} | {"CANCELED": "CA"}
    for value in values:
        upper = value.strip().upper()
        if upper == "ALL":
            codes |= set(STATE_NAMES)
        elif upper in STATE_NAMES:
            codes.add(upper)
        elif upper in by_name:
            codes.add(by_name[upper])
        elif upper:
            raise ValueError(f"Invalid job state specified: {value}")
    return frozenset(codes) or ACTIVE_CODES


# --- array elements ---------------------------------------------------------------------------

_ENDED_CODES = {TaskState.SUCCEEDED.value: "CD", TaskState.FAILED.value: "F", TaskState.CANCELLED.value: "CA"}


def _with_elements(session: Session, rows: list[QueueRow], specs: dict[str, str], attempts: dict[str, list[Attempt]],
                   wanted: QueueFilter, now: datetime) -> list[QueueRow]:  # fmt: skip
    """_with_elements replaces each array job's row by its elements' rows, as squeue shows an array."""
    parsed = {row.uuid: json.loads(specs[row.uuid]) for row in rows}
    arrays = {uuid: spec for uuid, spec in parsed.items() if spec.get("array")}
    if not arrays:
        return rows
    tasks: dict[str, list[Task]] = defaultdict(list)
    for task in session.scalars(select(Task).where(Task.job_id.in_(sorted(arrays))).order_by(Task.index)):
        tasks[task.job_id].append(task)
    reasons = dict(session.execute(select(TaskReason.task_id, TaskReason.code).where(TaskReason.job_id.in_(sorted(arrays)))).all())
    picked = _picked_indexes(wanted)
    out: list[QueueRow] = []
    for row in rows:
        if row.uuid not in arrays:
            out.append(row)
            continue
        elements = _element_rows(row, arrays[row.uuid], tasks[row.uuid], attempts[row.uuid], reasons, now)
        wanted_here = picked.get(row.job_id)
        out += [e for e in elements if wanted_here is None or set(e.array_task_ids) & wanted_here]
    return out


def _picked_indexes(wanted: QueueFilter) -> dict[str, set[int]]:
    """_picked_indexes are the elements ``-j JOB_3`` asks for, per job (a job named alone: all of its elements)."""
    picked: dict[str, set[int] | None] = {}
    for ref in wanted.jobs:
        element = parse_element_ref(ref)
        if element.indexes is None:
            picked[element.job] = None
        elif picked.get(element.job, set()) is not None:
            picked.setdefault(element.job, set()).update(element.indexes)  # type: ignore[union-attr]
    return {job: indexes for job, indexes in picked.items() if indexes is not None}


def _element_rows(row: QueueRow, spec: dict[str, Any], tasks: list[Task], attempts: list[Attempt],
                  reasons: dict[str, str], now: datetime) -> list[QueueRow]:  # fmt: skip
    """_element_rows are one row for the waiting elements (``JOB_[2-7%2]``) and one per launched or ended element."""
    live = {a.task_id: a for a in attempts}
    short = row.job_id
    base = {"array_job_id": short, "tasks": {}, "run_time_s": 0, "slurm_job_ids": [], "nodelist": []}
    waiting = [t for t in tasks if t.state == TaskState.PENDING.value]
    out = []
    if waiting:
        indexes = [int(t.name) for t in waiting]
        reason = next((reasons[t.id] for t in waiting if t.id in reasons), "None")
        out.append(replace(row, **base, job_id=collapsed_id(short, indexes, spec["array"].get("max_parallel")),
                           array_task_ids=indexes, state=JobState.PENDING.value, st="PD", reason=reason,
                           nodes=_requested_nodes(spec)))  # fmt: skip
    for task in tasks:
        if task.state == TaskState.PENDING.value:
            continue
        element = {**base, "job_id": element_id(short, int(task.name)), "array_task_ids": [int(task.name)]}
        attempt = live.get(task.id)
        if attempt is not None:
            out.append(replace(row, **{**element, **_live_fields(attempt, now)}))
        elif task.state in _ENDED_CODES and task.updated_at >= now - timedelta(seconds=ENDED_SHOWN_S):
            out.append(replace(row, **element, state=task.state, st=_ENDED_CODES[task.state], reason="None"))
    return out


def _live_fields(attempt: Attempt, now: datetime) -> dict[str, Any]:
    """_live_fields are a launched element's state, run time, nodes and Slurm id."""
    running = attempt.state == AttemptState.RUNNING.value and attempt.started_at is not None
    stopping = attempt.state == AttemptState.STOPPING.value
    nodes = sorted(set(attempt.nodes()))
    return {
        "state": JobState.CANCELLING.value if stopping else JobState.RUNNING.value,
        "st": "CG" if stopping else "R" if running else "PD",
        "reason": "None" if running or stopping else "Launching",
        "run_time_s": int((now - attempt.started_at).total_seconds()) if running and attempt.started_at else 0,
        "nodelist": nodes,
        "nodes": len(nodes) or 1,
        "slurm_job_ids": [attempt.slurm_job_id] if attempt.slurm_job_id else [],
    }
