"""Several Slurm clusters in one snapshot (issue 26): a gang never spans two, -M confines a task."""

from __future__ import annotations

import pytest

from meta.policy.plan import ReasonCode
from meta.policy.scheduler import schedule
from tests.policy.builders import Case, Topology, node, run_case, running, snap, task

# Node names are qualified by cluster; no switch tree: each cluster is one flat switch of its own.
A = tuple(node(f"a/n{i}", switch=None) for i in (1, 2))
B = tuple(node(f"b/n{i}", switch=None) for i in (1, 2, 3))
SAME_NAMES = (node("a/n1", switch=None), node("b/n1", switch=None))

CASES = [
    Case("a gang fits in neither cluster alone: it waits, never spans",
         snap(A + B[:2], [task("g", gpus=8, workers=3)]),
         want_waiting={"g": ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE}),
    Case("a gang goes to the one cluster it fits in",
         snap(A + B, [task("g", gpus=8, workers=3)]),
         want_placed={"g"}, want_nodes={"g": {"b/n1", "b/n2", "b/n3"}}),
    Case("free nodes on both clusters: the gang takes two of one, not one of each",
         snap(A + B, [task("g", gpus=8, workers=2)], [running("r", "b/n1", 8)]),
         want_placed={"g"}),
    Case("require same switch: the flat switches of two clusters are two switches",
         snap(A[:1] + B[:1], [task("g", gpus=8, workers=2, topology=Topology.REQUIRE_SAME_SWITCH)]),
         want_waiting={"g": ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE}),
    Case("-M b: a single task goes to b although a is emptier",
         snap(A + B, [task("t", gpus=8, clusters=frozenset({"b"}))], [running("r", "b/n1", 8)]),
         want_placed={"t"}),
    Case("same node name on two clusters: two nodes",
         snap(SAME_NAMES, [task("t1", gpus=8), task("t2", gpus=8)]),
         want_placed={"t1", "t2"}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_clusters(case: Case) -> None:
    run_case(case)


def _clusters_used(case: Case, task_id: str) -> set[str]:
    plan = schedule(case.snapshot)
    placement = next(p for p in plan.placements if p.task_id == task_id)
    return {share.node.split("/")[0] for share in placement.shares}


def test_a_gang_with_room_on_both_clusters_stays_on_one() -> None:
    assert len(_clusters_used(CASES[2], "g")) == 1


def test_the_clusters_filter_keeps_a_task_on_its_cluster() -> None:
    assert _clusters_used(CASES[4], "t") == {"b"}


def test_a_gang_too_big_for_any_one_cluster_says_so() -> None:
    reason = schedule(CASES[0].snapshot).reasons["g"]
    assert "no single Slurm cluster fits 3 workers" in reason.message and "(best: 2)" in reason.message
    assert "reduce workers to 2" in reason.remedy


def test_a_gang_that_fits_a_busy_cluster_later_waits_rather_than_spanning() -> None:
    # a has 2 free nodes, b 1 free of 3: a 3-node gang fits only b once its job ends, never a + b now
    snapshot = snap(A + B, [task("g", gpus=8, workers=3)], [running("r", "b/n1", 8, end=5000.0 + 1e9)])
    plan = schedule(snapshot)
    assert not plan.placements and plan.reasons["g"].code is not ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_a_clusters_filter_naming_no_cluster_of_the_site_is_unresolvable() -> None:
    plan = schedule(snap(A, [task("t", gpus=1, clusters=frozenset({"c"}))]))
    assert plan.reasons["t"].code is ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "--clusters" in plan.reasons["t"].message
