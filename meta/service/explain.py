"""Why a job's tasks wait: each task's typed reason (``metasched explain``).

The leader stores a reason only when it changes, so a row's ``cycle`` and ``at`` say since when
the reason has held (the SINCE column), not when it was last confirmed.

On a site of several Slurm clusters (qualified node names in the stored inventory) each task also
gets ``clusters``: one verdict per cluster, where it runs or why not there. The judgement is
``meta/policy/cluster_fit.py``'s; this module only loads the inventory, drains, spec and attempts.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from checkpoint.site import resume_cluster
from meta.model.errors import INVALID_SPEC
from meta.model.spec import AnySpec
from meta.model.states import LIVE_ATTEMPT_STATES, AttemptState, TaskState
from meta.policy.cluster_fit import ClusterFit, site_clusters, static_fit, task_fit
from meta.policy.shape import shape_of
from meta.service.feasibility import spec_as_task
from meta.store.cluster_drains import drains
from meta.store.inventory import load_nodes
from meta.store.lifecycle import job_spec
from meta.store.models import Attempt, Job, Task, TaskReason, Tenant


def explain_job(session: Session, job_id: str, short_id: str, state: str) -> dict[str, Any]:
    """explain_job is one line per task: its typed reason (or why none applies) and what would help."""
    rows = session.execute(
        select(Task.index, Task.name, Task.state, Task.reason, TaskReason)
        .outerjoin(TaskReason, TaskReason.task_id == Task.id)
        .where(Task.job_id == job_id)
        .order_by(Task.index)
    ).all()
    blocking = {
        r.blocking_job: short
        for *_, r in rows
        if r is not None and r.blocking_job
        for short in session.scalars(select(Job.short_id).where(Job.id == r.blocking_job))
    }
    items = [_item(index, name, task_state, task_reason, reason, blocking)
             for index, name, task_state, task_reason, reason in rows]
    found = _static_fit(session, job_id)
    if found is not None:
        static, spec = found
        last = _last_attempts(session, job_id)
        resume = _resume_clusters(session, job_id, spec)
        preferred = spec.data.cluster if spec.data and not spec.data.required else ""
        for item in items:
            fits = _task_fit(static, item, last.get(item["task"]), resume.get(item["task"], ""), preferred)
            item["clusters"] = [fit.to_dict() for fit in fits]
    return {"job": short_id, "state": state, "tasks": items}


def _static_fit(session: Session, job_id: str) -> tuple[list[ClusterFit], AnySpec] | None:
    """_static_fit is the job's verdict per cluster and its spec, or None on a single-cluster site (or with no inventory or spec)."""
    nodes = load_nodes(session)
    if not nodes or not site_clusters(nodes):
        return None
    try:
        spec = job_spec(session, job_id)
    except Exception:  # noqa: BLE001 - a quarantined spec the current rules refuse: its reason says it all
        return None
    # every task of a job shares the spec's shape (avoid_nodes, per task, are no hard filter)
    shape = shape_of(spec_as_task(spec))
    drained = {d.cluster: d.reason for d in drains(session)}
    data = spec.data.cluster if spec.data and spec.data.required else ""
    return static_fit(shape, nodes, drained, _tenant_clusters(session, spec.tenant), data), spec


def _resume_clusters(session: Session, job_id: str, spec: AnySpec) -> dict[int, str]:
    """_resume_clusters maps each waiting task's index to the cluster its checkpoint is readable on (the policy's pin)."""
    waiting = session.scalars(select(Task).where(Task.job_id == job_id, Task.state == TaskState.PENDING.value))
    return {task.index: cluster for task in waiting if (cluster := resume_cluster(session, task, spec))}


def _tenant_clusters(session: Session, tenant: str) -> frozenset[str]:
    """_tenant_clusters is where an admin confined the tenant (empty: any cluster, or a store without the setting)."""
    row = session.get(Tenant, tenant)
    return frozenset(getattr(row, "clusters", None) or ())


def _last_attempts(session: Session, job_id: str) -> dict[int, Attempt]:
    """_last_attempts maps a task's index to its newest attempt."""
    rows = session.execute(
        select(Task.index, Attempt).join(Attempt, Attempt.task_id == Task.id)
        .where(Task.job_id == job_id).order_by(Attempt.number)
    ).all()
    return {index: attempt for index, attempt in rows}  # the newest number wins


def _task_fit(
    static: list[ClusterFit], item: dict[str, Any], attempt: Attempt | None, checkpoint: str, data: str
) -> list[ClusterFit]:
    """_task_fit is one task's verdicts: the static ones with where its attempt runs or ran, why it waits, its pins."""
    waiting = (item["code"] or "") if item["state"] == TaskState.PENDING.value else None
    if attempt is None:
        return task_fit(static, waiting=waiting, checkpoint=checkpoint, data=data)
    state = AttemptState(attempt.state)
    how = f"ran (attempt {attempt.number}: {state.value})"
    if state in LIVE_ATTEMPT_STATES:
        how = "runs" if state in (AttemptState.RUNNING, AttemptState.STOPPING) else f"is placed ({state.value})"
    return task_fit(static, placed=attempt.nodes(), attempt=how, waiting=waiting, checkpoint=checkpoint, data=data)


def _item(
    index: int, name: str, task_state: str, task_reason: str | None, reason: TaskReason | None, blocking: dict
) -> dict[str, Any]:
    """_item is one task's line: the last cycle's typed reason, or why it will never run."""
    if task_reason and task_reason.startswith(f"{INVALID_SPEC}:"):
        # quarantined: its own data broke a step of the cycle; no later cycle looks at it again
        return {"task": index, "name": name, "state": task_state, "code": INVALID_SPEC,
                "message": task_reason.removeprefix(f"{INVALID_SPEC}:").strip(),
                "remedy": "fix the job file and submit it again (a quarantined job is never retried)",
                "blocking_job": None, "blocking_tenant": None, "cycle": None, "at": None}
    return {
        "task": index,
        "name": name,
        "state": task_state,
        "code": reason.code if reason else None,
        "message": reason.message if reason else _no_reason(task_state),
        "remedy": reason.remedy if reason else "",
        "blocking_job": blocking.get(reason.blocking_job, reason.blocking_job) if reason else None,
        "blocking_tenant": reason.blocking_tenant if reason else None,
        "cycle": reason.cycle if reason else None,
        "at": reason.at.isoformat() if reason else None,
    }


def _no_reason(task_state: str) -> str:
    if task_state == "pending":
        return "no scheduling cycle has considered it yet (is `metasched serve` running?)"
    return f"not waiting ({task_state})"
