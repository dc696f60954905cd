"""sbatch's hard placement filters in the policy: --constraint, -w, -x, --exclusive and one worker per node (issue 13)."""

from __future__ import annotations

from dataclasses import replace

from meta.model.nodes import NodeState
from meta.policy.feasibility import never_feasible
from meta.policy.plan import ReasonCode
from meta.policy.scheduler import schedule
from tests.policy.builders import node, running, snap, task

U = ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE


def _featured(name: str, *features: str, **kw) -> NodeState:
    return replace(node(name, **kw), features=frozenset(features))


NODES = [_featured("h1", "h100", "ib"), _featured("h2", "h100"), _featured("a1", "a100", gpu_type="a100")]


def _placed(tasks, reservations=()):  # type: ignore[no-untyped-def]
    plan = schedule(snap(NODES, tasks, reservations))
    return {p.task_id: sorted(s.node for s in p.shares) for p in plan.placements}, plan.reasons


def test_constraint_keeps_tasks_on_nodes_with_the_features() -> None:
    placed, reasons = _placed([
        task("ib", gpus=1, gpu_type=None, constraint=(frozenset({"h100", "ib"}),)),
        task("either", gpus=1, gpu_type=None, constraint=(frozenset({"a100"}), frozenset({"nope"}))),
        task("none", gpus=1, gpu_type=None, constraint=(frozenset({"t4"}),)),
    ])
    assert placed["ib"] == ["h1"] and placed["either"] == ["a1"]
    assert reasons["none"].code is U and "t4" in reasons["none"].message


def test_nodelist_and_exclude_are_hard_and_never_relaxed() -> None:
    placed, reasons = _placed([
        task("only", gpus=1, nodelist=frozenset({"h2"})),
        task("not", gpus=1, exclude=frozenset({"h1"})),
        task("gone", gpus=1, nodelist=frozenset({"h1"}), exclude=frozenset({"h1"})),
    ])
    assert placed["only"] == ["h2"] and placed["not"] == ["h2"]
    assert reasons["gone"].code is U and "--nodelist/--exclude" in reasons["gone"].message
    assert never_feasible(task("t", gpus=1, nodelist=frozenset({"zz9"})), NODES) is not None


def test_exclusive_takes_only_idle_nodes() -> None:
    placed, _ = _placed([task("x", gpus=1, exclusive=True)], [running("busy", "h1", 1)])
    assert placed["x"] == ["h2"]
    placed, reasons = _placed([task("x", gpus=1, exclusive=True, nodelist=frozenset({"h1"}))], [running("busy", "h1", 1)])
    assert "x" not in placed and reasons["x"].code is not U  # it waits for h1 to be idle


def test_sbatch_gangs_take_one_node_per_worker() -> None:
    placed, _ = _placed([task("gang", gpus=1, workers=2, one_per_node=True)])
    assert placed["gang"] == ["h1", "h2"]
    placed, _ = _placed([task("packed", gpus=1, workers=2)])
    assert len(set(placed["packed"])) == 1  # metasched's own gangs may share a node
