"""Engine behaviour: warm-up, rejection at submit, gangs, load compression, cycle grid, metrics."""

from __future__ import annotations

import pytest

from meta.policy import fifo
from meta.sim.cluster import load_cluster
from meta.sim.config import SimConfig, runtime_estimate
from meta.sim.engine import Engine
from meta.sim.job import JobState
from meta.sim.metrics import compute, utilization
from meta.sim.trace import TraceJob

EXACT = SimConfig(estimate="noise", noise_factor=1.0, warmup_hours=0.0, cycle_interval_s=0.0, idle_cycle_s=0.0)


def _run(trace, cluster="2x4", config=EXACT, originals=None):
    return Engine(trace, load_cluster(cluster), fifo.schedule, None, config, originals).run()


def test_warmup_excludes_early_arrivals_from_metrics():
    # Warm-up 1 h: the job at t=0 runs but is not measured; the window starts at 3600.
    trace = [TraceJob("early", 0, 100, 1), TraceJob("late", 3600, 100, 1), TraceJob("last", 7200, 50, 1)]
    result = _run(trace, config=SimConfig(warmup_hours=1.0, estimate="noise", noise_factor=1.0))
    assert [j.measured for j in result.jobs] == [False, True, True]
    assert result.window == (3600, 7200)
    assert compute(result, {})["jobs"]["measured"] == 2


def test_job_larger_than_the_cluster_is_rejected_at_submit():
    trace = [TraceJob("huge", 0, 100, 16), TraceJob("ok", 0, 100, 8)]
    result = _run(trace)
    assert [j.state for j in result.jobs] == [JobState.REJECTED, JobState.DONE]
    assert compute(result, {})["jobs"]["rejected"] == 1


def test_gang_spans_nodes_and_holds_both():
    # 8 GPUs on 2 × 4-GPU nodes: a gang of 2 workers × 4; the 1-GPU job waits for it.
    trace = [TraceJob("gang", 0, 100, 8), TraceJob("one", 10, 10, 1)]
    result = _run(trace)
    gang, one = result.jobs
    assert (gang.workers, gang.gpus_per_worker) == (2, 4)
    assert one.first_start == 100 and one.queue_s == 90


def test_cycle_grid_batches_events():
    # With a 60 s grid, the job arriving at t=10 starts at the next grid point, t=60.
    result = _run([TraceJob("a", 10, 100, 1)], config=SimConfig(cycle_interval_s=60, warmup_hours=0))
    assert result.jobs[0].first_start == 60 and result.cycles == 1


def test_load_compression_keeps_warmup_on_original_times():
    # Arrivals compressed ×2: the job originally at 7200 s arrives at 3600 s but is judged
    # against the 1 h warm-up on its original time, so it is measured.
    trace = [TraceJob("a", 0, 10, 1), TraceJob("b", 3600, 10, 1)]
    result = _run(trace, config=SimConfig(warmup_hours=1.5), originals=[0, 7200])
    assert [j.measured for j in result.jobs] == [False, True]


def test_utilization_integrates_busy_steps():
    # 4 of 8 GPUs busy over half of the window [0, 100]: 25%.
    assert utilization([(0, 4), (50, 0)], (0, 100), 8) == pytest.approx(0.25)


def test_runtime_estimate_buckets_never_undershoot():
    config = SimConfig()
    assert runtime_estimate(66, config) == 1800
    assert runtime_estimate(2607, config) == 3600
    assert runtime_estimate(5_185_940, config) >= 5_185_940
    assert runtime_estimate(100, SimConfig(estimate="noise", noise_factor=2.0)) == 200


def _recording(calls: list[float]):
    """_recording is FIFO that remembers when it was asked (snapshot.now)."""

    def policy(snapshot, config=None):
        calls.append(snapshot.now)
        return fifo.schedule(snapshot, config)

    return policy


def test_decisions_follow_the_daemons_period_and_waiting_work_is_looked_at_between_events():
    # One 2-GPU node. A (2 GPUs, 1,000 s) arrives at 0 and starts at once (0 is on the 2 s grid).
    # B (2 GPUs) arrives at 5: the daemon sees it at its next 2 s tick, 6, and it must wait for A.
    # With nothing arriving or ending, B is looked at again every 60 s after the last cycle
    # (66, 126, … 966) — aging and holds move with time — and A's end at 1,000 starts B.
    calls: list[float] = []
    config = SimConfig(estimate="noise", noise_factor=1.0, warmup_hours=0.0, cycle_interval_s=2.0, idle_cycle_s=60.0)
    trace = [TraceJob("A", 0, 1000, 2, tenant="t"), TraceJob("B", 5, 100, 2, tenant="t")]
    result = Engine(trace, load_cluster("1x2"), _recording(calls), None, config).run()
    assert calls == [0.0, 6.0, *(6.0 + 60.0 * k for k in range(1, 17)), 1000.0]
    a, b = result.jobs
    assert (a.first_start, b.first_start, b.queue_s) == (0.0, 1000.0, 995.0)


def test_an_arrival_off_the_grid_waits_for_the_next_tick():
    calls: list[float] = []
    config = SimConfig(estimate="noise", noise_factor=1.0, warmup_hours=0.0, cycle_interval_s=2.0, idle_cycle_s=0.0)
    result = Engine([TraceJob("A", 7, 50, 1, tenant="t")], load_cluster("1x2"), _recording(calls), None, config).run()
    assert calls == [8.0] and result.jobs[0].queue_s == 1.0  # the period's delay, charged as the daemon would


def test_no_idle_cycles_without_waiting_work():
    calls: list[float] = []
    config = SimConfig(estimate="noise", noise_factor=1.0, warmup_hours=0.0, cycle_interval_s=2.0, idle_cycle_s=60.0)
    Engine([TraceJob("A", 0, 500, 1, tenant="t")], load_cluster("1x2"), _recording(calls), None, config).run()
    assert calls == [0.0]  # A runs at once; its end frees capacity nobody waits for


def test_each_cycle_gets_the_previous_plans_holds():
    """The simulator carries a plan's holds into the next snapshot, as the daemon does (issue 21)."""
    from meta.policy.plan import carried
    from meta.policy.scheduler import schedule

    seen = []

    def spy(snapshot, config):
        plan = schedule(snapshot, config)
        seen.append((snapshot.holds, carried(plan.held)))
        return plan

    # 2 x 4 GPUs: the 8-GPU gang waits for the long job and is held; later cycles must see that hold.
    trace = [TraceJob("long", 0, 500, 4), TraceJob("gang", 10, 100, 8), TraceJob("short", 20, 50, 1)]
    Engine(trace, load_cluster("2x4"), spy, None, SimConfig(warmup_hours=0.0, idle_cycle_s=60.0)).run()
    assert any(made for _, made in seen), "the scenario never held nodes"
    assert seen[0][0] == ()
    assert all(now == before[1] for before, (now, _) in zip(seen, seen[1:], strict=False))
