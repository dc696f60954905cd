"""Inventory: sinfo + topology -> NodeState, a version that ignores allocation, usage kept apart."""

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meta.model.resources import ResourceVector
from slurm_bridge.inventory import InventoryMemo, build_inventory, inventory_version, node_usage
from slurm_bridge.parse.nodestate import node_condition
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


_EDITS = st.sampled_from(["alloc", "gpus", "drain", "down", "gone", "switch", "same"])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(_EDITS, st.integers(0, 5)), min_size=1, max_size=12))
def test_memo_builds_what_build_inventory_builds(captured, edits):
    """Period after period, the memo's inventory equals one built from scratch, whatever changed on which node."""
    nodes = parse_sinfo_json(captured("sinfo.json").read_text())
    topology = parse_topology(captured("topology.txt").read_text())
    memo = InventoryMemo()
    assert memo.build(nodes, topology) == build_inventory(nodes, topology)
    for edit, at in edits:
        nodes, topology = _apply(nodes, topology, edit, at % len(nodes))
        built = memo.build(nodes, topology)
        assert built == build_inventory(nodes, topology)


def _apply(nodes: list, topology: dict, edit: str, at: int) -> tuple[list, dict]:
    """_apply changes one node the way a period may find it changed."""
    node = nodes[at]
    changed = {
        "alloc": lambda: replace(node, alloc_cpus=node.alloc_cpus + 1, alloc_memory_mib=node.alloc_memory_mib + 1024),
        "gpus": lambda: replace(node, gres=tuple(replace(g, count=g.count + 1) for g in node.gres)),
        "drain": lambda: replace(node, condition=node_condition("IDLE", ["DRAIN"])),
        "down": lambda: replace(node, condition=node_condition("DOWN", [])),
        "same": lambda: replace(node),
    }
    if edit == "gone":
        return nodes[:at] + nodes[at + 1:], topology
    if edit == "switch":  # the switch tree lost its first switch: leaves move, versions change
        return nodes, dict(list(topology.items())[1:])
    return nodes[:at] + [changed[edit]()] + nodes[at + 1:], topology
