"""Equivalence classes: identical nodes are filtered once per cycle, not once per node."""

from __future__ import annotations

from dataclasses import dataclass, field

from meta.model.nodes import NodeState


@dataclass(slots=True)
class NodeClass:
    """NodeClass is a set of nodes with the same capacity, partitions, features and health."""

    id: int
    gpu_type: str | None
    gpus: int
    cpus: float
    mem: int
    sto: int
    network: str | None
    partitions: frozenset[str]
    features: frozenset[str]
    schedulable: bool
    nodes: list[int] = field(default_factory=list)  # indices into the snapshot's node tuple


def class_key(node: NodeState) -> tuple:
    """class_key is what two nodes must share to be interchangeable for every filter."""
    c = node.capacity
    gpu_type = c.gpu_type if c.gpus else None
    return (gpu_type, c.gpus, float(c.cpus), c.memory_mib, c.storage_gib, c.network,
            frozenset(node.partitions), node.features, node.schedulable())


def build_classes(nodes: tuple[NodeState, ...]) -> tuple[list[NodeClass], list[int]]:
    """build_classes groups nodes into classes; returns the classes and each node's class id."""
    by_key: dict[tuple, NodeClass] = {}
    node_class: list[int] = []
    for index, node in enumerate(nodes):
        key = class_key(node)
        cls = by_key.get(key)
        if cls is None:
            gpu_type, gpus, cpus, mem, sto, network, partitions, features, ok = key
            cls = NodeClass(len(by_key), gpu_type, gpus, cpus, mem, sto, network, partitions, features, ok)
            by_key[key] = cls
        cls.nodes.append(index)
        node_class.append(cls.id)
    return list(by_key.values()), node_class
