"""A contended case for the simulator: three tenants' small jobs and gangs on 8 × 8 GPUs under guarantees.

The case that found the preemption livelock (tests/sim/test_preemption_terminates.py), and that
test_waiting_causes.py replays with and without the waiting ledger.
"""

from __future__ import annotations

import random

from meta.model.kinds import Topology
from meta.sim.cluster import ClusterSpec, load_cluster
from meta.sim.config import SimConfig
from meta.sim.trace import TraceJob


def random_trace(seed: int, jobs: int = 160) -> list[TraceJob]:
    """random_trace is a contended mix of small training jobs and gangs over three tenants."""
    rng = random.Random(seed)
    out, now = [], 0.0
    for i in range(jobs):
        now += rng.expovariate(1 / 40)
        out.append(TraceJob(f"j{i}", now, rng.choice([60, 300, 900, 3600]), rng.choice([1, 2, 3, 4, 8, 12, 16, 24]),
                            tenant=rng.choice(["x", "y", "z"])))  # fmt: skip
    return out


def weighted_cluster() -> ClusterSpec:
    """weighted_cluster is 8 × 8 GPUs on two leaf switches of 4 nodes, with guarantees by weight x: 2, y: 1, z: 1."""
    cluster = load_cluster("8x8").model_copy(update={"tenants": {"x": 2.0, "y": 1.0, "z": 1.0}})
    cluster.node_groups[0] = cluster.node_groups[0].model_copy(update={"switch_size": 4})
    return cluster


def switched_config() -> SimConfig:
    """switched_config keeps every gang under one switch, judging from 0.2 h on, strictly."""
    return SimConfig(warmup_hours=0.2, gang_topology=Topology.REQUIRE_SAME_SWITCH, strict=True)
