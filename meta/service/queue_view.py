"""The queue as squeue shows it: metasched-waiting and launched jobs in one view (``msqueue``).

One row per job: its metasched short id (the id users give metasched's commands), the user's job
name, owner, account (tenant), partition, squeue's compact state, time limit, run time, node
count and node list, the Slurm ids of its live attempts, and for a waiting job the last cycle's
typed reason (``WaitingForQuota``, ``LowerFairShare``, ...). A page costs four queries however
many jobs it holds: the jobs (with their specs), their task states, their live attempts and
their waiting reasons.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, exists, func, select
from sqlalchemy.orm import Session

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
        query = query.where(Job.short_id.in_(sorted(wanted.jobs)) | Job.id.in_(sorted(wanted.jobs)))
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
