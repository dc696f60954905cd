"""Gangs and topology: all or nothing, shared nodes, fewest switches, best fit."""

from __future__ import annotations

import pytest

from meta.policy.plan import ReasonCode
from tests.policy.builders import Case, Topology, node, run_case, running, snap, task

TWO_LEAVES = (node("l0a", switch="leaf0"), node("l0b", switch="leaf0"),
              node("l1a", switch="leaf1"), node("l1b", switch="leaf1"))
BUSY_ONE_PER_LEAF = (running("r0", "l0b", 8), running("r1", "l1b", 8))  # no expected end
SPINES = {"leaf0": "spine0", "leaf1": "spine0", "leaf2": "spine1"}
THREE_LEAVES = (node("a0", switch="leaf0"), node("b0", switch="leaf1"), node("b1", switch="leaf1"),
                node("c0", switch="leaf2"), node("c1", switch="leaf2"))

CASES = [
    Case("gang all or nothing", snap(TWO_LEAVES, [task("g", gpus=8, workers=3)], BUSY_ONE_PER_LEAF),
         want_waiting={"g": ReasonCode.WAITING_FOR_GANG_CAPACITY}),
    Case("workers share a node", snap([node("n1"), node("n2")], [task("g", gpus=2, workers=4)]),
         want_placed={"g"}),
    Case("prefer same switch picks one leaf",
         snap(TWO_LEAVES, [task("g", gpus=8, workers=2, topology=Topology.PREFER_SAME_SWITCH)],
              [running("r0", "l0b", 8)]),
         want_placed={"g"}, want_nodes={"g": {"l1a", "l1b"}}),
    Case("prefer same switch spills over when it must",
         snap(TWO_LEAVES, [task("g", gpus=8, workers=2, topology=Topology.PREFER_SAME_SWITCH)],
              BUSY_ONE_PER_LEAF),
         want_placed={"g"}, want_nodes={"g": {"l0a", "l1a"}}),
    Case("require same switch waits",
         snap(TWO_LEAVES, [task("g", gpus=8, workers=2, topology=Topology.REQUIRE_SAME_SWITCH)],
              BUSY_ONE_PER_LEAF),
         want_waiting={"g": ReasonCode.TOPOLOGY_UNSATISFIED}),
    Case("require same switch places on one leaf",
         snap(TWO_LEAVES, [task("g", gpus=8, workers=2, topology=Topology.REQUIRE_SAME_SWITCH)],
              [running("r0", "l0b", 8)]),
         want_placed={"g"}, want_nodes={"g": {"l1a", "l1b"}}),
    Case("fewest switches: stay under one spine",
         snap(THREE_LEAVES, [task("g", gpus=8, workers=3)],
              [running("rc", "c1", 8)], parents=SPINES),
         want_placed={"g"}, want_nodes={"g": {"a0", "b0", "b1"}}),
    Case("best fit: single GPU goes to the fullest node",
         snap([node("empty"), node("half")], [task("t")], [running("r", "half", 7)]),
         want_placed={"t"}, want_nodes={"t": {"half"}}),
    Case("best fit: gang tail fills a partial node, whole nodes stay free",
         snap([node("n1"), node("n2", switch="leaf1"), node("n3")], [task("g", gpus=1, workers=10)],
              [running("r", "n3", 6)]),
         want_placed={"g"}, want_nodes={"g": {"n1", "n3"}}),
    Case("best fit: fullest switch that still fits",
         snap(TWO_LEAVES, [task("g", gpus=8, workers=1)], [running("r0", "l0b", 8)]),
         want_placed={"g"}, want_nodes={"g": {"l0a"}}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gang(case: Case) -> None:
    run_case(case)


def test_gang_shares_are_one_per_worker() -> None:
    plan = run_case(CASES[1])
    shares = plan.placements[0].shares
    assert len(shares) == 4 and all(s.resources.gpus == 2 and s.resources.gpu_type == "h100" for s in shares)
    assert len({s.node for s in shares}) == 1


def test_gang_waiting_message_suggests_fewer_workers() -> None:
    plan = run_case(CASES[0])
    reason = plan.reasons["g"]
    assert "only 2 workers fit now" in reason.message
    assert "reduce workers to 2" in reason.remedy


def test_unknown_end_keeps_nodes_from_other_gangs() -> None:
    """A head gang without a known start keeps its nodes from later gangs, not from single tasks."""
    from meta.policy.scheduler import schedule

    nodes = (node("n1"), node("n2"), node("n3"))
    plan = schedule(snap(nodes, [
        task("big", gpus=8, workers=3, submit=0.0),
        task("small-gang", gpus=4, workers=2),
        task("single", gpus=4),
    ], [running("r", "n3", 8)]))
    assert plan.held == []
    assert plan.reasons["big"].code is ReasonCode.WAITING_FOR_GANG_CAPACITY
    assert "kept from other gangs" in plan.reasons["big"].message
    assert plan.reasons["small-gang"].code is ReasonCode.BLOCKED_BY_RESERVATION
    assert plan.reasons["small-gang"].blocking_job == "jbig"
    assert [p.task_id for p in plan.placements] == ["single"]
