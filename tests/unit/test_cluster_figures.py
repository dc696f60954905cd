"""Per-cluster figures (issue 26): the pure rows behind the per-cluster gauges and the web view's Slurm clusters page.

``cluster_figures`` counts nodes by state, GPUs on schedulable nodes and those free by type, and
live attempts per cluster; a single-cluster site has no rows. ``period_clusters`` feeds it the
period's snapshot and plan (live attempts plus committed placements), and ``publish`` removes
the series of a cluster that is no longer there.
"""

from __future__ import annotations

from meta.cycle.metrics import Metrics
from meta.cycle.period_metrics import cluster_values, period_clusters, publish
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.policy.cluster_figures import ClusterFigures, cluster_figures, node_state
from meta.policy.config import SchedulerConfig
from meta.policy.plan import Placement, Plan
from meta.policy.snapshot import NodeShare, Reservation, Snapshot


def _node(name: str, gpus: int = 8, gpu_type: str | None = "a100", **health: bool) -> NodeState:
    return NodeState(name, ResourceVector(cpus=64, memory=512000, gpus=gpus, gpu_type=gpu_type), **health)


def _share(node: str, gpus: int) -> NodeShare:
    return NodeShare(node, ResourceVector(cpus=4, memory=16384, gpus=gpus, gpu_type="a100"))


def _reservation(attempt: str, *shares: NodeShare) -> Reservation:
    return Reservation(attempt, f"task-{attempt}", f"job-{attempt}", "acme", "normal", shares, start_time=0.0)


SITE = [
    _node("a/n1"), _node("a/n2"), _node("a/n3", drained=True), _node("a/n4", healthy=False),
    _node("b/n1", gpu_type="h100"), _node("b/n2", gpus=4, gpu_type=None), _node("b/cpu", gpus=0, gpu_type=None),
]  # fmt: skip


def test_nodes_gpus_and_attempts_per_cluster() -> None:
    held = {"a/n1": 8, "a/n2": 3, "a/n3": 8, "b/n1": 2}
    attempts = [("a/n1",), ("a/n2", "a/n1"), ("a/n3",), ("b/n1",), ()]
    a, b = cluster_figures(SITE, held, attempts, drained={"b"})
    assert a == ClusterFigures("a", {"schedulable": 2, "drained": 1, "down": 1}, {"a100": 16}, {"a100": 5}, 3, False)
    # untyped GPUs are "gpu", as metasched_free_gpus names them; a node without GPUs adds no type
    assert b == ClusterFigures("b", {"schedulable": 3, "drained": 0, "down": 0}, {"h100": 8, "gpu": 4},
                               {"h100": 6, "gpu": 4}, 1, True)  # fmt: skip


def test_a_type_whose_nodes_are_all_out_stays_at_zero() -> None:
    (row,) = cluster_figures([_node("a/n1", drained=True), _node("a/n2", gpu_type="h100", healthy=False)], {}, [])
    assert row.total_gpus == {"a100": 0, "h100": 0} and row.free_gpus == {"a100": 0, "h100": 0}
    assert row.nodes == {"schedulable": 0, "drained": 1, "down": 1}


def test_an_over_held_node_is_full_not_negative() -> None:
    (row,) = cluster_figures([_node("a/n1")], {"a/n1": 12}, [("a/n1",), ("a/n1",)])
    assert row.free_gpus == {"a100": 0} and row.running_attempts == 2


def test_a_single_cluster_site_has_no_rows_and_named_clusters_are_added() -> None:
    assert cluster_figures([_node("n1"), _node("n2")], {"n1": 8}, [("n1",)], drained={"x"}) == []
    a, empty = cluster_figures([_node("a/n1")], {}, [("zz/n9",)], drained={"empty"}, clusters=["empty", "a", ""])
    assert empty == ClusterFigures("empty", {"schedulable": 0, "drained": 0, "down": 0}, {}, {}, 0, True)
    assert a.running_attempts == 0  # an attempt on a cluster no row names is not counted anywhere


def test_node_state_names() -> None:
    assert [node_state(n) for n in SITE[:4]] == ["schedulable", "schedulable", "drained", "down"]
    assert node_state(_node("x", drained=True, healthy=False)) == "down"


def _snapshot() -> Snapshot:
    return Snapshot(now=100.0, nodes=tuple(SITE), reservations=(_reservation("r1", _share("a/n1", 8)),
                                                                _reservation("r2", _share("b/n1", 2))))  # fmt: skip


def test_the_period_counts_live_attempts_and_committed_placements_only() -> None:
    plan = Plan(placements=[Placement("t1", "j1", (_share("a/n2", 4),)), Placement("t2", "j2", (_share("b/n1", 6),))])
    a, b = period_clusters(_snapshot(), plan, skipped={"t2"}, clusters=["a", "b"], drained={"a"})
    assert (a.free_gpus, a.running_attempts, a.drained) == ({"a100": 4}, 2, True)
    assert (b.free_gpus, b.running_attempts, b.drained) == ({"h100": 6, "gpu": 4}, 1, False)
    nodes, total, free, running, drained = cluster_values([a, b])
    assert nodes[("a", "down")] == 1 and nodes[("b", "drained")] == 0 and len(nodes) == 6
    assert total == {("a", "a100"): 16, ("b", "h100"): 8, ("b", "gpu"): 4}
    assert free[("a", "a100")] == 4 and running == {("a",): 2, ("b",): 1} and drained == {("a",): 1, ("b",): 0}


def _series(metrics: Metrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(s.labels.items())): s.value for m in metrics.registry.collect() for s in m.samples
            if s.name == name}  # fmt: skip


def test_a_cluster_that_goes_away_leaves_no_series() -> None:
    metrics = Metrics()
    metrics.set_leading(1)
    snapshot = _snapshot()
    publish(metrics, snapshot, Plan(), SchedulerConfig(), skipped=(), placed={}, depth={}, attempts={}, clusters=["a", "b"],
            drained={"b"})  # fmt: skip
    assert _series(metrics, "metasched_cluster_drained") == {(("cluster", "a"),): 0, (("cluster", "b"),): 1}
    assert _series(metrics, "metasched_cluster_free_gpus")[(("cluster", "b"), ("gpu_type", "h100"))] == 6
    only_a = Snapshot(now=101.0, nodes=tuple(n for n in SITE if n.name.startswith("a/")))
    publish(metrics, only_a, Plan(), SchedulerConfig(), skipped=(), placed={}, depth={}, attempts={}, clusters=["a"])
    for name in ("metasched_cluster_nodes", "metasched_cluster_total_gpus", "metasched_cluster_free_gpus",
                 "metasched_cluster_running_attempts", "metasched_cluster_drained"):  # fmt: skip
        series = _series(metrics, name)
        assert series and all(dict(labels)["cluster"] == "a" for labels in series), name
    metrics.set_leading(None)  # a replica that stops leading exports no cycle gauge
    assert _series(metrics, "metasched_cluster_nodes") == {} and _series(metrics, "metasched_cluster_drained") == {}


def test_a_single_cluster_site_exports_no_per_cluster_series() -> None:
    metrics = Metrics()
    metrics.set_leading(1)
    snapshot = Snapshot(now=1.0, nodes=(_node("n1"), _node("n2")), reservations=(_reservation("r", _share("n1", 8)),))
    publish(metrics, snapshot, Plan(), SchedulerConfig(), skipped=(), placed={}, depth={}, attempts={})
    assert _series(metrics, "metasched_cluster_nodes") == {} and _series(metrics, "metasched_cluster_free_gpus") == {}
    assert _series(metrics, "metasched_cluster_gpus") == {(("gpu_type", "a100"),): 16}  # the site-wide gauges stay
