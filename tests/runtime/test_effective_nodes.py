"""effective_nodes: capacity Slurm gave to jobs metasched does not own is not planned on."""

from __future__ import annotations

from dataclasses import replace

from meta.cycle.inventory.reader import effective_nodes
from meta.model.resources import ResourceVector
from slurm_bridge.fake import sinfo_node
from slurm_bridge.inventory import build_inventory
from slurm_bridge.parse.tres import Gres


def _busy(name: str, gpus: int, cpus: int, mem: int, **kw):
    node = sinfo_node(name, **kw)
    return replace(node, gres_used=(Gres("gpu", "a100", gpus),) if gpus else (), alloc_cpus=cpus, alloc_memory_mib=mem)


def _ours(gpus: int, cpus: float, mem: int) -> ResourceVector:
    return ResourceVector.model_construct(cpus=cpus, memory_mib=mem, gpus=gpus, gpu_type="a100")


def test_foreign_allocation_is_removed_from_capacity() -> None:
    inventory = build_inventory([_busy("node1", 3, 10, 1000), sinfo_node("node2")])
    nodes = {n.name: n for n in effective_nodes(inventory, {})}
    assert (nodes["node1"].capacity.gpus, nodes["node1"].capacity.cpus, nodes["node1"].capacity.memory_mib) == (
        5,
        54,
        512 * 1024 - 1000,
    )
    assert nodes["node1"].capacity.gpu_type == "a100"
    assert nodes["node2"].capacity.gpus == 8


def test_our_own_allocation_is_not_foreign() -> None:
    inventory = build_inventory([_busy("node1", 6, 12, 4096)])
    (node,) = effective_nodes(inventory, {"node1": _ours(4, 8, 4096)})
    assert (node.capacity.gpus, node.capacity.cpus, node.capacity.memory_mib) == (6, 60, 512 * 1024)


def test_ours_larger_than_slurms_allocation_never_adds_capacity() -> None:
    inventory = build_inventory([_busy("node1", 2, 4, 100)])
    (node,) = effective_nodes(inventory, {"node1": _ours(8, 64, 512 * 1024)})
    assert (node.capacity.gpus, node.capacity.cpus, node.capacity.memory_mib) == (8, 64, 512 * 1024)


def test_health_and_partitions_are_kept() -> None:
    drained = replace(_busy("node1", 1, 1, 1), condition=sinfo_node("x", state="IDLE", flags=["DRAIN"]).condition)
    (node,) = effective_nodes(build_inventory([drained]), {})
    assert node.drained and node.healthy and node.partitions == ("gpu",)
    assert node.capacity.gpus == 7
