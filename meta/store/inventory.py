"""The latest inventory, kept in the store so the submit API can reject never-feasible specs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from meta.model.durations import utcnow
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
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
    session: Session,
    nodes: Sequence[NodeState],
    version: int,
    switch_parent: dict[str, str],
    qos_names: Sequence[str] | None = None,
) -> None:
    """save_inventory replaces the stored inventory when its version (or the QOS list) changed.

    ``qos_names`` None means "not read this time": the stored list stays as it is.
    """
    # only the version and the QOS list: loading the row would decode every node's JSON each period
    stored = session.execute(
        select(InventoryRecord.version, InventoryRecord.qos_names).where(InventoryRecord.id == 1)
    ).first()
    same_qos = qos_names is None or (stored is not None and stored.qos_names == sorted(qos_names))
    if stored is not None and stored.version == str(version) and same_qos:
        return
    values: dict[str, Any] = {
        "version": str(version),
        "nodes": [_node_json(n) for n in nodes],
        "switch_parent": dict(switch_parent),
        "at": utcnow(),
    }
    if qos_names is not None:
        values["qos_names"] = sorted(qos_names)
    if stored is None:
        insert_ignore(session, InventoryRecord, id=1, **values)
        return
    session.execute(update(InventoryRecord).where(InventoryRecord.id == 1).values(**values))


def load_qos_names(session: Session) -> set[str] | None:
    """load_qos_names returns the QOS names Slurm's accounting knows, or None if never read."""
    row = session.get(InventoryRecord, 1)
    return None if row is None or row.qos_names is None else set(row.qos_names)


def load_nodes(session: Session) -> list[NodeState] | None:
    """load_nodes returns the stored inventory's nodes, or None if no daemon ever stored one."""
    row = session.get(InventoryRecord, 1)
    return None if row is None else [_node_of(n) for n in row.nodes]
