"""A gang's hold outlives its cycle: the next cycle keeps its place among the held reservations.

Issue 21: two nodes were held for a waiting 16-GPU gang; one cycle later a task ahead in line took
the only hold, the gang got none, and an 8-GPU 300-s job later in line was placed on a held node
past the gang's start. The previous cycle's holds now reach the policy (``Snapshot.holds``); a gang
held last cycle keeps its place, so it re-holds at its turn and work behind it may use its nodes
only if it ends before the held start, or fits in what the gang leaves spare (EASY backfill).
"""

from __future__ import annotations

from dataclasses import replace

from meta.policy.plan import Plan, ReasonCode, carried
from meta.policy.scheduler import schedule
from meta.policy.snapshot import Snapshot
from tests.policy.builders import NOW, node, running, snap, task
from tests.policy.invariants import check_all

NODES = tuple(node(f"n{i}") for i in range(5))  # 5 nodes x 8 GPUs
T = NOW + 200  # r1 ends: n0 (idle) and n1 together fit the 16-GPU gang
RUNNING = (running("r1", "n1", 8, end=T), *(running(f"r{i}", f"n{i}", 8, end=NOW + 5000) for i in (2, 3, 4)))
# Shipped order (submit + 10 x time limit): the gang (key NOW + 1000) is ahead of "late" (NOW + 2990).
GANG = task("g", gpus=8, workers=2, submit=NOW - 1000, runtime=200)
# Arrives in cycle 2 ahead of the gang (key NOW + 620), pinned (-w) to a busy node: blocked, so it
# would take the one hold (max_held_reservations = 1) if the gang's hold were forgotten.
PINNED = task("pinned", gpus=8, runtime=60, submit=NOW + 20, nodelist=frozenset({"n2"}))


def _late(runtime: float) -> object:
    return task("late", gpus=8, runtime=runtime, submit=NOW - 10)


def _two_cycles(late_runtime: float, carry: bool = True, extra: tuple = (PINNED,)) -> tuple[Snapshot, Plan]:
    """_two_cycles runs cycle 1 (the gang is held), then cycle 2 30 s later with cycle 1's holds carried."""
    first = schedule(snap(NODES, [GANG], RUNNING))
    (held,) = first.held
    assert held.task_id == "g" and set(held.nodes) == {"n0", "n1"} and held.planned_start == T
    second = snap(NODES, [GANG, _late(late_runtime), *extra], RUNNING, now=NOW + 30)
    second = replace(second, holds=carried(first.held) if carry else ())
    return second, schedule(second)


def _placed(plan: Plan) -> dict[str, set[str]]:
    return {p.task_id: {s.node for s in p.shares} for p in plan.placements}


def test_forgotten_hold_lets_later_work_onto_held_nodes() -> None:
    """Without the carried hold the failure of the issue reappears (this is what the promise prevents)."""
    _, plan = _two_cycles(300, carry=False)
    assert (
        _placed(plan) == {"late": {"n0"}} and plan.reasons["g"].code is ReasonCode.WAITING_FOR_GANG_CAPACITY
    )


def test_later_job_ending_after_the_held_start_stays_off_the_held_nodes() -> None:
    s, plan = _two_cycles(300)  # ends at NOW + 330, after T
    assert "late" not in _placed(plan)
    assert (
        plan.reasons["late"].code is ReasonCode.BLOCKED_BY_RESERVATION
        and plan.reasons["late"].blocking_job == "jg"
    )
    (held,) = plan.held
    assert held.task_id == "g" and set(held.nodes) == {"n0", "n1"} and held.planned_start == T
    assert plan.reasons["g"].code is ReasonCode.HELD_FOR_GANG
    assert plan.reasons["pinned"].code is not ReasonCode.HELD_FOR_GANG  # the one hold stays the gang's
    check_all(s, plan)


def test_later_job_ending_before_the_held_start_may_use_them() -> None:
    s, plan = _two_cycles(100)  # ends at NOW + 130, before T
    assert _placed(plan) == {"late": {"n0"}}
    assert plan.placements[0].backfilled and "delays no held start" in plan.placements[0].reason
    assert plan.held[0].task_id == "g" and plan.held[0].planned_start == T
    check_all(s, plan)


def test_work_ahead_in_line_goes_first_and_work_behind_still_respects_the_hold() -> None:
    """A newcomer ahead in line (shortest-first) keeps its place; the gang re-holds before anyone behind it."""
    new = task("new", gpus=8, runtime=90, submit=NOW + 25)  # key NOW + 925: ahead of the gang
    s, _ = _two_cycles(300, extra=(new,))
    s2 = replace(s, now=T - 60)  # the newcomer now ends 30 s after T: it still goes first, on n0
    plan = schedule(s2)
    assert _placed(plan) == {"new": {"n0"}} and not plan.placements[0].backfilled
    (held,) = plan.held  # the gang's place among the holds was kept: it re-holds at its later start
    assert held.task_id == "g" and held.planned_start == T + 30
    assert "late" not in _placed(plan)
    check_all(s2, plan)


def test_holder_takes_its_nodes_when_they_free() -> None:
    """At its turn the holder uses its own held nodes (its hold never blocks itself)."""
    first = schedule(snap(NODES, [GANG], RUNNING))
    later = snap(NODES, [GANG, _late(300)], RUNNING[1:], now=T)  # r1 ended
    plan = schedule(replace(later, holds=carried(first.held)))
    assert _placed(plan) == {"g": {"n0", "n1"}} and all(h.task_id != "g" for h in plan.held)
    assert not plan.placements[0].backfilled
    check_all(later, plan)


def test_hold_lapses_when_its_task_no_longer_waits_or_its_nodes_go() -> None:
    first = schedule(snap(NODES, [GANG], RUNNING))
    gone = replace(snap(NODES, [_late(300)], RUNNING, now=NOW + 30), holds=carried(first.held))
    plan = schedule(gone)
    assert _placed(plan) == {"late": {"n0"}} and not plan.held and not plan.placements[0].backfilled
    drained = (replace(NODES[0], drained=True), *NODES[1:])
    down = replace(snap(drained, [GANG, _late(300)], RUNNING, now=NOW + 30), holds=carried(first.held))
    plan = schedule(down)
    assert all(h.task_id != "g" or "n0" not in h.nodes for h in plan.held)
    check_all(down, plan)


def test_kept_hold_moves_earlier_when_its_nodes_free_sooner() -> None:
    first = schedule(snap(NODES, [GANG], RUNNING))
    sooner = (running("r1", "n1", 8, end=NOW + 100), *RUNNING[1:])
    s = replace(snap(NODES, [GANG, _late(300)], sooner, now=NOW + 30), holds=carried(first.held))
    plan = schedule(s)
    assert plan.held[0].task_id == "g" and plan.held[0].planned_start == NOW + 100
    check_all(s, plan)
