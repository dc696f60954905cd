"""Invariants I1–I6 (docs/architecture.md), checked by reading the store and, optionally, what Slurm shows.

``check_invariants`` returns one message per violation (an empty list means all hold). Every
check is a pure read: tests call it after a run, the daemon may call it behind a flag. Slurm
facts come in as arguments (the active job names from squeue, the node inventory from sinfo),
so the checks themselves never talk to Slurm. I2 is about this site's jobs: a caller on a
cluster shared with another metasched site passes only the names of jobs its own site tagged.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from meta.cycle.usage import current_cost_rate
from meta.model.durations import utcnow
from meta.model.nodes import NodeState
from meta.model.states import LIVE_ATTEMPT_STATES, AttemptState
from meta.policy.config import SchedulerConfig
from meta.store.models import Attempt, Job, PartitionCommit, Task, TenantUsage
from slurm_bridge.tags import JOB_NAME_PREFIX

_LIVE = [state.value for state in LIVE_ATTEMPT_STATES]
DEFAULT_GRACE_S = 120.0


def check_invariants(
    session: Session,
    *,
    slurm_active_names: set[str] | None = None,
    nodes: Sequence[NodeState] | None = None,
    now: datetime | None = None,
    grace_s: float = DEFAULT_GRACE_S,
) -> list[str]:
    """check_invariants runs I1–I6 and returns every violation found (I2/I5 need Slurm facts to be complete)."""
    now = now or utcnow()
    return [
        *check_i1_one_commit_per_task(session),
        *check_i2_slurm_matches_attempts(session, slurm_active_names, now, grace_s),
        *check_i3_tokens_increase(session),
        *check_i4_idempotency(_idempotency_rows(session)),
        *(check_i5_capacity(session, nodes) if nodes is not None else []),
        *check_i6_usage(session),
    ]


def check_i1_one_commit_per_task(session: Session) -> list[str]:
    """check_i1_one_commit_per_task: each committed output is written by an attempt of its own task, with its token."""
    problems = []
    rows = session.execute(
        select(PartitionCommit, Attempt).outerjoin(Attempt, Attempt.id == PartitionCommit.attempt_id)
    )
    for commit, attempt in rows:
        if attempt is None:
            problems.append(f"I1: task {commit.task_id} has a commit by unknown attempt {commit.attempt_id}")
        elif attempt.task_id != commit.task_id:
            problems.append(
                f"I1: task {commit.task_id} has a commit by attempt {attempt.id} of task {attempt.task_id}"
            )
        elif attempt.fencing_token != commit.fencing_token:
            problems.append(
                f"I1: task {commit.task_id} commit carries token {commit.fencing_token}, "
                f"its attempt {attempt.id} has {attempt.fencing_token}"
            )
    return problems


def check_i2_slurm_matches_attempts(
    session: Session, slurm_active_names: set[str] | None, now: datetime, grace_s: float
) -> list[str]:
    """check_i2_slurm_matches_attempts: no tagged Slurm job without a live attempt; no running attempt without a job."""
    live = {a.id: a for a in session.scalars(select(Attempt).where(Attempt.state.in_(_LIVE)))}
    problems = []
    for name in sorted(slurm_active_names or ()):
        if name.startswith(JOB_NAME_PREFIX) and name[len(JOB_NAME_PREFIX) :] not in live:
            problems.append(f"I2: Slurm job {name} is active but its attempt is not live")
    cutoff = now - timedelta(seconds=grace_s)
    for attempt in live.values():
        if attempt.state != AttemptState.RUNNING.value:
            continue
        missing = attempt.slurm_job_id is None or (
            slurm_active_names is not None and f"{JOB_NAME_PREFIX}{attempt.id}" not in slurm_active_names
        )
        seen = attempt.last_seen_at or attempt.started_at or attempt.updated_at
        if missing and seen < cutoff:
            problems.append(
                f"I2: attempt {attempt.id} is running without a Slurm job since {seen.isoformat()}"
            )
    return problems


def check_i3_tokens_increase(session: Session) -> list[str]:
    """check_i3_tokens_increase: per task, fencing tokens strictly increase with the attempt number."""
    by_task: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for task_id, number, token in session.execute(
        select(Attempt.task_id, Attempt.number, Attempt.fencing_token).order_by(
            Attempt.task_id, Attempt.number
        )
    ):
        by_task[task_id].append((number, token))
    counters: dict[str, int] = {
        task_id: counter for task_id, counter in session.execute(select(Task.id, Task.fencing_counter))
    }
    problems = []
    for task_id, rows in by_task.items():
        for (n1, t1), (n2, t2) in zip(rows, rows[1:], strict=False):
            if t2 <= t1:
                problems.append(f"I3: task {task_id} attempt {n2} has token {t2} <= attempt {n1}'s {t1}")
        highest = max(token for _, token in rows)
        if counters.get(task_id, highest) < highest:
            problems.append(f"I3: task {task_id} counter {counters[task_id]} is below its token {highest}")
    return problems


def _idempotency_rows(session: Session) -> list[tuple[str, str, str]]:
    """_idempotency_rows lists (tenant, key, job id) for every job submitted with a key."""
    rows = session.execute(
        select(Job.tenant, Job.idempotency_key, Job.id).where(Job.idempotency_key.is_not(None))
    )
    return [(tenant, key, job_id) for tenant, key, job_id in rows]


def check_i4_idempotency(rows: Iterable[tuple[str, str, str]]) -> list[str]:
    """check_i4_idempotency: each (tenant, idempotency key) names exactly one job."""
    jobs: dict[tuple[str, str], set[str]] = defaultdict(set)
    for tenant, key, job_id in rows:
        jobs[(tenant, key)].add(job_id)
    return [
        f"I4: tenant {tenant} key {key!r} is {len(ids)} jobs: {sorted(ids)}"
        for (tenant, key), ids in sorted(jobs.items())
        if len(ids) > 1
    ]


def reserved_per_node(session: Session) -> dict[str, dict[str, float]]:
    """reserved_per_node sums live attempts' placements per node: cpus, memory_mib, gpus (and their types)."""
    reserved: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for placement in session.scalars(select(Attempt.placement).where(Attempt.state.in_(_LIVE))):
        for share in placement or []:
            totals = reserved[share["node"]]
            totals["cpus"] += float(share.get("cpus", 0))
            totals["memory_mib"] += float(share.get("memory_mib", 0))
            gpus = int(share.get("gpus", 0))
            totals["gpus"] += gpus
            if gpus and share.get("gpu_type"):
                totals[f"type:{share['gpu_type']}"] += gpus
    return reserved


def check_i5_capacity(session: Session, nodes: Sequence[NodeState]) -> list[str]:
    """check_i5_capacity: per node, live placements fit its cpus, memory and GPUs, and only of its GPU type."""
    capacity = {node.name: node.capacity for node in nodes}
    problems = []
    for node, totals in sorted(reserved_per_node(session).items()):
        cap = capacity.get(node)
        if cap is None:
            problems.append(f"I5: live attempts are placed on unknown node {node}")
            continue
        for key, limit in (("cpus", cap.cpus), ("memory_mib", cap.memory_mib), ("gpus", cap.gpus)):
            if totals[key] > limit + 1e-9:
                problems.append(f"I5: node {node} has {totals[key]:g} {key} reserved, allocatable {limit:g}")
        for key, amount in totals.items():
            if key.startswith("type:") and key[5:] != cap.gpu_type:
                problems.append(
                    f"I5: node {node} has {amount:g} {key[5:]} GPUs reserved, it has {cap.gpu_type}"
                )
    return problems


def check_i6_usage(session: Session) -> list[str]:
    """check_i6_usage: the usage rate fair share accrues per tenant equals the GPUs its live attempts hold.

    The expected side is computed through each attempt's *task* (attempt → task → job → tenant),
    the reported side by ``current_cost_rate`` with every GPU weighing 1; decayed usage is never
    negative.
    """
    expected: dict[str, float] = defaultdict(float)
    rows = session.execute(
        select(Job.tenant, Attempt.placement)
        .join(Task, Task.id == Attempt.task_id)
        .join(Job, Job.id == Task.job_id)
        .where(Attempt.state.in_(_LIVE))
    )
    for tenant, placement in rows:
        expected[tenant] += sum(int(share.get("gpus", 0)) for share in placement or [])
    unit = SchedulerConfig(gpu_cost_weights={}, default_gpu_cost_weight=1.0)
    reported = current_cost_rate(session, unit)
    problems = [
        f"I6: tenant {tenant} holds {expected.get(tenant, 0.0):g} GPUs in live attempts, usage counts "
        f"{reported.get(tenant, 0.0):g}"
        for tenant in sorted(set(expected) | set(reported))
        if abs(expected.get(tenant, 0.0) - reported.get(tenant, 0.0)) > 1e-9
    ]
    for row in session.scalars(select(TenantUsage).where(TenantUsage.decayed_gpu_seconds < 0)):
        problems.append(f"I6: tenant {row.tenant} has negative usage {row.decayed_gpu_seconds:g}")
    return problems
