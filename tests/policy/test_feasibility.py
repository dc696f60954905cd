"""Every hard filter, the unresolvable/unhealthy split and never_feasible for the submit API."""

from __future__ import annotations

import pytest

from meta.model.kinds import JobKind
from meta.policy.feasibility import never_feasible
from meta.policy.plan import ReasonCode
from meta.policy.snapshot import PendingTask
from tests.policy.builders import Case, Topology, node, run_case, running, rv, snap, task

U = ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE
NODES = (
    node("h1", switch="leaf0"),
    node("h2", switch="leaf1"),
    node("a1", gpu_type="a100", network="eth", partitions=("gpu", "debug")),
)

CASES = [
    Case("fits", snap(NODES, [task("t", gpus=8)]), want_placed={"t"}),
    Case("gpu type nobody has", snap(NODES, [task("t", gpu_type="b200")]), want_waiting={"t": U}),
    Case("gpu count per worker", snap(NODES, [task("t", gpus=16)]), want_waiting={"t": U}),
    Case("cpus", snap(NODES, [task("t", cpus=1000)]), want_waiting={"t": U}),
    Case("memory", snap(NODES, [task("t", mem=4 * 1024 * 1024)]), want_waiting={"t": U}),
    Case("partition", snap(NODES, [task("t", partition="cpu")]), want_waiting={"t": U}),
    Case("partition picks the a100 debug node", snap(NODES, [task("t", gpu_type=None, partition="debug")]),
         want_placed={"t"}, want_nodes={"t": {"a1"}}),
    # Nodes are avoided after they failed the task; avoiding every possible host would strand it.
    Case("avoiding every h100 would strand it: uses them after all",
         snap(NODES, [task("t", avoid_nodes=frozenset({"h1", "h2"}))]), want_placed={"t"}),
    Case("avoiding h1 and the unusable a1 still steers to h2",
         snap(NODES, [task("t", avoid_nodes=frozenset({"h1", "a1"}))]), want_placed={"t"}, want_nodes={"t": {"h2"}}),
    Case("a gang that avoided nodes it needs uses them after all",
         snap(NODES, [task("t", gpus=8, workers=2, avoid_nodes=frozenset({"h1"}))]),
         want_placed={"t"}, want_nodes={"t": {"h1", "h2"}}),
    Case("avoid_nodes steers", snap(NODES, [task("t", avoid_nodes=frozenset({"h1"}))]),
         want_placed={"t"}, want_nodes={"t": {"h2"}}),
    Case("gang larger than the cluster", snap(NODES, [task("t", gpus=8, workers=3)]), want_waiting={"t": U}),
    Case("required topology impossible", snap(NODES, [task("t", gpus=8, workers=2,
                                                           topology=Topology.REQUIRE_SAME_SWITCH)]),
         want_waiting={"t": U}),
    Case("unhealthy hosts wait", snap([node("h1", healthy=False)], [task("t")]),
         want_waiting={"t": ReasonCode.NODE_UNHEALTHY}),
    Case("drained hosts wait", snap([node("h1", drained=True)], [task("t")]),
         want_waiting={"t": ReasonCode.NODE_UNHEALTHY}),
    Case("drained node skipped", snap([node("h1", drained=True), node("h2")], [task("t")]),
         want_placed={"t"}, want_nodes={"t": {"h2"}}),
    Case("busy now is not unresolvable", snap([node("h1")], [task("t")], [running("r", "h1", 8)]),
         want_waiting={"t": ReasonCode.NO_FEASIBLE_NODE}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_filters(case: Case) -> None:
    run_case(case)


def test_network_and_storage_filters() -> None:
    def with_vector(tid: str, **kw) -> PendingTask:
        return PendingTask(tid, f"j{tid}", "a", JobKind.TRAINING, "training", 0.0, rv(**kw))

    plan = run_case(Case("net/storage", snap(NODES, [
        with_vector("net", gpus=1, network="roce"),
        with_vector("disk", gpus=1, sto=5000),
        with_vector("ok", gpus=1, gpu_type="a100", network="eth"),
    ]), want_placed={"ok"}, want_waiting={"net": U, "disk": U}))
    assert "network" in plan.reasons["net"].message
    assert "storage" in plan.reasons["disk"].message


def test_never_feasible_reasons() -> None:
    reason = never_feasible(task("t", gpus=16), NODES)
    assert reason is not None and reason.code is U
    assert "16" in reason.message and "8" in reason.message and reason.remedy
    assert never_feasible(task("t", gpus=8, workers=2), NODES) is None
    # Health does not make a spec unresolvable: the node may come back.
    assert never_feasible(task("t"), [node("h1", healthy=False)]) is None
