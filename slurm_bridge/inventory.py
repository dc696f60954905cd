"""Inventory: sinfo (+ topology) -> NodeState list, an inventory version, and per-node usage.

Three numbers are kept apart on purpose (docs/architecture.md, "Capacity: allocatable, reserved, measured"):

- **allocatable**: configured capacity of a healthy node. This is what placements may use.
- **allocated**: what Slurm says is allocated right now (alloc_cpus, alloc_memory, gres_used),
  including jobs submitted to Slurm directly.
- **measured utilization**: a sample (cpu load, GPU utilisation) for dashboards and packing hints.

A low utilization sample never frees reserved or allocated capacity: an idle-looking GPU may be
loading a checkpoint, and the attempt holding it still owns it until Slurm reports it ended.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from meta.model.nodes import NodeState
from meta.model.resources import ZERO, ResourceVector
from slurm_bridge.parse.sinfo import SinfoNode
from slurm_bridge.parse.topology import Switch, leaf_of_node, switch_parents
from slurm_bridge.parse.tres import Gres, gpus_by_type


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """NodeUsage keeps a node's allocatable capacity, Slurm's allocation and measured load apart."""

    node: str
    allocatable: ResourceVector
    allocated: ResourceVector
    measured_cpu_load: float | None = None
    measured_gpu_utilization: float | None = None  # 0..1, when a GPU exporter provides it

    def unallocated(self) -> ResourceVector:
        """unallocated is allocatable minus Slurm's allocation; measured utilization plays no part."""
        return ResourceVector.model_construct(
            cpus=max(0.0, self.allocatable.cpus - self.allocated.cpus),
            memory_mib=max(0, self.allocatable.memory_mib - self.allocated.memory_mib),
            gpus=max(0, self.allocatable.gpus - self.allocated.gpus),
            gpu_type=self.allocatable.gpu_type,
            storage_gib=self.allocatable.storage_gib,
            network=self.allocatable.network,
        )


@dataclass(frozen=True, slots=True)
class Inventory:
    """Inventory is the scheduler's node list at one version, with usage and the switch tree."""

    nodes: tuple[NodeState, ...]
    version: int
    usage: tuple[NodeUsage, ...] = ()
    switch_parent: dict[str, str] = field(default_factory=dict)

    def node(self, name: str) -> NodeState | None:
        """node looks a node up by name."""
        return next((node for node in self.nodes if node.name == name), None)


def _gpus(gres: Iterable[Gres]) -> tuple[int, str | None]:
    """_gpus picks a node's GPU count and type; on a mixed-type node the most numerous type wins."""
    totals = gpus_by_type(gres)
    if not totals:
        return 0, None
    gpu_type, count = max(totals.items(), key=lambda item: (item[1], item[0] or ""))
    return count, gpu_type


def capacity(node: SinfoNode) -> ResourceVector:
    """capacity is a node's configured resources as a ResourceVector (typed GPUs from gres)."""
    return _capacity(node.cpus, node.real_memory_mib, node.gres, node.tmp_disk_mib)


# A node's configuration rarely changes: its TRES are parsed once per distinct configuration, not
# twice per node per period (4,000 nodes: ~40 ms of validation; issue 24). ResourceVector is frozen.
@lru_cache(maxsize=4096)
def _capacity(cpus: float, memory_mib: int, gres: tuple[Gres, ...], tmp_disk_mib: int) -> ResourceVector:
    """_capacity is ``capacity`` of one node configuration."""
    gpus, gpu_type = _gpus(gres)
    return ResourceVector(cpus=cpus, memory=memory_mib, gpus=gpus, gpu_type=gpu_type, storage=tmp_disk_mib // 1024)


def node_state(node: SinfoNode, switch: str | None = None) -> NodeState:
    """node_state converts one sinfo node into the scheduler's NodeState."""
    return NodeState(
        name=node.name,
        capacity=capacity(node),
        partitions=tuple(sorted(node.partitions)),
        switch=switch,
        healthy=node.healthy,
        drained=node.drained,
        features=node.features,
    )


def node_usage(node: SinfoNode, gpu_utilization: float | None = None) -> NodeUsage:
    """node_usage splits one node into allocatable, allocated and measured numbers."""
    gpus_used, _ = _gpus(node.gres_used)
    cap = capacity(node)
    allocated = ResourceVector.model_construct(
        cpus=float(node.alloc_cpus),
        memory_mib=node.alloc_memory_mib,
        gpus=gpus_used,
        gpu_type=cap.gpu_type,
        storage_gib=0,
        network=None,
    )
    return NodeUsage(
        node=node.name,
        # Drained nodes stay allocatable: their running work still counts against them; the
        # scheduler keeps new work away through NodeState.schedulable().
        allocatable=cap if node.healthy else ZERO,
        allocated=allocated,
        measured_cpu_load=node.cpu_load,
        measured_gpu_utilization=gpu_utilization,
    )


def inventory_version(nodes: Sequence[NodeState]) -> int:
    """inventory_version is a stable hash of capacity and health facts (not of allocation)."""
    facts = [
        [
            node.name,
            node.capacity.cpus,
            node.capacity.memory_mib,
            node.capacity.gpus,
            node.capacity.gpu_type,
            node.capacity.storage_gib,
            sorted(node.partitions),
            node.switch,
            node.healthy,
            node.drained,
            sorted(node.features),
        ]
        for node in sorted(nodes, key=lambda n: n.name)
    ]
    digest = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1  # 63 bits: fits a signed BIGINT column


def build_inventory(
    nodes: Sequence[SinfoNode],
    topology: Mapping[str, Switch] | None = None,
    gpu_utilization: Mapping[str, float] | None = None,
) -> Inventory:
    """build_inventory turns sinfo nodes (and the switch tree) into an Inventory."""
    switches = dict(topology or {})
    leaf = leaf_of_node(switches)
    states = tuple(node_state(node, leaf.get(node.name)) for node in sorted(nodes, key=lambda n: n.name))
    utilization = gpu_utilization or {}
    usage = tuple(
        node_usage(node, utilization.get(node.name)) for node in sorted(nodes, key=lambda n: n.name)
    )
    return Inventory(states, inventory_version(states), usage, switch_parents(switches))


class InventoryMemo:
    """InventoryMemo builds each period's inventory, reusing a node's entries while sinfo reports it unchanged.

    A steady period changes the allocation of a few hundred of 4,000 nodes and the capacity of
    none: converting every node and hashing the whole list again each period cost ~40 ms
    (issue 24). The result equals ``build_inventory`` of the same input (tests compare them).
    """

    def __init__(self) -> None:
        self._nodes: dict[str, tuple[SinfoNode, str | None, NodeState, NodeUsage]] = {}
        self._version: tuple[tuple[NodeState, ...], int] | None = None

    def build(self, nodes: Sequence[SinfoNode], topology: Mapping[str, Switch] | None = None) -> Inventory:
        """build is ``build_inventory(nodes, topology)``, converting only the nodes that changed since the last call."""
        switches = dict(topology or {})
        leaf = leaf_of_node(switches)
        kept: dict[str, tuple[SinfoNode, str | None, NodeState, NodeUsage]] = {}
        for node in sorted(nodes, key=lambda n: n.name):
            switch = leaf.get(node.name)
            entry = self._nodes.get(node.name)
            if entry is None or entry[1] != switch or entry[0] != node:
                entry = (node, switch, self._state(node, switch, entry), node_usage(node))
            kept[node.name] = entry
        self._nodes = kept
        states = tuple(entry[2] for entry in kept.values())
        return Inventory(states, self._version_of(states), tuple(entry[3] for entry in kept.values()),
                         switch_parents(switches))  # fmt: skip

    @staticmethod
    def _state(node: SinfoNode, switch: str | None, entry: tuple | None) -> NodeState:
        """_state is the node's NodeState: the one kept when equal, so an unchanged list is the very same objects."""
        state = node_state(node, switch)
        return entry[2] if entry is not None and entry[2] == state else state

    def _version_of(self, states: tuple[NodeState, ...]) -> int:
        """_version_of is ``inventory_version``, hashed again only when a node's facts changed."""
        # tuples compare item by item, identity first: kept states make this a pointer walk
        if self._version is None or self._version[0] != states:
            self._version = (states, inventory_version(states))
        return self._version[1]
