"""Why did X run before my job (``metasched explain JOB --history``): answers from the decision log.

For a job the caller may see: the placements of other jobs made while it waited (newest first,
bounded), each with the winner's order key, this job's key in that cycle and why the winner
went first; and the holds and preemptions that touched it. This job's key is the one recorded
when the decision listed it as an alternative, otherwise rebuilt from the cycle's context (its
tenant's share at cycle start and the ordering knobs) with the policy's own ``key_for``.

Other jobs are named as ``explain`` names them: by short id and tenant, nothing else (no job
name, no owner, no task ids, no alternatives beyond this job).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from meta.model.kinds import JobKind
from meta.model.spec import InferenceSpec, spec_from_json
from meta.policy.decisions import HOLD, PLACE, PREEMPT, CycleContext, OrderKey, key_for, why_won
from meta.policy.snapshot import PendingTask
from meta.store.models import Attempt, DecisionRow, Job, JobSpecRow, Task

CONTEXT = "cycle"
MAX_LIMIT = 200
_SCAN = 2_000  # hold rows read to find the ones that kept this job waiting


def job_history(session: Session, job: Job, limit: int = 20) -> dict[str, Any]:
    """job_history is what ran before the job while it waited, and what held or preempted it."""
    limit = max(1, min(limit, MAX_LIMIT))
    tasks = list(session.execute(select(Task.id, Task.state).where(Task.job_id == job.id)))
    task_ids = {t for t, _ in tasks}
    waiting = any(state == "pending" for _, state in tasks)
    start = job.submitted_at
    end = None if waiting else session.scalar(select(func.max(Attempt.created_at)).where(Attempt.job_id == job.id))
    window = [DecisionRow.at >= start] + ([DecisionRow.at <= end] if end is not None else [])
    placed = list(session.scalars(
        select(DecisionRow).where(DecisionRow.kind == PLACE, DecisionRow.job_id != job.id, *window)
        .order_by(DecisionRow.id.desc()).limit(limit)))  # fmt: skip
    total = session.scalar(select(func.count()).select_from(DecisionRow).where(
        DecisionRow.kind == PLACE, DecisionRow.job_id != job.id, *window))  # fmt: skip
    own = list(session.scalars(
        select(DecisionRow).where(or_(DecisionRow.job_id == job.id, DecisionRow.other_job == job.id))
        .where(DecisionRow.kind != CONTEXT).order_by(DecisionRow.id.desc()).limit(limit)))  # fmt: skip
    holds = [r for r in session.scalars(
        select(DecisionRow).where(DecisionRow.kind == HOLD, DecisionRow.job_id != job.id, *window)
        .order_by(DecisionRow.id.desc()).limit(_SCAN)) if _listed(r, task_ids)][:limit]  # fmt: skip
    contexts = _contexts(session, {r.cycle for r in placed})
    held = _own_holds(session, job.id, {r.cycle for r in placed})
    task = _as_pending(session, job, next(iter(sorted(task_ids)), ""))
    labels = _labels(session, {r.job_id for r in placed + own + holds} | {r.other_job for r in own})
    ran = [_ran_before(r, task, task_ids, contexts.get(r.cycle), labels, held.get(r.cycle)) for r in placed]
    touching = [_touching(r, job.id, labels) for r in own] + [_kept(r, task_ids, labels) for r in holds]
    touching.sort(key=lambda t: t["cycle"], reverse=True)
    return {"job": job.short_id, "tenant": job.tenant, "waiting": waiting, "since": _iso(start),
            "until": _iso(end), "placed_while_waiting": total, "ran_before": ran, "touching": touching[:limit]}


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _listed(row: DecisionRow, task_ids: set[str]) -> bool:
    """_listed tells whether one of the job's tasks is among the row's alternatives."""
    return any(a.get("task") in task_ids for a in row.record.get("alternatives", ()))


def _contexts(session: Session, cycles: set[int]) -> dict[int, CycleContext]:
    if not cycles:
        return {}
    rows = session.execute(select(DecisionRow.cycle, DecisionRow.record).where(
        DecisionRow.kind == CONTEXT, DecisionRow.cycle.in_(sorted(cycles))))  # fmt: skip
    return {cycle: CycleContext.from_json(record) for cycle, record in rows}


def _own_holds(session: Session, job_id: str, cycles: set[int]) -> dict[int, dict[str, Any]]:
    """_own_holds is the detail of the job's own hold in each of these cycles (nodes, planned start)."""
    if not cycles:
        return {}
    rows = session.execute(select(DecisionRow.cycle, DecisionRow.record).where(
        DecisionRow.kind == HOLD, DecisionRow.job_id == job_id, DecisionRow.cycle.in_(sorted(cycles))))  # fmt: skip
    return {cycle: record.get("detail", {}) for cycle, record in rows}


def backfilled_past(winner_nodes: list[str], hold: dict[str, Any] | None) -> str:
    """backfilled_past says why a placement could go past this job, which was ahead in line, without delaying it."""
    if not hold or hold.get("planned_start") is None:
        return ("backfilled: this job was ahead in line but did not fit the free capacity then, "
                "and no nodes were held for its start in that cycle")  # fmt: skip
    start = datetime.fromtimestamp(float(hold["planned_start"]), UTC).strftime("%H:%M:%S UTC")
    if not set(winner_nodes) & set(hold.get("nodes") or ()):
        return (f"backfilled: this job was ahead in line but could not start yet (nodes held for it from {start}); "
                "the winner ran on other nodes")  # fmt: skip
    return (f"backfilled: this job was ahead in line but could not start before {start}, when its held nodes free "
            "up; the winner ends before then or uses only what the hold leaves spare")  # fmt: skip


def _labels(session: Session, job_ids: set[str | None]) -> dict[str, tuple[str, str]]:
    """_labels maps job ids to (short id, tenant): the names explain shows for any job."""
    ids = sorted(j for j in job_ids if j)
    if not ids:
        return {}
    return {i: (short, tenant) for i, short, tenant in session.execute(
        select(Job.id, Job.short_id, Job.tenant).where(Job.id.in_(ids)))}  # fmt: skip


def _as_pending(session: Session, job: Job, task_id: str) -> PendingTask | None:
    """_as_pending describes the job's waiting task to the policy's key function (None if its spec is unreadable)."""
    row = session.get(JobSpecRow, job.id)
    try:
        spec = spec_from_json(row.spec_json) if row is not None else None
    except Exception:  # noqa: BLE001 - a spec the current rules refuse: keys are shown as recorded only
        spec = None
    if spec is None:
        return None
    deadline = spec.deadline if isinstance(spec, InferenceSpec) else None
    return PendingTask(task_id=task_id, job_id=job.id, tenant=job.tenant, kind=JobKind(job.kind),
                       priority_class=job.priority_class, submit_time=job.submitted_at.timestamp(),
                       per_worker=spec.worker_resources(), workers=spec.workers_per_task(),
                       runtime_estimate_s=spec.time_limit_s, deadline=deadline.timestamp() if deadline else None,
                       job_name=job.short_id)  # fmt: skip


def _guaranteed(task: PendingTask, context: CycleContext) -> bool | None:
    """_guaranteed is whether the task fitted inside its tenant's guarantee at cycle start (None: none set)."""
    if not any(t.get("room") for t in context.tenants.values()):
        return None
    room = context.tenants.get(task.tenant, {}).get("room") or {}
    r = task.per_worker
    keys = ([r.gpu_type] if r.gpus and r.gpu_type else []) + ["*"]
    return bool(r.gpus) and any(room.get(k, 0) >= 1 for k in keys)


def _ran_before(row: DecisionRow, task: PendingTask | None, task_ids: set[str], context: CycleContext | None,
                labels: dict[str, tuple[str, str]], held: dict[str, Any] | None = None) -> dict[str, Any]:
    """_ran_before is one placement made while the job waited: both keys and why the winner went first."""
    winner = OrderKey.from_json(row.record["key"])
    mine, source, why = None, "unknown", "the cycle's context has been pruned: the job's key cannot be rebuilt"
    listed = next((a for a in row.record.get("alternatives", ()) if a.get("task") in task_ids), None)
    config = context.config() if context is not None else None
    if listed is not None:
        mine, source = OrderKey.from_json(listed["key"]), "recorded"
        lost = listed["lost"]
        why = lost.removeprefix("behind in line: ") if lost.startswith("behind in line: ") else (
            f"backfilled: this job was ahead in line but did not fit ({lost.rsplit(': ', 1)[-1]})")
    elif task is not None and context is not None:
        tenant = context.tenants.get(task.tenant, {})
        mine = key_for(task, config, row.at.timestamp(), float(tenant.get("share", 0.0)),
                       float(tenant.get("usage", 0.0)), _guaranteed(task, context))  # fmt: skip
        source = "rebuilt"
        why = why_won(winner, mine, config)
        if why.startswith("backfilled"):
            why = backfilled_past(row.record.get("detail", {}).get("nodes") or [], held)
    short, tenant_name = labels.get(row.job_id, (row.record.get("label", "?"), row.tenant))
    return {"cycle": row.cycle, "at": _iso(row.at), "job": short, "tenant": tenant_name,
            "key": winner.to_json(), "your_key": mine.to_json() if mine else None, "your_key_source": source,
            "why": why, "backfilled": bool(row.record.get("detail", {}).get("backfilled"))}  # fmt: skip


def _touching(row: DecisionRow, job_id: str, labels: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """_touching is a decision about the job itself: placed, held for it, preempting for it, or preempted."""
    detail = row.record.get("detail", {})
    if row.kind == PREEMPT and row.other_job == job_id:
        short, tenant = labels.get(row.job_id or "", ("?", row.tenant))
        what, other = "preempted: its attempt was evicted for another job", {"job": short, "tenant": tenant}
    else:
        what = {PLACE: "placed", HOLD: "nodes held for it", PREEMPT: "a job was preempted for it"}[row.kind]
        other = None
        if row.kind == PREEMPT:
            short, tenant = labels.get(row.other_job or "", ("?", detail.get("victim_tenant")))
            other = {"job": short, "tenant": tenant}
    shown = {k: detail[k] for k in ("nodes", "node_count", "planned_start", "backfilled", "lost_gpu_seconds",
                                    "kept_from_gangs") if k in detail}  # fmt: skip
    return {"cycle": row.cycle, "at": _iso(row.at), "decision": row.kind, "what": what, "other": other,
            "reason": row.record.get("reason", ""), "key": row.record.get("key"), "detail": shown}  # fmt: skip


def _kept(row: DecisionRow, task_ids: set[str], labels: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """_kept is a hold for another job that kept this one waiting."""
    short, tenant = labels.get(row.job_id or "", (row.record.get("label", "?"), row.tenant))
    listed = next(a for a in row.record.get("alternatives", ()) if a.get("task") in task_ids)
    return {"cycle": row.cycle, "at": _iso(row.at), "decision": HOLD, "what": "kept waiting by a hold for another job",
            "other": {"job": short, "tenant": tenant}, "reason": listed["lost"], "key": row.record.get("key"),
            "detail": {"planned_start": row.record.get("detail", {}).get("planned_start")}}  # fmt: skip
