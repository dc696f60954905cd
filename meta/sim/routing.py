"""Routers: which Slurm cluster a job is confined to when it is submitted (issue 26's baselines).

A router (``meta.sim.engine.Router``) is called once per job at submit and returns the clusters
the task may use (``PendingTask.clusters``; empty = any); the engine never changes it afterwards.

* ``pinned_router`` — how users work today: each tenant submits to its own cluster
  (``pin_tenants`` balances tenants over clusters by GPU demand); tenants named in ``spread``
  (the trace's catch-all ``unknown``: many users, not one tenant) and tenants the assignment does
  not know are placed per job (or per tenant) by a stable hash, in proportion to cluster capacity.
* ``earliest_router`` — Slurm's ``sbatch -M a,b``: the cluster where the job would start earliest
  *at submit*, never moved. The estimate is Slurm's will-run test: now if it fits now, else the
  expected end of running work (start + time limit) by which it would fit (``slurmlike.shadow_time``),
  ignoring the queue, as will-run does. Ties (e.g. it fits now on both) go to the cluster with the
  most free GPUs it could use net of the GPUs of jobs already confined there and waiting, then to
  the name first in order; real Slurm takes the first cluster listed, which piles a burst onto it.
  A dark cluster does not answer; if none answers, the job is routed as if all did.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Collection, Mapping

from meta.model.nodes import NodeState
from meta.policy.fifo import eligible, first_fit, free_capacity, never_fits
from meta.policy.slurmlike import SlurmLikeConfig, shadow_time
from meta.policy.snapshot import PendingTask, Snapshot
from meta.sim.engine import Router
from meta.sim.federation import cluster_snapshot, clusters_of
from meta.sim.trace import UNKNOWN_TENANT


def pin_tenants(demand: Mapping[str, float], capacity: Mapping[str, float]) -> dict[str, str]:
    """pin_tenants gives each tenant one cluster: largest demand first, each to the least loaded per GPU.

    Greedy longest-processing-time balancing: tenants in order of demand (ties: name) go to the
    cluster whose assigned demand ÷ capacity is lowest (ties: name), so each cluster gets a share
    of the demand close to its share of the GPUs.
    """
    if not capacity or any(c <= 0 for c in capacity.values()):
        raise ValueError(f"every cluster needs a positive capacity: {dict(capacity)}")
    load = {cluster: 0.0 for cluster in sorted(capacity)}
    out: dict[str, str] = {}
    for tenant in sorted(demand, key=lambda t: (-demand[t], t)):
        cluster = min(load, key=lambda c: (load[c] / capacity[c], c))
        load[cluster] += demand[tenant]
        out[tenant] = cluster
    return out


def hashed_cluster(key: str, capacity: Mapping[str, float]) -> str:
    """hashed_cluster maps ``key`` to a cluster by a stable hash, each cluster in proportion to its capacity."""
    clusters = sorted(capacity)
    total = sum(capacity[c] for c in clusters)
    point = (zlib.crc32(key.encode()) / 2**32) * total
    for cluster in clusters:
        point -= capacity[cluster]
        if point < 0:
            return cluster
    return clusters[-1]


def pinned_router(
    assignment: Mapping[str, str],
    capacity: Mapping[str, float],
    spread: Collection[str] = (UNKNOWN_TENANT,),
) -> Router:
    """pinned_router confines each job to its tenant's cluster (``spread`` tenants: per job, by hash)."""

    def route(task: PendingTask, snapshot: Snapshot) -> frozenset[str]:
        """route is the tenant's cluster."""
        if task.tenant in spread:
            return frozenset({hashed_cluster(task.job_id, capacity)})
        cluster = assignment.get(task.tenant)
        return frozenset({cluster or hashed_cluster(task.tenant, capacity)})

    return route


def hashed_router(capacity: Mapping[str, float]) -> Router:
    """hashed_router confines each job to a cluster by a stable hash of its id: a blind split (a diagnostic)."""

    def route(task: PendingTask, snapshot: Snapshot) -> frozenset[str]:
        """route is the job's hashed cluster."""
        return frozenset({hashed_cluster(task.job_id, capacity)})

    return route


def earliest_router(config: SlurmLikeConfig | None = None) -> Router:
    """earliest_router confines each job to the cluster where it would start earliest at submit (module doc)."""
    config = config or SlurmLikeConfig()

    def route(task: PendingTask, snapshot: Snapshot) -> frozenset[str]:
        """route is the one cluster with the earliest will-run start; empty on a one-cluster site."""
        clusters = clusters_of(snapshot.nodes)
        if len(clusters) < 2:
            return frozenset()
        allowed = {c: nodes for c, nodes in clusters.items() if not task.clusters or c in task.clusters}
        asked = {c: nodes for c, nodes in allowed.items() if any(n.schedulable() for n in nodes)}
        if not asked:  # no cluster answers: the client guesses as if all were up
            asked = {c: tuple(dataclasses.replace(n, healthy=True) for n in nodes) for c, nodes in allowed.items()}
        starts = {c: will_run(task, snapshot, c, nodes, config) for c, nodes in asked.items()}
        best = min(starts.values(), default=math.inf)
        if best == math.inf:
            return frozenset()  # fits nowhere: the engine rejects it on its own terms
        tied = [c for c, start in starts.items() if start == best]
        if len(tied) > 1:
            tied.sort(key=lambda c: (-net_free_gpus(task, snapshot, c, asked[c]), c))
        return frozenset({tied[0]})

    return route


def will_run(task: PendingTask, snapshot: Snapshot, cluster: str, nodes: tuple[NodeState, ...],
             config: SlurmLikeConfig) -> float:
    """will_run is when the task would start on one cluster's ``nodes`` by its running work alone (inf: never)."""
    if never_fits(task, nodes):
        return math.inf
    view = cluster_snapshot(snapshot, cluster, nodes, set(), pending=False)
    free = free_capacity(view)
    if first_fit(task, nodes, free) is not None:
        return snapshot.now
    shadow = shadow_time(view, task, free, [], config)
    return math.inf if shadow is None else shadow.start


def net_free_gpus(task: PendingTask, snapshot: Snapshot, cluster: str, nodes: tuple[NodeState, ...]) -> int:
    """net_free_gpus is the free GPUs the task could use on the cluster minus those its confined waiting jobs ask."""
    free = free_capacity(cluster_snapshot(snapshot, cluster, nodes, set(), pending=False))
    usable = sum(int(free[n.name][2]) for n in nodes if n.name in free and eligible(n, task))
    queued = sum(t.per_worker.gpus * t.workers for t in snapshot.pending if t.clusters == frozenset({cluster}))
    return usable - queued
