"""The site as the store last saw it, for replays: the daemon's inventory as a simulated cluster, and the tenants.

Nodes of the same shape under the same leaf switch and in the same partitions become one
NodeGroup; the inventory's switch tree is kept as it is. Nodes drained or unhealthy when the
inventory was saved are counted as up (the inventory is the latest one, not the window's).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from meta.model.nodes import NodeState
from meta.sim.cluster import ClusterSpec, NodeGroup
from meta.store.inventory import load_nodes
from meta.store.models import CycleRecord, InventoryRecord, Tenant


@dataclass(frozen=True, slots=True)
class TenantQuota:
    """TenantQuota is a tenant's fair-share weight and GPU quotas (GPU type or "*" → GPUs)."""

    weight: float
    guaranteed: dict[str, int] = field(default_factory=dict)
    limits: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Site:
    """Site is the stored inventory (None when no daemon saved one), the tenants and the daemon's last cycle."""

    nodes: list[NodeState] | None
    switch_parent: dict[str, str]
    inventory_at: datetime | None
    tenants: dict[str, TenantQuota]
    last_cycle_at: datetime | None = None  # the store knows nothing that ran after it (None: no cycle recorded)

    def weights(self) -> dict[str, float]:
        """weights is each tenant's fair-share weight."""
        return {name: quota.weight for name, quota in self.tenants.items()}


def read_site(session: Session) -> Site:
    """read_site reads the stored inventory, the tenants and the time of the last cycle."""
    record = session.get(InventoryRecord, 1)
    nodes = load_nodes(session) if record is not None else None  # the submit API's parsing
    tenants = {
        row.name: TenantQuota(float(row.weight), dict(row.guaranteed or {}), dict(row.limits or {}))
        for row in session.scalars(select(Tenant).order_by(Tenant.name))
    }
    last = session.scalar(select(func.max(CycleRecord.at)))
    return Site(nodes, dict(record.switch_parent or {}) if record else {}, record.at if record else None, tenants, last)


def site_cluster(nodes: Sequence[NodeState], switch_parent: dict[str, str], name: str = "site") -> ClusterSpec:
    """site_cluster groups identical nodes (shape, switch, partitions) into the NodeGroups of a ClusterSpec."""
    groups: dict[tuple, int] = defaultdict(int)
    for node in nodes:
        cap = node.capacity
        groups[(cap.gpu_type or "", cap.gpus, cap.cpus, cap.memory_mib, node.switch or "", tuple(node.partitions))] += 1
    node_groups = []
    for index, (key, count) in enumerate(sorted(groups.items())):
        gpu_type, gpus, cpus, memory, switch, partitions = key
        node_groups.append(NodeGroup(
            name=f"{gpu_type or 'cpu'}x{gpus}-{index}", count=count, gpus=gpus, gpu_type=gpu_type or None, cpus=cpus,
            memory=memory, switch=switch or None, partitions=list(partitions),
        ))
    return ClusterSpec(name=name, node_groups=node_groups, switch_parent=dict(switch_parent))


def binding_quotas(tenants: dict[str, TenantQuota], cluster: ClusterSpec) -> list[str]:
    """binding_quotas names the guarantees and the limits below the cluster's GPUs: the simulator does not apply them."""
    by_type = cluster.gpus_by_type()
    total = cluster.total_gpus()
    found = []
    for name, quota in sorted(tenants.items()):
        for gpu_type, gpus in sorted(quota.guaranteed.items()):
            if gpus > 0:
                found.append(f"{name} guaranteed {gpu_type}:{gpus}")
        for gpu_type, gpus in sorted(quota.limits.items()):
            if gpus < (total if gpu_type == "*" else by_type.get(gpu_type, 0)):
                found.append(f"{name} limit {gpu_type}:{gpus}")
    return found
