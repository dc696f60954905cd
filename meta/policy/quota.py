"""Quotas: per tenant and GPU type, a guaranteed amount (lendable when idle) and a hard limit.

Keys are GPU types; "*" counts GPUs of any type. A tenant at its limit waits; a tenant below
its guarantee may reclaim lent capacity by preempting borrowers (tenants above theirs).

A limit at or above the cluster's capacity for its key (every node's GPUs of that type, or of any
type for "*") is unreachable: the cluster runs out before it, so it is never what stops a job and
the scheduler treats a task over it as short of capacity (issue 21: tenant-b's limit was the whole
cluster and "raise quota" was the most common reason shown).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from meta.policy.capacity import TenantUsage
from meta.policy.cluster_quota import ClusterQuota
from meta.policy.gpu_keys import ANY, count, keys_of
from meta.policy.snapshot import TenantState


class QuotaLedger:
    """QuotaLedger tracks GPUs in use per tenant and type, against guarantees and limits."""

    def __init__(self, tenants: Iterable[TenantState], usage: TenantUsage,
                 capacity: Mapping[str, int] | None = None, per_cluster: ClusterQuota | None = None) -> None:
        # per_cluster: limits hold on each cluster of the site, as Slurm's GrpTRES (cluster_quota.py)
        self.per_cluster = per_cluster
        self.used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.guaranteed: dict[str, dict[str, int]] = {}
        self.limit: dict[str, dict[str, int]] = {}
        self.capacity = capacity  # GPUs per key on every node (gpu_capacity); None: unknown
        for t in tenants:
            self.guaranteed[t.name] = t.guaranteed
            self.limit[t.name] = t.limit
        for tenant, (by_type, _, _) in usage.items():
            for gpu_type, gpus in by_type.items():
                count(self.used[tenant], gpu_type, gpus)

    def reachable(self, key: str, limit: int) -> bool:
        """reachable tells whether a limit is below the cluster's capacity for its key (unknown: yes)."""
        if self.per_cluster is not None:
            return self.per_cluster.reachable(key, limit)
        return self.capacity is None or limit < self.capacity.get(key, 0)

    def any_guarantee(self) -> bool:
        """any_guarantee tells whether any tenant has a guaranteed amount at all."""
        return any(any(g.values()) for g in self.guaranteed.values() if g)

    def charge(self, tenant: str, gpu_type: str | None, gpus: int, cluster: str | None = None) -> None:
        """charge counts GPUs against the tenant (running, placed or about to be placed), on ``cluster`` too."""
        if gpus:
            count(self.used[tenant], gpu_type, gpus)
            if self.per_cluster is not None and cluster is not None:
                self.per_cluster.charge(tenant, cluster, gpu_type, gpus)

    def limit_exceeded(self, tenant: str, gpu_type: str | None, gpus: int) -> tuple[str, int, int] | None:
        """limit_exceeded returns (key, used, limit) of a limit ``gpus`` more would break, reachable ones first."""
        limits = self.limit.get(tenant) or {}
        if self.per_cluster is not None and self.per_cluster.limited(tenant, limits):
            # per cluster: broken only when no cluster has room (the caller narrows to those that do)
            return self.per_cluster.broken_everywhere(limits, tenant, gpu_type, gpus, self.per_cluster.clusters)
        if not limits:
            return None
        used = self.used.get(tenant, {})
        broken = None
        for key in keys_of(gpu_type):
            cap = limits.get(key)
            if cap is not None and used.get(key, 0) + gpus > cap:
                if self.reachable(key, cap):
                    return key, used.get(key, 0), cap
                broken = broken or (key, used.get(key, 0), cap)
        return broken

    def below_guarantee(self, tenant: str, gpu_type: str | None, gpus: int) -> bool:
        """below_guarantee tells whether ``gpus`` more still fit inside the tenant's guarantee."""
        if not gpus:
            return False
        guaranteed = self.guaranteed.get(tenant) or {}
        used = self.used.get(tenant, {})
        for key in keys_of(gpu_type):
            amount = guaranteed.get(key)
            if amount is not None and used.get(key, 0) + gpus <= amount:
                return True
        return False

    def keeps_guarantee(self, tenant: str, gpu_type: str | None, released: int) -> bool:
        """keeps_guarantee tells whether a tenant still uses at least its guarantee once ``released`` GPUs stop.

        Every guarantee the GPUs count against (their type's and "*") must stay covered: below any
        of them the tenant is owed capacity again (below_guarantee) and may reclaim it.
        """
        guaranteed = self.guaranteed.get(tenant) or {}
        used = self.used.get(tenant, {})
        for key in keys_of(gpu_type):
            amount = guaranteed.get(key)
            if amount and used.get(key, 0) - released < amount:
                return False
        return True

    def borrowing(self, tenant: str, gpu_type: str | None, released: int = 0) -> bool:
        """borrowing tells whether a tenant (after ``released`` GPUs stop) still uses more than guaranteed."""
        guaranteed = self.guaranteed.get(tenant) or {}
        used = self.used.get(tenant, {})
        key = gpu_type if gpu_type in guaranteed else ANY
        return used.get(key, 0) - released > guaranteed.get(key, 0)
