"""Reclaim preemption terminates: a beneficiary keeps the nodes its victims freed, and no two tenants evict each other.

Found 2026-12-06 (test_waiting_causes.py's random trace, seed 7, on 8 × 8 GPUs with tenant weights
x: 2, y: 1, z: 1, i.e. guarantees of 32, 16 and 16 GPUs): the simulator never finished. x's 24-GPU
gang reclaimed its guarantee from y's 24-GPU gang; the next pass, y's gang was back inside y's
guarantee (``guarantee_rounds_up_to_task``), went before x's gang in line and took the freed nodes
again, so x's gang evicted z's gang, which did the same, and so on: every 60 s, for ever, with
the simulated clock running and no job completing. Two rules end it: the nodes a preemption frees
are bound to its beneficiary until its turn next cycle (``SchedulePass._bind``), and a reclaim
that only the rounding up allows never takes the victim's tenant below its own guarantee
(``preemption.candidates``), else the two tenants reclaim from each other in turn.

The simulation runs in a child process with a time limit (pytest-timeout is not installed):
before the fix it runs until killed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from meta.policy.config import SchedulerConfig
from meta.policy.plan import ReasonCode, carried
from meta.policy.scheduler import schedule
from meta.policy.snapshot import TenantState
from tests.policy.builders import NOW, node, running, snap, task
from tests.policy.invariants import check_all

ROOT = Path(__file__).resolve().parents[2]
LIMIT_S = 120.0  # the run takes under a second; before the fix it never ends

# The case of the report, as test_waiting_causes.py::test_the_flag_changes_no_decision runs it.
CHILD = """
import json
from meta.sim import policies
from meta.sim.engine import Engine
from tests.sim.contended import random_trace, switched_config, weighted_cluster
function, config = policies.resolve("metasched")
result = Engine(random_trace(7), weighted_cluster(), function, config, switched_config()).run()
print(json.dumps({"jobs": len(result.jobs), "done": sum(j.state.value == "done" for j in result.jobs),
                  "ended": sum(j.end_time is not None for j in result.jobs),
                  "preemptions": [j.preemptions for j in result.jobs], "cycles": result.cycles}))
"""


def test_metasched_with_tenant_weights_finishes_every_job() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    try:
        out = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=LIMIT_S, check=True)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the simulation did not finish within {LIMIT_S:.0f} s (preemption livelock)") from exc
    run = json.loads(out.stdout.strip().splitlines()[-1])
    assert run["jobs"] == 160 and run["done"] == run["ended"] == 160
    # No thrash either: with only one of the two rules the run ends, but after ~1,250 preemptions
    # (one gang evicted ~300 times); with both, a few dozen, none of a job more than a handful of times.
    assert sum(run["preemptions"]) < 200 and max(run["preemptions"]) <= 20, run["preemptions"]


# --- the two rules, one cycle at a time ---------------------------------------------------------------------------

NODES = (node("n0"), node("n1"))  # 2 × 8 h100
TENANTS = (TenantState("x", guaranteed={"h100": 8}), TenantState("y", guaranteed={"h100": 4}), TenantState("w"))
BUSY = running("w1", "n1", 8, tenant="w", end=NOW + 86400)  # w's long job keeps n1, not preemptible


def test_the_nodes_a_preemption_frees_stay_with_its_beneficiary() -> None:
    # Cycle 1: x (8 guaranteed, none used) reclaims n0 from y (4 guaranteed, 8 used): y's job is evicted.
    victim = running("y1", "n0", 8, tenant="y", preemptible=True, start=NOW - 600, end=NOW + 3000)
    beneficiary = task("xb", tenant="x", gpus=8, submit=NOW - 50, preemptible=True)
    first = schedule(snap(NODES, [beneficiary], [victim, BUSY], TENANTS))
    assert {p.attempt_id for p in first.preemptions} == {"y1"}
    (hold,) = first.held
    assert hold.task_id == "xb" and hold.nodes == ("n0",) and hold.preempting
    # Cycle 2: the victim is gone and waits again, ahead of x's task in line (older, and y is back inside
    # its guarantee, rounded up to the task): without the bound nodes it takes n0 and x has to preempt again.
    requeued = task("y1", tenant="y", gpus=8, submit=NOW - 1000, preemptible=True)
    second = replace(snap(NODES, [beneficiary, requeued], [BUSY], TENANTS, now=NOW + 2), holds=carried(first.held))
    plan = schedule(second)
    assert [(p.task_id, [s.node for s in p.shares]) for p in plan.placements] == [("xb", ["n0"])]
    assert not plan.preemptions and plan.reasons["y1"].code is not ReasonCode.PREEMPTING
    check_all(second, plan)
    forgotten = schedule(replace(second, holds=()))  # what happened before: the victim takes its node back
    assert [p.task_id for p in forgotten.placements] == ["y1"]

    # With a grace period the victim is still stopping next cycle: the beneficiary holds its nodes again, and a
    # task ahead of it in line cannot claim them (any task may otherwise claim the capacity of stopping work).
    stopping = replace(victim, stopping=True)
    other = task("v1", tenant="v", gpus=8, submit=NOW - 1000, preemptible=True)  # inside v's guarantee, older
    tenants = (*TENANTS, TenantState("v", guaranteed={"h100": 8}))
    graced = replace(snap(NODES, [beneficiary, other], [stopping, BUSY], tenants, now=NOW + 2),
                     holds=carried(first.held))
    plan = schedule(graced)
    assert not plan.placements and not plan.preemptions
    assert [(h.nodes, h.preempting) for h in plan.held if h.task_id == "xb"] == [(("n0",), True)]
    assert all("n0" not in h.nodes for h in plan.held if h.task_id != "xb")
    assert plan.reasons["xb"].code is ReasonCode.PREEMPTING and plan.reasons["v1"].code is not ReasonCode.PREEMPTING
    check_all(graced, plan)


def test_a_rounded_up_reclaim_leaves_the_victims_tenant_its_guarantee() -> None:
    # z (4 guaranteed, none used) wants 8: only rounding its guarantee up to the task lets it reclaim. Evicting
    # y's 8 would leave y (4 guaranteed) with none, and y's job could then reclaim z's the same way: no eviction.
    victim = running("y1", "n0", 8, tenant="y", preemptible=True, end=NOW + 3000)
    tenants = (TenantState("y", guaranteed={"h100": 4}), TenantState("z", guaranteed={"h100": 4}), TenantState("w"))
    rounded = SchedulerConfig(guarantee_rounds_up_to_task=True)
    want = task("zt", tenant="z", gpus=8, preemptible=True)
    plan = schedule(snap(NODES, [want], [victim, BUSY], tenants), rounded)
    assert not plan.preemptions and plan.reasons["zt"].code is not ReasonCode.PREEMPTING
    # It still reclaims from a tenant with no guarantee of its own, and for a task that cannot be evicted back.
    plan = schedule(snap(NODES, [want], [victim, BUSY], (TenantState("y"), *tenants[1:])), rounded)
    assert {p.attempt_id for p in plan.preemptions} == {"y1"}
    plan = schedule(snap(NODES, [replace(want, preemptible=False)], [victim, BUSY], tenants), rounded)
    assert {p.attempt_id for p in plan.preemptions} == {"y1"}
