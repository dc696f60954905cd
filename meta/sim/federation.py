"""racing: one scheduler per Slurm cluster, every job queued on all of them, the first start wins (issue 26).

This models federation (Slurm's federated sibling jobs, Kueue's MultiKueue): each cluster runs its
own scheduler over its own nodes and running work, every job not yet started is in every queue it
may use, and the first cluster to start it takes it (the siblings are revoked). In one simulated
cycle the clusters decide one after another in name order, each on the jobs the clusters before it
left, so a job is started at most once and ties go to the first-named cluster.

Approximations: the clusters decide on the same period; fair share reads the site's one usage
ledger (a federation's clusters share one slurmdbd); a job confined to clusters
(``PendingTask.clusters``) is only in their queues. A wrapped policy with guarantees (metasched)
would honour each tenant's guarantee on every cluster at once: racing is meant for the baselines.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from meta.model.clusters import cluster_of
from meta.model.nodes import NodeState
from meta.policy.plan import FragmentationReport, Plan
from meta.policy.snapshot import Snapshot

PolicyFn = Callable[[Snapshot, Any], Plan]


def clusters_of(nodes: tuple[NodeState, ...]) -> dict[str, tuple[NodeState, ...]]:
    """clusters_of groups nodes by Slurm cluster, in name order ('' for bare names)."""
    out: dict[str, tuple[NodeState, ...]] = {}
    for node in nodes:
        cluster = cluster_of(node.name)
        out[cluster] = (*out.get(cluster, ()), node)
    return dict(sorted(out.items()))


def cluster_snapshot(snapshot: Snapshot, cluster: str, nodes: tuple[NodeState, ...], taken: set[str],
                     pending: bool = True) -> Snapshot:
    """cluster_snapshot is one cluster's own view: its nodes, its running work and holds, the jobs still racing."""
    names = {node.name for node in nodes}
    return dataclasses.replace(
        snapshot,
        nodes=nodes,
        reservations=tuple(r for r in snapshot.reservations if r.shares and r.shares[0].node in names),
        pending=tuple(t for t in snapshot.pending
                      if t.task_id not in taken and (not t.clusters or cluster in t.clusters)) if pending else (),
        holds=tuple(h for h in snapshot.holds if h.nodes and set(h.nodes) <= names),
    )


def racing(policy: PolicyFn) -> PolicyFn:
    """racing wraps a one-cluster policy into a federation of one instance per cluster (see the module doc)."""

    def schedule(snapshot: Snapshot, config: Any = None) -> Plan:
        """schedule lets each cluster decide in turn on the jobs not started yet; the plans are merged."""
        plan = Plan(inventory_version=snapshot.inventory_version)
        taken: set[str] = set()
        parts: list[FragmentationReport] = []
        for cluster, nodes in clusters_of(snapshot.nodes).items():
            part = policy(cluster_snapshot(snapshot, cluster, nodes, taken), config)
            plan.placements.extend(part.placements)
            plan.preemptions.extend(part.preemptions)
            plan.held.extend(part.held)
            taken.update(p.task_id for p in part.placements)
            for task_id, reason in part.reasons.items():
                plan.reasons.setdefault(task_id, reason)  # the first cluster's word on a job still waiting
            parts.append(part.fragmentation)
        # a job started on one cluster is revoked everywhere else: no reason and no hold for it remain
        plan.reasons = {k: v for k, v in plan.reasons.items() if k not in taken}
        plan.held = [h for h in plan.held if h.task_id not in taken]
        plan.fragmentation = merged(parts)
        return plan

    schedule.__qualname__ = f"racing({getattr(policy, '__module__', '')}.{getattr(policy, '__name__', 'policy')})"
    return schedule


def merged(parts: list[FragmentationReport]) -> FragmentationReport:
    """merged adds the clusters' fragmentation reports (largest placeable gang: the largest on one cluster)."""

    def add(key: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for part in parts:
            for name, value in getattr(part, key).items():
                out[name] = out.get(name, 0) + value
        return out

    placeable: dict[str, int] = {}
    for part in parts:
        for name, value in part.placeable_by_type.items():
            placeable[name] = max(placeable.get(name, 0), value)
    return FragmentationReport(
        free_gpus=sum(p.free_gpus for p in parts),
        stranded_gpus=sum(p.stranded_gpus for p in parts),
        largest_placeable_gang_gpus=max((p.largest_placeable_gang_gpus for p in parts), default=0),
        free_by_type=add("free_by_type"),
        placeable_by_type=placeable,
    )
