"""Inventory: sinfo + topology -> NodeState, a version that ignores allocation, usage kept apart."""

import json
from dataclasses import replace

import pytest

from meta.model.resources import ResourceVector
from slurm_bridge.inventory import build_inventory, inventory_version, node_usage
from slurm_bridge.parse.sinfo import parse_sinfo_json
from slurm_bridge.parse.topology import parse_topology


@pytest.fixture
def sinfo(captured):
    return captured("sinfo.json").read_text()


@pytest.fixture
def inventory(sinfo, captured):
    return build_inventory(parse_sinfo_json(sinfo), parse_topology(captured("topology.txt").read_text()))


def _edit(sinfo: str, name: str, **changes) -> list:
    """_edit returns parsed sinfo nodes with one node's JSON fields changed."""
    document = json.loads(sinfo)
    for node in document["nodes"]:
        if node["name"] == name:
            node.update(changes)
    return parse_sinfo_json(json.dumps(document))


def test_node_states(inventory):
    a100 = inventory.node("a100n1")
    assert a100.capacity == ResourceVector(cpus=32, memory=256000, gpus=8, gpu_type="a100")
    assert a100.partitions == ("a100", "gpu") and a100.switch == "leaf1"
    assert a100.features == frozenset({"a100"})
    t4n2 = inventory.node("t4n2")
    assert t4n2.drained and t4n2.healthy and not t4n2.schedulable()
    assert inventory.node("h100n2").switch == "leaf2"
    assert inventory.switch_parent == {"leaf1": "spine", "leaf2": "spine"}


def test_version_ignores_allocation(sinfo):
    base = build_inventory(parse_sinfo_json(sinfo))
    busier = build_inventory(
        _edit(sinfo, "a100n2", alloc_cpus=30, alloc_memory=100000, gres_used="gpu:a100:8(IDX:0-7)")
    )
    assert busier.version == base.version
    assert busier.usage != base.usage


def test_version_changes_with_health_and_capacity(sinfo):
    base = build_inventory(parse_sinfo_json(sinfo)).version
    down = build_inventory(_edit(sinfo, "a100n1", state="down", state_flags=["NOT_RESPONDING"])).version
    smaller = build_inventory(_edit(sinfo, "a100n1", gres="gpu:a100:4")).version
    drained = build_inventory(_edit(sinfo, "a100n1", state_flags=["DRAIN"])).version
    assert len({base, down, smaller, drained}) == 4


def test_version_is_stable_and_order_independent(inventory):
    assert inventory_version(inventory.nodes) == inventory_version(tuple(reversed(inventory.nodes)))
    assert 0 <= inventory.version < 2**63


def test_usage_keeps_three_numbers_apart(sinfo):
    (node,) = [n for n in parse_sinfo_json(sinfo) if n.name == "a100n1"]
    usage = node_usage(node, gpu_utilization=0.01)
    assert usage.allocatable.gpus == 8
    assert usage.allocated.gpus == 8 and usage.allocated.cpus == 1
    # A nearly idle GPU sample never frees what Slurm has allocated.
    assert usage.measured_gpu_utilization == 0.01
    assert usage.unallocated().gpus == 0
    assert usage.unallocated().cpus == 31


def test_down_node_has_nothing_allocatable(sinfo):
    nodes = _edit(sinfo, "t4n1", state="down", state_flags=["NOT_RESPONDING"])
    usage = {u.node: u for u in build_inventory(nodes).usage}
    assert usage["t4n1"].allocatable.is_zero()
    assert usage["t4n2"].allocatable.gpus == 4  # drained: running work still counts against it


def test_untyped_and_mixed_gpus(sinfo):
    inv = build_inventory(_edit(sinfo, "t4n1", gres="gpu:4") + [])
    assert inv.node("t4n1").capacity.gpu_type is None and inv.node("t4n1").capacity.gpus == 4
    mixed = build_inventory(_edit(sinfo, "t4n1", gres="gpu:t4:2,gpu:a10:6"))
    assert (mixed.node("t4n1").capacity.gpus, mixed.node("t4n1").capacity.gpu_type) == (6, "a10")
    assert replace(mixed.node("t4n1"), healthy=False).schedulable() is False
