"""Inventory: the cycle-independent index of the nodes, built once per node tuple and reused.

The daemon and the simulator hand equal node tuples to cycle after cycle; classes, names,
switches and filter verdicts depend only on them, so they are memoised on equality (a pure
cache: the same input always gives the same index).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from meta.model.clusters import cluster_of, qualify
from meta.model.nodes import NodeState
from meta.policy.equivalence import NodeClass, build_classes


def leaf_name(switch: str | None, cluster: str = "") -> str:
    """leaf_name maps nodes without topology information onto one flat switch per cluster."""
    return switch or _cluster_root(cluster)


def _cluster_root(cluster: str) -> str:
    """_cluster_root is the top of a cluster's switch tree ('' on a single-cluster site): nothing spans two."""
    return qualify(cluster, "") if cluster else ""


@dataclass(slots=True)
class Inventory:
    """Inventory holds per-node static facts in plain lists, and the classes they fall into."""

    nodes: tuple[NodeState, ...]
    parents: dict[str, str]
    classes: list[NodeClass]
    node_class: list[int]
    names: list[str]
    index: dict[str, int]
    leaf: list[str]
    spine: list[str]
    cluster: list[str]  # the cluster each node is on ('' on a single-cluster site): a gang never spans two
    gpu_type: list[str | None]
    gpu: list[int]
    cpu: list[float]
    mem: list[int]
    sto: list[int]
    verdicts: dict = field(default_factory=dict)  # Shape -> Verdict, valid for this inventory
    ledger: Any = None  # capacity.Ledger: reservations of the last cycle on these nodes


def build_inventory(nodes: tuple[NodeState, ...], parents: Mapping[str, str]) -> Inventory:
    """build_inventory indexes a node tuple (without memoising)."""
    classes, node_class = build_classes(nodes)
    cluster = [cluster_of(n.name) for n in nodes]
    leaf = [leaf_name(n.switch, c) for n, c in zip(nodes, cluster, strict=True)]
    return Inventory(
        nodes=nodes,
        parents=dict(parents),
        classes=classes,
        node_class=node_class,
        names=[n.name for n in nodes],
        index={n.name: i for i, n in enumerate(nodes)},
        leaf=leaf,
        spine=[parents.get(x) or _cluster_root(c) for x, c in zip(leaf, cluster, strict=True)],
        cluster=cluster,
        gpu_type=[classes[c].gpu_type for c in node_class],
        gpu=[classes[c].gpus for c in node_class],
        cpu=[classes[c].cpus for c in node_class],
        mem=[classes[c].mem for c in node_class],
        sto=[classes[c].sto for c in node_class],
    )


_CACHE: list[Inventory] = []
_CACHE_SIZE = 4


def inventory_for(nodes: tuple[NodeState, ...], parents: Mapping[str, str]) -> Inventory:
    """inventory_for returns the memoised Inventory of this node tuple (or an equal one) and switch tree.

    Equal, not only identical: the daemon builds its node tuple anew each period, and an unchanged
    cluster must keep its index, verdicts and capacity ledger.
    """
    for inv in _CACHE:
        if (inv.nodes is nodes or inv.nodes == nodes) and inv.parents == parents:
            return inv
    inv = build_inventory(nodes, parents)
    _CACHE.insert(0, inv)
    del _CACHE[_CACHE_SIZE:]
    return inv
