"""Preset tests: the GPU counts match the trace READMEs."""

from __future__ import annotations

import pytest

from meta.sim.cluster import ClusterError, gang_shape, list_presets, load_cluster


def test_presets_exist():
    assert {"philly", "pai2023", "crux"} <= set(list_presets())


def test_philly_machine_list():
    spec = load_cluster("philly")
    assert spec.total_gpus() == 2490 and spec.node_count() == 552
    assert sorted(g.count for g in spec.node_groups) == [231, 321]
    assert spec.tenants["6214e9"] == 64


def test_pai_node_list():
    spec = load_cluster("pai2023")
    assert spec.total_gpus() == 6212 and spec.node_count() == 1523
    assert spec.gpus_by_type() == {
        "g2": 4392, "t4": 842, "g3": 312, "p100": 265, "v100m32": 204, "v100m16": 195, "a10": 2,
    }


def test_crux_topology():
    spec = load_cluster("crux")
    assert spec.node_count() == 847 and spec.total_gpus() == 847 * 8
    tree = spec.switch_tree()
    leaves = {node.switch for node in spec.iter_nodes()}
    # ASW names repeat under each PSW: a leaf is the (PSW, ASW) pair, 119 of them.
    assert len(leaves) == 119 and all(tree[leaf] in {"P8", "P10", "P12"} for leaf in leaves)
    assert tree["P10"] == "G6"


def test_node_names_are_unique():
    for preset in list_presets():
        names = [node.name for node in load_cluster(preset).iter_nodes()]
        assert len(names) == len(set(names)), preset


def test_scaling_a_switch_cluster_keeps_whole_switches():
    full = {g.switch: g.count for g in load_cluster("crux").node_groups}
    small = load_cluster("crux", scale=0.15)
    assert abs(small.node_count() - 0.15 * 847) <= 8
    assert all(full[g.switch] == g.count for g in small.node_groups)


def test_scale_and_uniform():
    assert load_cluster("philly", scale=0.5).total_gpus() == 160 * 2 + 116 * 8
    assert load_cluster("150x8").total_gpus() == 1200
    assert load_cluster("4x2:t4").gpus_by_type() == {"t4": 8}


def test_bad_cluster():
    with pytest.raises(ClusterError, match="unknown cluster"):
        load_cluster("no-such-preset")


@pytest.mark.parametrize(
    ("gpus", "want"), [(1, (1, 1)), (8, (1, 8)), (12, (2, 6)), (48, (6, 8)), (20, (3, 7)), (744, (93, 8))]
)
def test_gang_shape(gpus, want):
    assert gang_shape(gpus, 8) == want
