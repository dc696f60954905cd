"""The latest inventory, kept in the store so the submit API can reject never-feasible specs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from meta.durations import utcnow
from meta.policy.feasibility import never_feasible
from meta.policy.snapshot import JobKind, NodeState, PendingTask, Topology
from meta.resources import ResourceVector
from meta.spec import AnySpec, TrainingSpec
from meta.store.db import Database
from meta.store.models import InventoryRecord
from meta.store.upsert import insert_ignore


def _node_json(node: NodeState) -> dict[str, Any]:
    return {
        "name": node.name,
        "capacity": node.capacity.model_dump(mode="json"),
        "partitions": list(node.partitions),
        "switch": node.switch,
        "healthy": node.healthy,
        "drained": node.drained,
        "features": sorted(node.features),
    }


def _node_of(data: dict[str, Any]) -> NodeState:
    return NodeState(
        name=data["name"],
        capacity=ResourceVector.model_validate(data["capacity"]),
        partitions=tuple(data.get("partitions", ())),
        switch=data.get("switch"),
        healthy=bool(data.get("healthy", True)),
        drained=bool(data.get("drained", False)),
        features=frozenset(data.get("features", ())),
    )


def save_inventory(
    session: Session, nodes: Sequence[NodeState], version: int, switch_parent: dict[str, str]
) -> None:
    """save_inventory replaces the stored inventory when its version changed."""
    row = session.get(InventoryRecord, 1)
    if row is not None and row.version == str(version):
        return
    values = {
        "version": str(version),
        "nodes": [_node_json(n) for n in nodes],
        "switch_parent": dict(switch_parent),
        "at": utcnow(),
    }
    if row is None:
        insert_ignore(session, InventoryRecord, id=1, **values)
        return
    for key, value in values.items():
        setattr(row, key, value)


def load_nodes(session: Session) -> list[NodeState] | None:
    """load_nodes returns the stored inventory's nodes, or None if no daemon ever stored one."""
    row = session.get(InventoryRecord, 1)
    return None if row is None else [_node_of(n) for n in row.nodes]


def spec_as_task(spec: AnySpec) -> PendingTask:
    """spec_as_task is the shape of one of the spec's tasks, for feasibility checks at submit."""
    return PendingTask(
        task_id="submit-check",
        job_id="submit-check",
        tenant=spec.tenant,
        kind=JobKind(spec.kind),
        priority_class=spec.effective_priority_class().value,
        submit_time=0.0,
        per_worker=spec.worker_resources(),
        workers=spec.workers_per_task(),
        runtime_estimate_s=spec.time_limit_s,
        topology=spec.topology if isinstance(spec, TrainingSpec) else Topology.NONE,
        partition=spec.partition,
    )


class InventoryFeasibility:
    """InventoryFeasibility rejects at submit what no node of the stored inventory could ever host."""

    def __init__(self, db: Database):
        self.db = db

    def __call__(self, spec: AnySpec) -> str | None:
        """__call__ returns why the spec can never run, or None when it can (or nothing is known)."""
        with self.db.session() as session:
            nodes = load_nodes(session)
        if not nodes:
            return None
        reason = never_feasible(spec_as_task(spec), nodes)
        if reason is None:
            return None
        remedy = f" ({reason.remedy})" if reason.remedy else ""
        return f"{reason.code.value}: {reason.message}{remedy}"
