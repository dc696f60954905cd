"""Cycle step 11, apply: one transaction, fenced by the leader epoch, capacity re-checked.

The plan was computed from a snapshot that may be a moment old. Before anything commits:
1. the leader lease row is locked and must still carry our epoch (a stale leader commits nothing);
2. each placement is re-checked against the live reservations read *now* (I5: reserved never
   exceeds allocatable on any node) and against the task still being pending;
3. attempts are created with leases and fresh fencing tokens; victims are marked for stopping;
4. every waiting task's typed reason is stored for ``metasched explain``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from meta.cycle.apply.reasons import ReasonMemo, store_reasons, this_period
from meta.cycle.lease import Leadership, fence
from meta.cycle.snapshot.build import share_to_json, totals_per_node
from meta.model.durations import utcnow
from meta.model.errors import ConcurrentModification, Conflict
from meta.model.nodes import NodeState
from meta.model.states import LIVE_ATTEMPT_STATES, AttemptState, IllegalTransition, TaskState
from meta.policy.plan import Plan
from meta.policy.snapshot import NodeShare
from meta.store import audit
from meta.store.chunks import among
from meta.store.lifecycle import DEFAULT_LEASE_S, NewAttempt, attempt_event, create_attempt, create_attempts
from meta.store.models import Attempt, CycleRecord, Job, Task, TaskReason

_LIVE = [state.value for state in LIVE_ATTEMPT_STATES]


@dataclass
class ApplyResult:
    """ApplyResult counts what a plan application actually committed."""

    cycle_id: int = 0
    created: list[str] = field(default_factory=list)  # attempt ids
    preempting: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # task id -> why the placement was dropped
    reasons_written: int = 0  # pending reasons that changed and were stored
    reasons_deferred: list[str] = field(default_factory=list)  # changed, left for the next periods


class NodeLedger:
    """NodeLedger tracks free capacity per node while placements are re-checked (I5)."""

    def __init__(self, nodes: Sequence[NodeState]):
        self._free: dict[str, list[float]] = {}
        self._gpu_type: dict[str, str | None] = {}
        for node in nodes:
            if node.schedulable():
                c = node.capacity
                self._free[node.name] = [c.cpus, c.memory_mib, c.gpus, c.storage_gib]
                self._gpu_type[node.name] = c.gpu_type

    def take(self, shares: Sequence[NodeShare], *, force: bool = False) -> bool:
        """take subtracts the shares if all fit (``force`` records existing reservations regardless)."""
        need = {node: [r.cpus, r.memory_mib, r.gpus, r.storage_gib] for node, r in totals_per_node(shares).items()}
        if not force:
            for node, amounts in need.items():
                free = self._free.get(node)
                if free is None or any(a > f + 1e-9 for a, f in zip(amounts, free, strict=True)):
                    return False
        for node, amounts in need.items():
            free = self._free.setdefault(node, [0.0, 0.0, 0.0, 0.0])
            for i, amount in enumerate(amounts):
                free[i] -= amount
        return True


    def hold(self, placement: Sequence[Mapping[str, Any]]) -> None:
        """hold records a live attempt's stored placement as taken, straight from its stored shares.

        The same as ``take(placement_shares(placement), force=True)`` without building a
        ResourceVector per share: the re-check reads every live attempt each period.
        """
        for share in placement:
            free = self._free.setdefault(share["node"], [0.0, 0.0, 0.0, 0.0])
            free[0] -= float(share.get("cpus", 0))
            free[1] -= int(share.get("memory_mib", 0))
            free[2] -= int(share.get("gpus", 0))
            free[3] -= int(share.get("storage_gib", 0))


def _ledger(session: Session, nodes: Sequence[NodeState]) -> NodeLedger:
    """_ledger is the free capacity per node in the store now, inside the fenced transaction (I5)."""
    ledger = NodeLedger(nodes)
    for placement in session.scalars(select(Attempt.placement).where(Attempt.state.in_(_LIVE))):
        ledger.hold(placement)
    return ledger


def apply_plan(
    session: Session,
    plan: Plan,
    leadership: Leadership,
    nodes: Sequence[NodeState],
    *,
    cycle_started: datetime,
    duration_s: float,
    pending_count: int,
    lease_s: float = DEFAULT_LEASE_S,
    job_of_task: Mapping[str, str] | None = None,
    memo: ReasonMemo | None = None,
) -> ApplyResult:
    """apply_plan commits a plan under the leader's fence; placements that no longer fit are skipped."""
    fence(session, leadership)
    result = ApplyResult()
    record = CycleRecord(
        epoch=leadership.epoch,
        inventory_version=plan.inventory_version,
        at=cycle_started,
        pending=pending_count,
        placed=0,
        preempted=0,
        duration_s=duration_s,
        fragmentation=_fragmentation(plan),
        held=[
            {"task_id": h.task_id, "job_id": h.job_id, "nodes": list(h.nodes), "planned_start": h.planned_start}
            | ({"preempting": True} if h.preempting else {})  # the freed nodes stay bound to it (keep_promises)
            for h in plan.held
        ],
    )
    session.add(record)
    session.flush()
    result.cycle_id = record.id
    if plan.placements:  # the I5 re-check reads every live placement: only when something is placed
        _place_all(session, plan, _ledger(session, nodes), record.id, leadership, lease_s, result)
    for preemption in plan.preemptions:
        if _preempt(session, preemption.attempt_id, preemption.reason, record.id):
            result.preempting.append(preemption.attempt_id)
            audit.record(
                session,
                f"scheduler/epoch-{leadership.epoch}",
                "preempt",
                preemption.attempt_id,
                tenant=_tenant_of_attempt(session, preemption.attempt_id),
                reason=preemption.reason,
                for_task=preemption.for_task,
                lost_gpu_seconds=round(preemption.lost_gpu_seconds, 1),
                cycle=record.id,
            )
    changed = plan.reasons
    if memo is not None:  # the daemon: only what changed, a bounded number per period
        changed, result.reasons_deferred = this_period(memo.changed(plan.reasons))
    result.reasons_written = store_reasons(session, changed, record.id, job_of_task or {}, utcnow())
    record.placed, record.preempted = len(result.created), len(result.preempting)
    return result


def _place_all(
    session: Session,
    plan: Plan,
    ledger: NodeLedger,
    cycle_id: int,
    leadership: Leadership,
    lease_s: float,
    result: ApplyResult,
) -> None:
    """_place_all creates the attempts of every placement still pending and still fitting.

    All of them with a few statements; if one changed underneath (a cancel, a concurrent
    creator) nothing of the bulk step stays and each is placed on its own instead.
    """
    ids = [p.task_id for p in plan.placements]
    states = dict(session.execute(select(Task.id, Task.state).where(among(session, Task.id, ids))).all()) if ids else {}
    wanted: list[NewAttempt] = []
    for placement in plan.placements:
        if states.get(placement.task_id) != TaskState.PENDING.value:
            result.skipped[placement.task_id] = "task is no longer pending"
        elif not ledger.take(placement.shares):
            result.skipped[placement.task_id] = "capacity changed since the snapshot"
        else:
            wanted.append(_new_attempt(placement.task_id, placement.shares))
    if not wanted:
        return
    stimulus = f"cycle:{cycle_id}:place"
    try:
        with session.begin_nested():
            created = create_attempts(session, wanted, stimulus, lease_s=lease_s, epoch=leadership.epoch)
    except (Conflict, ConcurrentModification, IllegalTransition):
        created = {}
        for one in wanted:
            attempt_id, why = _place(session, one, stimulus, leadership, lease_s)
            if why:
                result.skipped[one.task_id] = why
            else:
                created[one.task_id] = attempt_id
    result.created.extend(created.values())
    session.execute(delete(TaskReason).where(among(session, TaskReason.task_id, list(created))))


def _new_attempt(task_id: str, shares: Sequence[NodeShare]) -> NewAttempt:
    """_new_attempt describes the attempt a placement asks for, with the reason its task logs."""
    nodes = ",".join(sorted({s.node for s in shares}))
    return NewAttempt(task_id, [share_to_json(s) for s in shares], f"placed on {nodes}")


def _place(
    session: Session, wanted: NewAttempt, stimulus: str, leadership: Leadership, lease_s: float
) -> tuple[str, str]:
    """_place creates one attempt (when the bulk step could not): its id, or why it was not made."""
    try:
        with session.begin_nested():
            attempt = create_attempt(
                session, wanted.task_id, stimulus, placement=wanted.placement, lease_s=lease_s, reason=wanted.reason
            )
            attempt.epoch = leadership.epoch
    except (Conflict, ConcurrentModification, IllegalTransition) as exc:
        return "", str(exc)
    return attempt.id, ""


def _preempt(session: Session, attempt_id: str, reason: str, cycle_id: int) -> bool:
    """_preempt marks a victim for stopping: the actuator signals it, waits the grace, cancels it."""
    attempt = session.get(Attempt, attempt_id)
    if attempt is None or AttemptState(attempt.state) not in {
        AttemptState.RUNNING,
        AttemptState.LAUNCHING,
        AttemptState.CREATED,
    }:
        return False
    target = AttemptState.PREEMPTED if attempt.state == AttemptState.CREATED else AttemptState.STOPPING
    attempt_event(
        session,
        attempt_id,
        target,
        f"cycle:{cycle_id}:preempt",
        reason=f"preempted: {reason}",
        actor="scheduler",
        values={"stop_reason": "preempt"},
    )
    return True


def _tenant_of_attempt(session: Session, attempt_id: str) -> str | None:
    attempt = session.get(Attempt, attempt_id)
    job = session.get(Job, attempt.job_id) if attempt else None
    return job.tenant if job else None


def _fragmentation(plan: Plan) -> dict[str, object]:
    f = plan.fragmentation
    return {
        "free_gpus": f.free_gpus,
        "stranded_gpus": f.stranded_gpus,
        "largest_placeable_gang_gpus": f.largest_placeable_gang_gpus,
        "free_by_type": dict(f.free_by_type),
    }

