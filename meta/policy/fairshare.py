"""Fair share: weighted dominant-resource shares with cost-weighted GPU types and decayed usage."""

from __future__ import annotations

import math

from meta.policy.config import SchedulerConfig
from meta.policy.snapshot import Snapshot


class FairShare:
    """FairShare holds each tenant's share and raises it as this cycle places the tenant's work."""

    def __init__(self, snapshot: Snapshot, config: SchedulerConfig) -> None:
        self._cfg = config
        node_type: dict[str, str | None] = {}
        cost_total = cpu_total = mem_total = 0.0
        for node in snapshot.nodes:
            c = node.capacity
            node_type[node.name] = c.gpu_type if c.gpus else None
            if node.schedulable():
                cost_total += config.gpu_cost(c.gpu_type) * c.gpus
                cpu_total += c.cpus
                mem_total += c.memory_mib
        self._totals = (cost_total or 1.0, cpu_total or 1.0, mem_total or 1.0)
        # Full use of the cluster, decayed with the half-life, integrates to capacity * t½ / ln 2.
        self._usage_norm = (cost_total or 1.0) * max(config.usage_half_life_s, 1.0) / math.log(2)
        self._weight: dict[str, float] = {}
        self._usage: dict[str, float] = {}
        for t in snapshot.tenants:
            self._weight[t.name] = t.weight if t.weight > 0 else 1.0
            self._usage[t.name] = t.decayed_usage
        self._current: dict[str, list[float]] = {}
        self._cache: dict[str, float] = {}
        for r in snapshot.reservations:
            for share in r.shares:
                res = share.resources
                gpu_type = res.gpu_type or node_type.get(share.node)
                self.charge(r.tenant, gpu_type, res.gpus, res.cpus, res.memory_mib)

    def charge(self, tenant: str, gpu_type: str | None, gpus: int, cpus: float, mem: int) -> None:
        """charge adds running (or just placed) resources to a tenant's current share."""
        cur = self._current.setdefault(tenant, [0.0, 0.0, 0.0])
        cur[0] += self._cfg.gpu_cost(gpu_type) * gpus
        cur[1] += cpus
        cur[2] += mem
        self._cache.pop(tenant, None)

    def share(self, tenant: str) -> float:
        """share is the tenant's weighted dominant share: decayed usage plus what it holds now."""
        cached = self._cache.get(tenant)
        if cached is not None:
            return cached
        cur = self._current.get(tenant, (0.0, 0.0, 0.0))
        dominant = max(cur[0] / self._totals[0], cur[1] / self._totals[1], cur[2] / self._totals[2])
        usage = self._usage.get(tenant, 0.0) / self._usage_norm
        value = (self._cfg.usage_share_weight * usage + self._cfg.current_share_weight * dominant)
        value /= self._weight.get(tenant, 1.0)
        self._cache[tenant] = value
        return value
