"""Metrics of one run: completion times, queue delays, utilization, preemption cost, fairness.

Conventions (printed with every report):

* only jobs that arrived after the warm-up are measured; rejected jobs are counted, not timed;
* queue delay = all time a job spent pending, requeues after preemption included;
  JCT = completion − submit;
* utilization = allocated GPU-time ÷ (cluster GPUs × measured window), the window running
  from the first measured arrival to the last arrival (the drain after it is not counted);
  useful utilization leaves out the GPU-time preemptions wasted inside the window (work
  discarded since the last checkpoint, checkpoint restores);
* lost GPU-hours = discarded work + restore time, and preemptions, of measured jobs;
* physical bound = mean JCT ÷ mean run time of the measured completed jobs (1 = nobody waited);
* makespan = last completion − first arrival (all jobs);
* stranded GPUs = plan.fragmentation.stranded_gpus, time-weighted over the measured window;
  ``series_h`` samples [hour, stranded, free] over time (≤ ~200 points).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from meta.sim.engine import CycleSample, EngineResult
from meta.sim.fairness import jain, share_normalised, window_demand
from meta.sim.job import JobState, SimJob

BIG_JOB_GPUS = 64


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """percentile is the q-th percentile (0–100) by linear interpolation of sorted values."""
    if not sorted_values:
        return 0.0
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summary(values: Iterable[float]) -> dict[str, float]:
    """summary is count, mean, p50, p95, p99 and max of the values."""
    xs = sorted(values)
    if not xs:
        return {"n": 0, "mean": 0.0, "p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}
    return {
        "n": len(xs),
        "mean": sum(xs) / len(xs),
        "p50": percentile(xs, 50),
        "p95": percentile(xs, 95),
        "p99": percentile(xs, 99),
        "max": xs[-1],
    }


def _grouped(jobs: list[SimJob], key) -> dict[str, dict[str, dict[str, float]]]:
    """_grouped summarises JCT and queue delay per group of jobs."""
    groups: dict[str, list[SimJob]] = {}
    for job in jobs:
        groups.setdefault(key(job), []).append(job)
    return {
        name: {"jct": summary(j.jct for j in members), "queue": summary(j.queue_s for j in members)}
        for name, members in sorted(groups.items())
    }


def utilization(timeline: list[tuple[float, int]], window: tuple[float, float], capacity: int) -> float:
    """utilization integrates the busy-GPU step function over the window, over capacity."""
    lo, hi = window
    if hi <= lo or capacity <= 0:
        return 0.0
    area = 0.0
    for (t0, busy), (t1, _) in zip(timeline, [*timeline[1:], (hi, 0)], strict=True):
        overlap = min(t1, hi) - max(t0, lo)
        if overlap > 0:
            area += busy * overlap
    return area / (capacity * (hi - lo))


def wasted(waste: list[tuple[float, float, int]], window: tuple[float, float], capacity: int) -> float:
    """wasted is the share of the window's GPU-time spent on discarded work and restores."""
    lo, hi = window
    if hi <= lo or capacity <= 0:
        return 0.0
    area = sum(max(0.0, min(end, hi) - max(start, lo)) * gpus for start, end, gpus in waste)
    return area / (capacity * (hi - lo))


def stranded(samples: list[CycleSample], window: tuple[float, float]) -> dict[str, float]:
    """stranded time-weights the stranded-GPU samples over the window; also their p95 and max."""
    inside = [s for s in samples if window[0] <= s.time <= window[1]]
    if len(inside) < 2:
        return {"mean": 0.0, "p95": 0.0, "max": 0.0, "samples": len(inside)}
    area = sum(a.stranded_gpus * (b.time - a.time) for a, b in zip(inside, inside[1:], strict=False))
    span = inside[-1].time - inside[0].time
    values = sorted(s.stranded_gpus for s in inside)
    step = max(1, len(inside) // 200)  # at most ~200 points: enough to see fragmentation over time
    return {
        "mean": area / span if span else 0.0,
        "p95": percentile(values, 95),
        "max": values[-1],
        "samples": len(inside),
        "series_h": [[round(s.time / 3600, 3), s.stranded_gpus, s.free_gpus] for s in inside[::step]],
    }


def fairness(result: EngineResult, weights: dict[str, float]) -> dict[str, Any]:
    """fairness computes Jain's index over share-normalised GPU-time (see meta.sim.fairness)."""
    window = result.window
    intervals = ((j.trace.tenant, j.submit, j.trace.duration_s, j.gpus) for j in result.jobs if j.state != JobState.REJECTED)
    demand = window_demand(intervals, window)
    capacity = result.capacity_gpus * (window[1] - window[0])
    xs = share_normalised(result.ledger.in_window, demand, weights, capacity)
    return {"jain": jain(xs.values()), "tenants": len(xs), "share_ratio": {k: round(v, 4) for k, v in sorted(xs.items())}}


def compute(result: EngineResult, weights: dict[str, float]) -> dict[str, Any]:
    """compute turns an engine result into the report's figures (times in seconds)."""
    done = [j for j in result.jobs if j.measured and j.state == JobState.DONE]
    measured = [j for j in result.jobs if j.measured]
    busy = utilization(result.ledger.timeline, result.window, result.capacity_gpus)
    big = [j for j in done if j.gpus >= BIG_JOB_GPUS]
    all_done = [j for j in result.jobs if j.state == JobState.DONE]
    first = min((j.submit for j in result.jobs), default=0.0)
    last_end = max((j.end_time or 0.0 for j in all_done), default=first)
    return {
        "jobs": {
            "total": len(result.jobs),
            "measured": sum(1 for j in result.jobs if j.measured),
            "completed_measured": len(done),
            "rejected": sum(1 for j in result.jobs if j.state == JobState.REJECTED),
            "unfinished": sum(1 for j in result.jobs if j.state in (JobState.PENDING, JobState.RUNNING)),
        },
        "jct": summary(j.jct for j in done),
        "queue": summary(j.queue_s for j in done),
        "by_kind": _grouped(done, lambda j: j.trace.kind_label),
        "by_tenant": _grouped(done, lambda j: j.trace.tenant),
        "big_jobs": {"min_gpus": BIG_JOB_GPUS, "n": len(big), "queue": summary(j.queue_s for j in big)},
        "utilization": busy,
        # busy GPU-time minus the time preemptions wasted (discarded work, checkpoint restores)
        "useful_utilization": busy - wasted(result.waste, result.window, result.capacity_gpus),
        # how far from no waiting at all: mean JCT over the mean run time of the same jobs (>= 1)
        "physical_bound": (sum(j.jct for j in done) / sum(j.trace.duration_s for j in done))
        if done and sum(j.trace.duration_s for j in done) > 0 else 0.0,
        "makespan_s": last_end - first,
        # of measured jobs (warm-up jobs run but are not counted, as everywhere else)
        "preemptions": sum(j.preemptions for j in measured),
        "lost_gpu_hours": sum(j.lost_gpu_s for j in measured) / 3600.0,
        "lost_gpu_hours_detail": {
            "discarded": sum(j.discarded_gpu_s for j in measured) / 3600.0,
            "restores": sum(j.restore_gpu_s for j in measured) / 3600.0,
        },
        "fairness": fairness(result, weights),
        "stranded_gpus": stranded(result.samples, result.window),
        "window_s": list(result.window),
        "cycles": result.cycles,
        "held_reservations": result.held_reservations,
        "invalid_placements": result.invalid_placements,
        "policy_s": result.policy_s,
        "wall_s": result.wall_s,
    }
