"""A noisy neighbour in simulation (issue 16): one tenant floods 20,000 jobs while two submit as usual.

Two tenants (``tenant-a``, ``tenant-b``) send a steady, seeded stream of training gangs that
keeps each at about ``others_load`` of its guarantee; the flooding tenant sends ``flood_jobs``
one-GPU jobs at one instant through the API's submit limits (``meta.policy.admission``: a
pending-job cap and the rate bucket, its client retrying in order). The same run without the
flood is the baseline. Figures per other tenant: mean queue delay and GPU share (its GPU-seconds
inside the window over the cluster's), and the policy's time per call (the period's budget).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

from meta.policy.admission import SubmitLimits
from meta.sim import policies
from meta.sim.cluster import load_cluster
from meta.sim.config import SimConfig
from meta.sim.engine import Engine, EngineResult
from meta.sim.job import JobState
from meta.sim.trace import TraceJob

OTHERS = ("tenant-a", "tenant-b")
FLOOD = "flood"
_SHAPES = (1, 2, 4, 8, 8, 16)  # GPUs of the others' jobs (two-node gangs too)


@dataclass(frozen=True)
class FloodScenario:
    """FloodScenario is the cluster, the others' steady load and the flood (sizes in jobs, times in s)."""

    nodes: int = 32
    gpus_per_node: int = 8
    hours: float = 6.0
    others_load: float = 0.6  # each other tenant's mean busy GPUs over its guarantee
    mean_duration_s: float = 1_800.0
    flood_jobs: int = 20_000
    flood_at_s: float = 3_600.0
    flood_duration_s: float = 60.0
    weights: dict[str, float] = field(default_factory=lambda: {"tenant-a": 70.0, "tenant-b": 30.0, FLOOD: 1.0})
    flood_limits: SubmitLimits = field(default_factory=lambda: SubmitLimits(max_pending=500))
    seed: int = 16


@dataclass(frozen=True)
class FloodFigures:
    """FloodFigures is one run: per other tenant (mean queue s, GPU share), the flood's, and policy time."""

    queue_mean_s: dict[str, float]
    gpu_share: dict[str, float]
    jobs: dict[str, int]
    flood_done: int
    flood_share: float  # the flooding tenant's GPU share in the window (the capacity the others left idle)
    refused: dict[str, int]
    policy_calls: int
    policy_mean_s: float
    policy_max_s: float
    max_pending: int
    wall_s: float

    def to_dict(self) -> dict[str, Any]:
        """to_dict renders the figures for --json."""
        return self.__dict__.copy()


def others_trace(scenario: FloodScenario) -> list[TraceJob]:
    """others_trace is the two steady tenants' jobs: Poisson arrivals, seeded, at ``others_load`` of their guarantee."""
    rng = random.Random(scenario.seed)
    capacity = scenario.nodes * scenario.gpus_per_node
    total = sum(scenario.weights.values())
    jobs: list[TraceJob] = []
    for tenant in OTHERS:
        guarantee = capacity * scenario.weights[tenant] / total
        mean_gpus = sum(_SHAPES) / len(_SHAPES)
        rate = scenario.others_load * guarantee / (mean_gpus * scenario.mean_duration_s)  # jobs per second
        t = 0.0
        while True:
            t += rng.expovariate(rate)
            if t >= scenario.hours * 3600:
                break
            duration = min(6 * scenario.mean_duration_s, rng.expovariate(1 / scenario.mean_duration_s)) + 60
            jobs.append(TraceJob(f"{tenant}-{len(jobs)}", t, duration, rng.choice(_SHAPES), tenant=tenant,
                                 kind_label="training"))  # fmt: skip
    return sorted(jobs, key=lambda j: (j.submit_time, j.job_id))


def flood_trace(scenario: FloodScenario) -> list[TraceJob]:
    """flood_trace is the flooding tenant's one-GPU jobs, all sent at ``flood_at_s``."""
    return [
        TraceJob(f"{FLOOD}-{i}", scenario.flood_at_s, scenario.flood_duration_s, 1, tenant=FLOOD,
                 kind_label="evaluation")  # fmt: skip
        for i in range(scenario.flood_jobs)
    ]


def run_flood(scenario: FloodScenario, *, flood: bool) -> FloodFigures:
    """run_flood simulates the others alone (``flood=False``: the baseline) or with the flood."""
    trace = others_trace(scenario) + (flood_trace(scenario) if flood else [])
    trace.sort(key=lambda j: (j.submit_time, j.job_id))
    cluster = load_cluster(f"{scenario.nodes}x{scenario.gpus_per_node}")
    limits = {FLOOD: scenario.flood_limits} if flood else {}
    config = replace(SimConfig(), warmup_hours=0.0, tenant_weights=dict(scenario.weights), submit_limits=limits)
    policy, policy_config = policies.resolve("metasched")
    engine = Engine(trace, cluster, policy, policy_config, config)
    result = engine.run()
    return _figures(result, engine, scenario)


def _figures(result: EngineResult, engine: Engine, scenario: FloodScenario) -> FloodFigures:
    """_figures reads the others' queue delay and GPU share, and the cost of the policy calls."""
    window = result.window[1] - result.window[0]
    capacity = scenario.nodes * scenario.gpus_per_node
    queue: dict[str, float] = {}
    jobs: dict[str, int] = {}
    for tenant in OTHERS:
        done = [j for j in result.jobs if j.trace.tenant == tenant and j.state == JobState.DONE]
        jobs[tenant] = len(done)
        queue[tenant] = sum(j.queue_s for j in done) / len(done) if done else 0.0
    share = {t: result.ledger.in_window.get(t, 0.0) / (capacity * window) if window else 0.0 for t in OTHERS}
    gate = engine.gate
    return FloodFigures(
        queue_mean_s=queue,
        gpu_share=share,
        jobs=jobs,
        flood_done=sum(1 for j in result.jobs if j.trace.tenant == FLOOD and j.state == JobState.DONE),
        flood_share=result.ledger.in_window.get(FLOOD, 0.0) / (capacity * window) if window else 0.0,
        refused=dict(gate.refused) if gate is not None else {},
        policy_calls=result.cycles,
        policy_mean_s=result.policy_s / result.cycles if result.cycles else 0.0,
        policy_max_s=result.policy_max_s,
        max_pending=max((s.pending for s in result.samples), default=0),
        wall_s=result.wall_s,
    )


def within(flooded: FloodFigures, baseline: FloodFigures, tolerance: float = 0.10) -> dict[str, bool]:
    """within says, per other tenant and figure, whether the flooded run is within ``tolerance`` of the baseline."""
    verdict = {}
    for tenant in OTHERS:
        for name, got, base in (("queue", flooded.queue_mean_s[tenant], baseline.queue_mean_s[tenant]),
                                ("share", flooded.gpu_share[tenant], baseline.gpu_share[tenant])):  # fmt: skip
            verdict[f"{tenant} {name}"] = abs(got - base) <= tolerance * max(base, 1e-9)
    return verdict
