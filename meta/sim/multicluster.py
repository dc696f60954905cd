"""Multi-cluster modes: four ways to run the same jobs on several Slurm clusters (issue 26's benchmark).

* ``metasched`` — one metasched over every cluster, jobs unconfined: each cycle the policy may start
  a job on whichever cluster fits it (a gang on one cluster only);
* ``pinned`` — the same policy, every tenant confined to one cluster (``routing.pinned_router``
  over ``routing.pin_tenants`` of the tenants' GPU demand): how users work today;
* ``earliest`` — the same policy, every job confined at submit to the cluster where Slurm's
  will-run test says it starts earliest, never moved (``sbatch -M a,b``; ``routing.earliest_router``);
* ``racing`` — federation: one Slurm-like scheduler per cluster, every job in every queue, the
  first start wins (``federation.racing`` over ``meta.policy.slurmlike``).

The first three run the shipped metasched policy; only where a job may go differs. ``hashed`` (not
among ``MODES``: a diagnostic) is the same policy with every job confined to a cluster by a hash of its
id — confinement without information, to tell what a router's choices add over confining at all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from meta.sim.cluster import ClusterSpec
from meta.sim.job import JobState, SimJob
from meta.sim.routing import earliest_router, hashed_router, pin_tenants, pinned_router
from meta.sim.run import RunSpec
from meta.sim.trace import UNKNOWN_TENANT, TraceJob

MODES = ("metasched", "pinned", "earliest", "racing")
DIAGNOSTIC_MODES = ("hashed",)
SPREAD = (UNKNOWN_TENANT,)  # the trace's catch-all for unlabelled jobs: many users, pinned per job


def cluster_capacity(spec: ClusterSpec) -> dict[str, float]:
    """cluster_capacity is each Slurm cluster's GPUs."""
    out: dict[str, float] = {}
    for group in spec.node_groups:
        if group.cluster:
            out[group.cluster] = out.get(group.cluster, 0.0) + group.count * group.gpus
    return out


def tenant_demand(jobs: Iterable[TraceJob], skip: Iterable[str] = SPREAD) -> dict[str, float]:
    """tenant_demand is each tenant's GPU-hours (GPUs × duration) over the jobs, ``skip`` left out."""
    skipped = set(skip)
    out: dict[str, float] = {}
    for job in jobs:
        if job.tenant not in skipped:
            out[job.tenant] = out.get(job.tenant, 0.0) + job.num_gpus * job.duration_s / 3600.0
    return out


def mode_spec(mode: str, base: RunSpec, capacity: Mapping[str, float],
              demand: Mapping[str, float] | None = None) -> RunSpec:
    """mode_spec is ``base`` set up for one mode; ``pinned`` balances tenants by ``demand`` (GPU-hours)."""
    if mode == "metasched":
        return dataclasses.replace(base, policy="metasched", router=None, racing=False)
    if mode == "pinned":
        pins = pin_tenants(demand or {}, capacity)
        return dataclasses.replace(base, policy="metasched", router=pinned_router(pins, capacity, SPREAD),
                                   racing=False)
    if mode == "earliest":
        return dataclasses.replace(base, policy="metasched", router=earliest_router(), racing=False)
    if mode == "racing":
        return dataclasses.replace(base, policy="slurm", router=None, racing=True)
    if mode == "hashed":
        return dataclasses.replace(base, policy="metasched", router=hashed_router(capacity), racing=False)
    raise ValueError(f"unknown mode {mode!r} (choose from {', '.join(MODES + DIAGNOSTIC_MODES)})")


def clusters_by_tenant(jobs: Iterable[SimJob]) -> dict[str, dict[str, int]]:
    """clusters_by_tenant counts, per tenant, the jobs that ran (last attempt) on each cluster."""
    out: dict[str, dict[str, int]] = {}
    for job in jobs:
        if job.state == JobState.DONE or job.cluster:
            per = out.setdefault(job.trace.tenant, {})
            per[job.cluster] = per.get(job.cluster, 0) + 1
    return out
