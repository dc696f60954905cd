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
    assert a.preemptions == 1 and a.lost_gpu_s == 50 * 4
    assert a.saved_s == 200
    assert a.end_time == 1160 and a.queue_s == 100  # pending 250–350
    assert (b.first_start, b.end_time) == (250, 350)


def test_victim_without_checkpoint_loses_everything():
    # Checkpoint interval longer than the run: at 250 A has no checkpoint and loses all 250 s.
    config = SimConfig(checkpoint_interval_s=5000, restore_cost_s=10, warmup_hours=0, estimate="noise", noise_factor=1)
    trace = [TraceJob("A", 0, 1000, 4, tenant="t"), TraceJob("B", 250, 100, 4, tenant="t")]
    result = Engine(trace, load_cluster("1x4"), _preempt_for_b, None, config).run()
    a, _ = result.jobs
    assert a.lost_gpu_s == 250 * 4 and a.saved_s == 0
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
    assert a.lost_gpu_s == 50 * 4 and a.saved_s == 200 and a.preemptions == 1
    assert (b.first_start, b.end_time) == (280, 380)
    assert a.end_time == 1190 and a.queue_s == 100
