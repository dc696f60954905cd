"""Preemption lost-work accounting with a scripted policy."""

from __future__ import annotations

from meta.policy import fifo
from meta.policy.plan import Placement, Plan, Preemption
from meta.sim.cluster import load_cluster
from meta.sim.config import SimConfig
from meta.sim.engine import Engine
from meta.sim.trace import TraceJob


def _preempt_for_b(snapshot, config=None) -> Plan:
    """_preempt_for_b is FIFO, except that job B evicts whatever runs and takes its shares."""
    waiting_b = [t for t in snapshot.pending if t.job_id == "B"]
    if waiting_b and snapshot.reservations:
        victim = snapshot.reservations[0]
        task = waiting_b[0]
        return Plan(
            placements=[Placement(task.task_id, task.job_id, victim.shares)],
            preemptions=[Preemption(victim.attempt_id, victim.task_id, "test", 0.0, task.task_id)],
        )
    return fifo.schedule(snapshot, config)


def test_victim_loses_work_since_last_checkpoint_and_pays_restore():
    # One node of 4 GPUs. A (4 GPUs, 1000 s) starts at 0 and checkpoints at 100 and 200.
    # B arrives at 250 and evicts A: A keeps 200 s of work and loses 250−200 = 50 s × 4 GPUs.
    # B runs 250–350. A restarts at 350, restores for 10 s, then needs 800 s: ends at 1160.
    config = SimConfig(checkpoint_interval_s=100, restore_cost_s=10, warmup_hours=0, estimate="noise", noise_factor=1)
    trace = [TraceJob("A", 0, 1000, 4, tenant="t"), TraceJob("B", 250, 100, 4, tenant="t")]
    result = Engine(trace, load_cluster("1x4"), _preempt_for_b, None, config).run()
    a, b = result.jobs
    assert a.preemptions == 1 and a.discarded_gpu_s == 50 * 4
    assert a.restore_gpu_s == 10 * 4 and a.lost_gpu_s == 60 * 4  # the restart's restore is lost time too
    assert a.saved_s == 200
    assert a.end_time == 1160 and a.queue_s == 100  # pending 250–350
    assert (b.first_start, b.end_time) == (250, 350)


def test_victim_without_checkpoint_loses_everything():
    # Checkpoint interval longer than the run: at 250 A has no checkpoint and loses all 250 s.
    config = SimConfig(checkpoint_interval_s=5000, restore_cost_s=10, warmup_hours=0, estimate="noise", noise_factor=1)
    trace = [TraceJob("A", 0, 1000, 4, tenant="t"), TraceJob("B", 250, 100, 4, tenant="t")]
    result = Engine(trace, load_cluster("1x4"), _preempt_for_b, None, config).run()
    a, _ = result.jobs
    assert a.lost_gpu_s == a.discarded_gpu_s == 250 * 4 and a.saved_s == 0
    assert a.end_time == 350 + 1000  # restarts from scratch, no restore to pay


def _preempt_then_wait_for_b(snapshot, config=None) -> Plan:
    """_preempt_then_wait_for_b preempts A for B, waits while A stops, then starts B first."""
    import dataclasses

    waiting_b = [t for t in snapshot.pending if t.job_id == "B"]
    if not waiting_b:
        return fifo.schedule(snapshot, config)
    live = [r for r in snapshot.reservations if not r.stopping]
    if live:
        victim = live[0]
        return Plan(preemptions=[Preemption(victim.attempt_id, victim.task_id, "test", 0.0, waiting_b[0].task_id)])
    return fifo.schedule(dataclasses.replace(snapshot, pending=tuple(waiting_b)), config)


def test_grace_period_keeps_capacity_until_the_victim_stops():
    # Grace 30 s: A is told to stop at 250 (lost 50 s × 4 GPUs, as before) but holds its node
    # as a stopping reservation until 280; B runs 280–380; A restarts at 380, restores 10 s and
    # runs its last 800 s: ends at 1190. A was pending 280–380.
    config = SimConfig(checkpoint_interval_s=100, restore_cost_s=10, warmup_hours=0, estimate="noise",
                       noise_factor=1, preemption_grace_s=30)
    trace = [TraceJob("A", 0, 1000, 4, tenant="t"), TraceJob("B", 250, 100, 4, tenant="t")]
    result = Engine(trace, load_cluster("1x4"), _preempt_then_wait_for_b, None, config).run()
    a, b = result.jobs
    assert a.discarded_gpu_s == 50 * 4 and a.restore_gpu_s == 10 * 4 and a.saved_s == 200 and a.preemptions == 1
    assert (b.first_start, b.end_time) == (280, 380)
    assert a.end_time == 1190 and a.queue_s == 100


def test_a_victim_preempted_while_restoring_loses_only_the_restore_it_did():
    # A is evicted at 250 (checkpoint at 200: 50 s × 4 GPUs discarded) and restarts at 350 with a
    # 100 s restore; C evicts it at 400, 50 s into that restore: nothing more is discarded and
    # only the 50 s that ran count. A restarts at 500 and restores 100 s.
    def policy(snapshot, config=None) -> Plan:
        waiting = sorted((t for t in snapshot.pending if t.job_id in ("B", "C")), key=lambda t: t.job_id)
        if waiting and snapshot.reservations:
            victim, task = snapshot.reservations[0], waiting[0]
            return Plan(placements=[Placement(task.task_id, task.job_id, victim.shares)],
                        preemptions=[Preemption(victim.attempt_id, victim.task_id, "test", 0.0, task.task_id)])
        return fifo.schedule(snapshot, config)

    config = SimConfig(checkpoint_interval_s=100, restore_cost_s=100, warmup_hours=0, estimate="noise",
                       noise_factor=1, cycle_interval_s=0)
    trace = [TraceJob("A", 0, 1000, 4, tenant="t"), TraceJob("B", 250, 100, 4, tenant="t"),
             TraceJob("C", 400, 100, 4, tenant="t")]
    result = Engine(trace, load_cluster("1x4"), policy, None, config).run()
    a = result.jobs[0]
    assert a.preemptions == 2 and a.discarded_gpu_s == 50 * 4
    assert a.restore_gpu_s == (50 + 100) * 4  # the cut restore (50 s) and the final one (100 s)
    assert sorted(result.waste) == [(200, 250, 4), (350, 400, 4), (500, 600, 4)]


def test_useful_utilization_and_lost_hours_count_restores_and_only_measured_jobs():
    # The first test's run: window 0–250 (last arrival), one 4-GPU node. Busy all the time; of it,
    # 200–250 is A's discarded work (inside the window); the restore 350–360 is outside it.
    from meta.sim.metrics import compute

    config = SimConfig(checkpoint_interval_s=100, restore_cost_s=10, warmup_hours=0, estimate="noise", noise_factor=1,
                       cycle_interval_s=0)
    trace = [TraceJob("A", 0, 1000, 4, tenant="t"), TraceJob("B", 250, 100, 4, tenant="t")]
    result = Engine(trace, load_cluster("1x4"), _preempt_for_b, None, config).run()
    figures = compute(result, {"t": 1.0})
    assert figures["utilization"] == 1.0
    assert figures["useful_utilization"] == 1.0 - 50 / 250
    assert figures["lost_gpu_hours"] == (50 + 10) * 4 / 3600
    assert figures["lost_gpu_hours_detail"] == {"discarded": 50 * 4 / 3600, "restores": 10 * 4 / 3600}
    assert figures["physical_bound"] == (1160 + 100) / (1000 + 100)  # mean JCT over mean run time
    result.jobs[0].measured = False  # a warm-up job's preemption is not counted
    assert compute(result, {"t": 1.0})["preemptions"] == 0
