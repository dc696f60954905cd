"""Fair share: weighted dominant-resource shares with cost-weighted GPU types and decayed usage."""

from __future__ import annotations

import math
from collections.abc import Iterable

from meta.policy.capacity import TenantUsage
from meta.policy.config import SchedulerConfig
from meta.policy.inventory import Inventory
from meta.policy.snapshot import TenantState


class FairShare:
    """FairShare holds each tenant's share and raises it as this cycle places the tenant's work."""

    def __init__(self, tenants: Iterable[TenantState], config: SchedulerConfig, inv: Inventory,
                 usage: TenantUsage) -> None:
        self._cfg = config
        self._costs: dict[str | None, float] = {}
        cost_total = cpu_total = mem_total = 0.0
        for c in inv.classes:
            if c.schedulable:
                cost_total += self.cost(c.gpu_type) * c.gpus * len(c.nodes)
                cpu_total += c.cpus * len(c.nodes)
                mem_total += c.mem * len(c.nodes)
        self._totals = (cost_total or 1.0, cpu_total or 1.0, mem_total or 1.0)
        # Full use of the cluster, decayed with the half-life, integrates to capacity * t½ / ln 2.
        self._usage_norm = (cost_total or 1.0) * max(config.usage_half_life_s, 1.0) / math.log(2)
        self._weight: dict[str, float] = {}
        self._usage: dict[str, float] = {}
        for t in tenants:
            self._weight[t.name] = t.weight if t.weight > 0 else 1.0
            self._usage[t.name] = t.decayed_usage
        self._current: dict[str, list[float]] = {}
        self._cache: dict[str, float] = {}
        for tenant, (by_type, cpus, mem) in usage.items():
            gpu_cost = sum(self.cost(t) * n for t, n in by_type.items())
            self._current[tenant] = [gpu_cost, cpus, mem]

    def cost(self, gpu_type: str | None) -> float:
        """cost is the configured weight of one GPU of a type (memoised)."""
        value = self._costs.get(gpu_type)
        if value is None:
            value = self._costs[gpu_type] = self._cfg.gpu_cost(gpu_type)
        return value

    def charge(self, tenant: str, gpu_type: str | None, gpus: int, cpus: float, mem: int) -> None:
        """charge adds running (or just placed) resources to a tenant's current share."""
        cur = self._current.get(tenant)
        if cur is None:
            cur = self._current[tenant] = [0.0, 0.0, 0.0]
        cur[0] += self.cost(gpu_type) * gpus
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
