"""Backfill: the head's held start is never delayed; others fill in only where they cannot hurt it."""

from __future__ import annotations

from meta.policy.config import SchedulerConfig
from meta.policy.plan import ReasonCode
from meta.policy.scheduler import schedule
from tests.policy.builders import NOW, Case, JobKind, node, run_case, running, snap, task
from tests.policy.invariants import check_all

EVAL = {"kind": JobKind.EVALUATION, "gpus": 4}
FIFO = SchedulerConfig(short_job_weight=0.0)  # keep submit order inside a tenant
TWO = (node("n0"), node("n1"))
RUNNING = (running("r0", "n0", 8, end=NOW + 1000), running("r1", "n1", 4, end=NOW + 5000))


def _plan(extra_nodes=(), pending=()):
    s = snap((*TWO, *extra_nodes), [task("g", gpus=8, workers=2, submit=0.0), *pending], RUNNING)
    return s, schedule(s)


def test_head_gang_gets_nodes_at_its_earliest_start() -> None:
    s, plan = _plan()
    (held,) = plan.held
    assert held.task_id == "g" and set(held.nodes) == {"n0", "n1"} and held.planned_start == NOW + 5000
    assert plan.reasons["g"].code is ReasonCode.HELD_FOR_GANG
    assert "est. in 83 min" in plan.reasons["g"].remedy
    check_all(s, plan)


def test_short_task_backfills_long_one_is_blocked() -> None:
    plan = run_case(Case(
        "backfill", snap(TWO, [task("g", gpus=8, workers=2, submit=0.0),
                               task("long", runtime=10_000, submit=NOW - 50, **EVAL),
                               task("short", runtime=500, submit=NOW - 40, **EVAL)], RUNNING),
        want_placed={"short"}, want_waiting={"g": ReasonCode.HELD_FOR_GANG,
                                             "long": ReasonCode.BLOCKED_BY_RESERVATION},
        want_nodes={"short": {"n1"}}, config=FIFO))
    assert plan.placements[0].backfilled
    assert plan.reasons["long"].blocking_job == "jg"


def test_nodes_outside_the_hold_are_free_for_anyone() -> None:
    s, plan = _plan((node("n2", gpus=4),), [task("long", runtime=10_000, **EVAL)])
    assert [(p.task_id, {x.node for x in p.shares}) for p in plan.placements] == [("long", {"n2"})]
    check_all(s, plan)


def test_spare_capacity_on_held_node_is_usable() -> None:
    """The head needs 6 of 8 GPUs at its start: 2 GPUs stay usable by long work, not 4."""
    s = snap([node("n0")], [task("head", gpus=6, submit=0.0), task("long", gpus=2, runtime=90_000),
                            task("too-big", gpus=2, runtime=90_000)],
             [running("r", "n0", 4, end=NOW + 1000)])
    plan = schedule(s)
    assert plan.held[0].task_id == "head"
    assert [p.task_id for p in plan.placements] == ["long"]
    assert plan.reasons["too-big"].code is ReasonCode.BLOCKED_BY_RESERVATION
    check_all(s, plan)


def test_head_counts_this_cycles_placements_as_releases() -> None:
    """Work placed earlier in the cycle ends after its estimate; the head may start then."""
    s = snap([node("n0")], [task("first", gpus=8, runtime=600, submit=0.0),
                            task("gang", gpus=4, workers=2, submit=1.0)])
    plan = schedule(s)
    assert [p.task_id for p in plan.placements] == ["first"]
    assert plan.held[0].task_id == "gang" and plan.held[0].planned_start == NOW + 600
    check_all(s, plan)


def test_holds_are_bounded() -> None:
    pending = [task(f"g{i}", gpus=8, workers=2, submit=float(i)) for i in range(6)]
    plan = schedule(snap(TWO, pending, RUNNING))
    assert len(plan.held) == 1  # both nodes go to the first hold; the rest cannot get other nodes
    assert all(plan.reasons[f"g{i}"].code is ReasonCode.WAITING_FOR_GANG_CAPACITY for i in range(1, 6))


def test_blocked_reason_names_the_holder_by_the_id_users_see() -> None:
    # The daemon's tasks carry the internal job UUID as job_id and the short id users see as
    # job_name: the message names the short id; blocking_job keeps the UUID for the service.
    from dataclasses import replace

    uuid = "4139acc9-0000-4000-8000-000000000001"
    head = replace(task("g", gpus=8, workers=2, submit=0.0), job_id=uuid, job_name="a1b2c3")
    s = snap(TWO, [head, task("long", runtime=10_000, submit=NOW - 50, **EVAL)], RUNNING)
    reason = schedule(s, FIFO).reasons["long"]
    assert reason.code is ReasonCode.BLOCKED_BY_RESERVATION
    assert "held for job a1b2c3," in reason.message and uuid not in reason.message
    assert reason.blocking_job == uuid
