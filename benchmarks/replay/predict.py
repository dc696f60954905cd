"""predict runs the replay's slice through the simulator, so the real run can judge the simulator.

The simulated cluster is the dev cluster (2 × 8 A100, 2 × 8 H100, 2 × 4 T4, the accounts'
fair-share 70/30) and the jobs are the slice exactly as submitted (arrivals, compressed
durations, GPU counts, accounts). As on the real cluster, nothing is preempted or checkpointed
(msbatch jobs are training jobs that declared no checkpoint, so not preemptible), the
metasched side decides at the daemon's period and the baseline is the simulator's Slurm-like
policy (multifactor priority with EASY backfill). Runtime estimates: both real sides know the
time limit (duration + 1–2 minutes); the simulator's nearest rule is "duration × 2".
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.replay.slice import ReplayJob
from meta.config.policy_file import load_policy_config
from meta.sim import metrics, policies
from meta.sim.cluster import ClusterSpec, NodeGroup
from meta.sim.config import SimConfig
from meta.sim.engine import Engine
from meta.sim.trace import TraceJob

SHARES = {"tenant-a": 70.0, "tenant-b": 30.0}


def dev_cluster() -> ClusterSpec:
    """dev_cluster is the one-host Slurm dev cluster as the simulator sees it."""
    groups = [
        NodeGroup(name=kind, count=2, gpus=gpus, gpu_type=kind, cpus=32, memory="250G", switch=kind)
        for kind, gpus in (("a100", 8), ("h100", 8), ("t4", 4))
    ]
    return ClusterSpec(name="devcluster", node_groups=groups, tenants=SHARES)


def trace_of(jobs: list[ReplayJob]) -> list[TraceJob]:
    """trace_of is the slice as simulator trace rows (arrival = submit time)."""
    return [
        TraceJob(f"replay-{job.index}", job.arrival_s, float(job.duration_s), job.gpus, tenant=job.account)
        for job in jobs
    ]


def simulate(jobs: list[ReplayJob], policy: str, period_s: float, policy_config: Path | None = None) -> dict:
    """simulate is the simulator's figures for one side: queue delay, makespan, per-tenant delay."""
    config = SimConfig(
        cycle_interval_s=period_s,
        warmup_hours=0,
        estimate="noise",
        checkpoint_kinds=frozenset(),
        preemptible_kinds=frozenset(),
        tenant_weights=SHARES,
    )
    policy_fn, default_config = policies.resolve(policy)
    if policy_config is not None:
        default_config = load_policy_config(policy_config, default_config)
    raw = Engine(trace_of(jobs), dev_cluster(), policy_fn, default_config, config).run()
    report = metrics.compute(raw, SHARES)
    return {
        "queue_delay_s": report["queue"],
        "makespan_s": report["makespan_s"],
        "gpu_utilization": report["utilization"],
        "tenant_mean_delay_s": {t: v["queue"]["mean"] for t, v in report["by_tenant"].items()},
    }
