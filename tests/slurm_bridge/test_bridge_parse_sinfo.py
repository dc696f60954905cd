"""sinfo --json parsing: states and flags, typed gres, used gres, dedupe."""

import json

import pytest

from slurm_bridge.errors import SlurmParseError, SlurmTransient
from slurm_bridge.parse.sinfo import parse_sinfo_json


@pytest.fixture
def nodes(captured):
    return {node.name: node for node in parse_sinfo_json(captured("sinfo.json").read_text())}


def test_drained_node_is_not_schedulable(nodes):
    node = nodes["t4n2"]
    assert node.drained and node.healthy and not node.schedulable
    assert node.reason == "test"


def test_reserved_flag(nodes):
    assert nodes["h100n2"].condition.reserved
    assert nodes["h100n2"].schedulable


def test_gres_and_gres_used(nodes):
    t4 = nodes["t4n1"]
    assert (t4.gres[0].name, t4.gres[0].type, t4.gres[0].count) == ("gpu", "t4", 4)
    assert 0 < t4.gres_used[0].count == len(t4.gres_used[0].indices) <= 4
    assert (nodes["a100n1"].gres_used[0].count, nodes["a100n1"].gres_used[0].indices) == (8, tuple(range(8)))
    assert (nodes["t4n2"].gres_used[0].count, nodes["t4n2"].gres_used[0].indices) == (0, ())


def test_every_other_node_is_schedulable(nodes):
    # PLANNED (backfill) or RESERVED flags do not make a node unhealthy.
    assert {name for name, node in nodes.items() if node.schedulable} == {
        "a100n1",
        "a100n2",
        "h100n1",
        "h100n2",
        "t4n1",
    }


def test_cpu_memory_partitions_features(nodes):
    node = nodes["a100n1"]
    assert (node.cpus, node.real_memory_mib) == (32, 256000)
    assert (node.alloc_cpus, node.alloc_memory_mib) == (1, 2000)  # the gang's one task per node
    assert node.partitions == ("gpu", "a100")
    assert node.features == frozenset({"a100"})
    assert node.state == "MIXED"


def test_duplicate_nodes_are_merged(reference):
    document = json.loads(reference("sinfo.json").read_text())
    first = dict(document["nodes"][0], partitions=["extra"])
    document["nodes"].append(first)
    nodes = parse_sinfo_json(json.dumps(document))
    assert len(nodes) == 6
    assert nodes[0].partitions == ("gpu", "a100", "extra")


@pytest.mark.parametrize(
    ("state", "flags", "healthy", "drained"),
    [
        ("idle", [], True, False),
        ("idle", ["DRAIN"], True, True),
        ("mixed", ["DRAIN"], True, True),
        ("down", ["NOT_RESPONDING"], False, False),
        ("idle", ["NOT_RESPONDING"], False, False),
        ("allocated", ["FAIL"], False, False),
        (["IDLE", "DRAIN"], [], True, True),
        ("drained", [], True, True),
    ],
)
def test_state_flags(state, flags, healthy, drained):
    payload = {"nodes": [{"name": "n1", "state": state, "state_flags": flags}]}
    (node,) = parse_sinfo_json(json.dumps(payload))
    assert (node.healthy, node.drained) == (healthy, drained)


@pytest.mark.parametrize("garbage", ["", "{", '{"nodes": 3}', '{"nodes": [{"state": "idle"}]}', "[1]"])
def test_garbage_raises(garbage):
    with pytest.raises(SlurmParseError):
        parse_sinfo_json(garbage)


def test_controller_down_is_transient_not_empty(reference):
    with pytest.raises(SlurmTransient, match="Unspecified error"):
        parse_sinfo_json(reference("sinfo-controller-down.json").read_text())
