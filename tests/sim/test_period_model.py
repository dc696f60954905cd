"""The simulator decides as the daemon does: on its period, and between events while work waits."""

from __future__ import annotations

from meta.policy import fifo
from meta.policy.config import SchedulerConfig
from meta.policy.scheduler import schedule
from meta.sim.cluster import load_cluster
from meta.sim.config import SimConfig
from meta.sim.engine import Engine
from meta.sim.trace import TraceJob


def _config(period: float, idle: float) -> SimConfig:
    """_config is exact estimates, no warm-up, the given period and idle cycle."""
    return SimConfig(estimate="noise", noise_factor=1.0, warmup_hours=0.0, cycle_interval_s=period, idle_cycle_s=idle)


def test_hand_checked_trace_on_the_2s_period():
    # One 2-GPU node, FIFO, period 2 s, no idle cycles.
    # A (2 GPUs, 101 s) arrives at 0 (on the grid): starts at 0, ends at 101 (its true end).
    # B (1 GPU, 50 s) arrives at 3: seen at tick 4, no room; A's end at 101 is seen at tick 102.
    # C (1 GPU, 10 s) arrives at 103: seen at tick 104, the other GPU is free: starts at 104.
    # D (2 GPUs, 5 s) arrives at 104 (a tick): waits for B (ends 152) and C (ends 114): 152.
    calls: list[float] = []

    def policy(snapshot, config=None):
        calls.append(snapshot.now)
        return fifo.schedule(snapshot, config)

    trace = [TraceJob("A", 0, 101, 2, tenant="t"), TraceJob("B", 3, 50, 1, tenant="t"),
             TraceJob("C", 103, 10, 1, tenant="t"), TraceJob("D", 104, 5, 2, tenant="t")]
    result = Engine(trace, load_cluster("1x2"), policy, None, _config(2.0, 0.0)).run()
    starts = {j.trace.job_id: j.first_start for j in result.jobs}
    ends = {j.trace.job_id: j.end_time for j in result.jobs}
    assert starts == {"A": 0.0, "B": 102.0, "C": 104.0, "D": 152.0}
    assert ends == {"A": 101.0, "B": 152.0, "C": 114.0, "D": 157.0}
    # B and C end on the grid (152, 114) and are decided at once; A's off-grid end waits for 102.
    assert calls == [0.0, 4.0, 102.0, 104.0, 114.0, 152.0]
    assert [j.queue_s for j in result.jobs] == [0.0, 99.0, 1.0, 48.0]


def _aging_run(idle: float) -> dict[str, float | None]:
    """_aging_run plays the aging trace under metasched and returns each job's start."""
    # One 2-GPU node. R (tenant x, 1 GPU) runs 0–1000 and R2 (tenant z, 1 GPU) 0–50.
    # S (tenant x, 1 GPU, 2,000 s) arrives at 10: no GPU is free. Big (tenant y, 2 GPUs, 100 s)
    # arrives at 20 and goes first (y has no share): the node is held for it from 1000.
    # At 50 R2 ends: the free GPU is held for Big and S would end after 1000, so S waits.
    # Aging bound 300 s: once aged, S (the oldest) outranks Big and takes the free GPU.
    config = SchedulerConfig(max_wait_s=300.0, hold_min_gpus=2, preemption_enabled=False)
    trace = [TraceJob("R", 0, 1000, 1, tenant="x"), TraceJob("R2", 0, 50, 1, tenant="z"),
             TraceJob("S", 10, 2000, 1, tenant="x"), TraceJob("Big", 20, 100, 2, tenant="y")]
    result = Engine(trace, load_cluster("1x2"), schedule, config, _config(2.0, idle)).run()
    return {j.trace.job_id: j.first_start for j in result.jobs}


def test_aging_advances_between_events_through_idle_cycles():
    # Idle cycles every 60 s after the last one (R2's end at 50): 110, 170, 230, 290, 350 — at
    # 350 S has waited 340 s, is aged and starts, with nothing arriving or ending in between.
    # Big then waits for R (1000) and S (2350).
    assert _aging_run(idle=60.0) == {"R": 0.0, "R2": 0.0, "S": 350.0, "Big": 2350.0}


def test_without_idle_cycles_aging_waits_for_the_next_event():
    # No cycle between 50 and R's end at 1000: only then is S seen aged; it takes one GPU and
    # Big waits for S's end at 3000.
    assert _aging_run(idle=0.0) == {"R": 0.0, "R2": 0.0, "S": 1000.0, "Big": 3000.0}
