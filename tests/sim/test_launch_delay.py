"""SimConfig.launch_delay_s: a job decided at t holds its resources from t and runs from t + delay.

The launch through Slurm (decision → RUNNING) is ~2 s on the dev cluster; a recorded queue delay
ends at RUNNING, so a simulated one ends at t + delay. Default 0: a job starts at its decision,
exactly as before the knob existed.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from meta.policy import fifo
from meta.policy.plan import Placement, Plan, Preemption
from meta.sim import policies
from meta.sim.cluster import load_cluster
from meta.sim.config import SimConfig
from meta.sim.engine import Engine, EngineResult
from meta.sim.job import JobState
from meta.sim.metrics import compute
from meta.sim.trace import TraceJob

EXACT = SimConfig(estimate="noise", noise_factor=1.0, warmup_hours=0.0, cycle_interval_s=0.0, idle_cycle_s=0.0)


def _run(trace: list[TraceJob], cluster: str = "1x4", config: SimConfig = EXACT, policy=fifo.schedule) -> EngineResult:
    return Engine(trace, load_cluster(cluster), policy, None, config).run()


def test_the_default_is_no_launch_and_a_negative_one_is_refused() -> None:
    assert SimConfig().launch_delay_s == 0.0
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="launch_delay_s"):
            SimConfig(launch_delay_s=bad)


def test_a_job_starts_its_launch_after_its_decision_and_holds_its_gpus_from_the_decision() -> None:
    result = _run([TraceJob("a", 10, 100, 4)], config=replace(EXACT, launch_delay_s=5.0))
    (a,) = result.jobs
    assert (a.first_placed, a.first_start, a.end_time, a.queue_s) == (10, 15, 115, 5)
    assert a.state == JobState.DONE and a.jct == 105
    # the GPUs are busy (and charged) from the decision at 10 to the end at 115, launch included
    assert result.ledger.timeline == [(10, 4), (115, 0)]


def test_a_second_job_waits_for_the_first_s_launch_and_run() -> None:
    # one 4-GPU node; a (4 GPUs, 100 s) is decided at 0; b (4 GPUs) arrives at 1, inside a's launch: a's GPUs
    # are held, so b fits only when a ends at 0 + 5 + 100; b is decided then and starts 5 s later
    trace = [TraceJob("a", 0, 100, 4), TraceJob("b", 1, 10, 4)]
    before = _run(trace)
    assert [(j.first_start, j.end_time, j.queue_s) for j in before.jobs] == [(0, 100, 0), (100, 110, 99)]
    after = _run(trace, config=replace(EXACT, launch_delay_s=5.0))
    a, b = after.jobs
    assert (a.first_start, a.end_time, a.queue_s) == (5, 105, 5)
    assert (b.first_placed, b.first_start, b.end_time, b.queue_s) == (105, 110, 120, 109)
    assert compute(after, {})["queue"]["mean"] == pytest.approx((5 + 109) / 2)


def test_a_small_job_does_not_slip_into_gpus_held_by_a_launch() -> None:
    # 4 GPUs; a takes 3 of them at 0 (launching until 50); c (1 GPU) at 10 fits the one left; b (2 GPUs) at 11
    # fits nothing until a ends at 150, though none of a's GPUs has started working by then
    trace = [TraceJob("a", 0, 100, 3), TraceJob("c", 10, 10, 1), TraceJob("b", 11, 10, 2)]
    a, c, b = _run(trace, config=replace(EXACT, launch_delay_s=50.0)).jobs
    assert (a.first_start, a.end_time) == (50, 150)
    assert (c.first_placed, c.first_start, c.end_time) == (10, 60, 70)
    assert (b.first_placed, b.first_start, b.queue_s) == (150, 200, 189)


def test_checkpoints_and_the_restore_come_after_the_launch() -> None:
    # A checkpoints every 100 s of run time from its start at 20 (120, 220); B (at 250) evicts it: A keeps 200 s
    # and loses 250 - 220 = 30 s; restarted at 370 (B ran 270-370), A restores 390-400 and ends at 400 + 800
    config = replace(EXACT, launch_delay_s=20.0, checkpoint_interval_s=100, restore_cost_s=10)
    trace = [TraceJob("A", 0, 1000, 4, tenant="t"), TraceJob("B", 250, 100, 4, tenant="t")]
    a, b = _run(trace, config=config, policy=_preempt_for_b).jobs
    assert (a.saved_s, a.discarded_gpu_s, a.restore_gpu_s, a.preemptions) == (200, 30 * 4, 10 * 4, 1)
    assert (b.first_placed, b.first_start, b.end_time) == (250, 270, 370)
    assert (a.first_start, a.end_time) == (20, 1200)
    assert a.queue_s == 20 + (390 - 250)  # each spell to its start: 0-20, then 250-390


def _preempt_for_b(snapshot, config=None) -> Plan:
    """_preempt_for_b is FIFO, except that a job named B… evicts whatever runs and takes its shares."""
    waiting = [t for t in snapshot.pending if t.job_id.startswith("B")]
    if waiting and snapshot.reservations:
        victim, task = snapshot.reservations[0], waiting[0]
        return Plan(placements=[Placement(task.task_id, task.job_id, victim.shares)],
                    preemptions=[Preemption(victim.attempt_id, victim.task_id, "test", 0.0, task.task_id)])
    return fifo.schedule(snapshot, config)


def test_a_job_preempted_during_its_launch_just_releases() -> None:
    # A is decided at 0 and would run from 20; B arrives at 10 and evicts it while it launches: A never ran, so
    # it loses nothing and waits again from 10; B runs 30-130; A is decided again at 130 and runs 150-1150
    config = replace(EXACT, launch_delay_s=20.0, checkpoint_interval_s=100, restore_cost_s=10)
    trace = [TraceJob("A", 0, 1000, 4, tenant="t"), TraceJob("B", 10, 100, 4, tenant="t")]
    result = _run(trace, config=config, policy=_preempt_for_b)
    a, b = result.jobs
    assert a.preemptions == 1 and a.lost_gpu_s == 0 and a.saved_s == 0
    assert (b.first_placed, b.first_start, b.end_time, b.queue_s) == (10, 30, 130, 20)
    # the aborted launch left no start and no completion: the first start is the second attempt's
    assert (a.first_placed, a.first_start, a.end_time) == (130, 150, 1150)
    assert a.queue_s == 150  # pending 0-10 (decided, then launching, never started) and 10-150
    assert result.ledger.timeline == [(0, 4), (10, 4), (130, 4), (1150, 0)]  # held from each decision: A, B, A


def test_a_restart_preempted_during_its_launch_does_not_restore() -> None:
    # as above, then A restarts at 370 (launch to 390, restore 390-400) and B2 evicts it at 380, inside the launch:
    # the restore never happened; A waits from 380, B2 runs 400-450, A is decided at 450: restores 470-480, ends 1280
    config = replace(EXACT, launch_delay_s=20.0, checkpoint_interval_s=100, restore_cost_s=10)
    trace = [TraceJob("A", 0, 1000, 4, tenant="t"), TraceJob("B", 250, 100, 4, tenant="t"),
             TraceJob("B2", 380, 50, 4, tenant="t")]
    result = _run(trace, config=config, policy=_preempt_for_b)
    a, _, b2 = result.jobs
    assert (a.preemptions, a.discarded_gpu_s, a.restore_gpu_s, a.saved_s) == (2, 30 * 4, 10 * 4, 200)
    assert (a.first_start, a.end_time) == (20, 1280)
    assert a.queue_s == 20 + (380 - 250) + (470 - 380)
    assert (b2.first_start, b2.end_time) == (400, 450)
    assert [w for w in result.waste if w[1] > w[0]] == [(220, 250, 4), (470, 480, 4)]


def _random_trace(seed: int, jobs: int = 120) -> list[TraceJob]:
    """_random_trace is a contended mix of trainings (checkpointed, preemptible) and evaluations over three tenants."""
    rng = random.Random(seed)
    out, now = [], 0.0
    for i in range(jobs):
        now += rng.expovariate(1 / 40)
        out.append(TraceJob(f"j{i}", now, rng.choice([60, 300, 900, 3600]), rng.choice([1, 2, 4, 8, 16]),
                            tenant=rng.choice(["x", "y", "z"]), kind_label=rng.choice(["training", "evaluation"])))
    return out


def _outcome(result: EngineResult) -> list[tuple]:
    return [(j.state, j.first_placed, j.first_start, j.end_time, j.queue_s, j.preemptions, j.lost_gpu_s)
            for j in result.jobs]


@pytest.mark.parametrize("policy", ["fifo", "metasched"])
def test_no_launch_delay_changes_nothing(policy: str) -> None:
    # metasched with guarantees by weight preempts; with the default (0) every job starts at its decision, and an
    # explicit 0 is the same run, decision for decision
    function, policy_config = policies.resolve(policy)
    cluster = load_cluster("4x8").model_copy(update={"tenants": {"x": 2.0, "y": 1.0, "z": 1.0}})
    trace = _random_trace(11)
    config = SimConfig(warmup_hours=0.0, checkpoint_interval_s=600, restore_cost_s=30)
    default = Engine(trace, cluster, function, policy_config, config).run()
    explicit = Engine(trace, cluster, function, policy_config, replace(config, launch_delay_s=0.0)).run()
    assert _outcome(default) == _outcome(explicit)
    assert compute(default, {}) | {"wall_s": 0, "policy_s": 0} == compute(explicit, {}) | {"wall_s": 0, "policy_s": 0}
    assert all(j.first_start == j.first_placed for j in default.jobs)
    if policy == "metasched":
        assert sum(j.preemptions for j in default.jobs) > 0  # the comparison covers preemption


def test_a_launch_delay_shifts_an_uncontended_run_by_the_delay() -> None:
    # nobody waits for capacity: each job's queue delay is exactly the launch, its end the launch later
    trace = [TraceJob(f"j{i}", 30.0 * i, 100, 1) for i in range(6)]
    plain = _run(trace, cluster="1x8")
    launched = _run(trace, cluster="1x8", config=replace(EXACT, launch_delay_s=2.0))
    for before, after in zip(plain.jobs, launched.jobs, strict=True):
        assert after.queue_s == before.queue_s + 2 == 2
        assert after.end_time == before.end_time + 2
