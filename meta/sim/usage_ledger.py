"""The simulator's usage ledger: decayed fair-share usage (charged as the daemon charges) and windowed GPU-time.

Fair-share usage is cost-weighted GPU-seconds through ``meta.policy.usage_charge``, with the
cost weights and half-life of the SchedulerConfig metasched's policy runs with — the daemon's
usage step charges through the same function. The windowed GPU-time and the busy timeline
stay in raw GPUs: they feed utilisation and share-of-cluster figures, not fair share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from meta.policy.config import SchedulerConfig
from meta.policy.snapshot import TenantState
from meta.policy.usage_charge import charge, cost_rate


def guarantees_from_weights(weights: dict[str, float], capacity_gpus: int, fraction: float) -> dict[str, int]:
    """guarantees_from_weights splits ``fraction`` of the GPUs into per-tenant guarantees by weight."""
    total = sum(weights.values())
    if fraction <= 0 or total <= 0:
        return {}
    return {name: int(fraction * capacity_gpus * weight / total) for name, weight in weights.items()}


def usage_config(policy: Any, policy_config: Any, half_life_s: float) -> SchedulerConfig:
    """usage_config is what the ledger charges by: metasched's SchedulerConfig, else raw GPU-time.

    The baselines have no cost weights (slurmlike: "no TRES billing weights"), so they are
    charged one per GPU with the simulator's ``half_life_s`` (Slurm's PriorityDecayHalfLife).
    """
    if isinstance(policy_config, SchedulerConfig):
        return policy_config
    if policy_config is None and getattr(policy, "__module__", "") == "meta.policy.scheduler":
        return SchedulerConfig()  # what metasched's schedule() falls back to without a config
    return SchedulerConfig(gpu_cost_weights={}, default_gpu_cost_weight=1.0, usage_half_life_s=half_life_s)


@dataclass(slots=True)
class UsageLedger:
    """UsageLedger integrates each tenant's running GPUs over time (decayed cost-weighted, windowed raw)."""

    config: SchedulerConfig  # cost weights and half-life of fair-share usage
    window: tuple[float, float]
    weights: dict[str, float]
    guarantees: dict[str, int] = field(default_factory=dict)  # tenant -> GPUs of any type
    running_gpus: dict[str, int] = field(default_factory=dict)
    # tenant -> GPU type -> GPUs held; counts stay integers so the rate never drifts off zero
    held: dict[str, dict[str | None, int]] = field(default_factory=dict)
    rates: dict[str, float] = field(default_factory=dict)  # tenant -> cost-weighted GPUs held
    decayed: dict[str, float] = field(default_factory=dict)
    in_window: dict[str, float] = field(default_factory=dict)
    busy_gpus: int = 0
    timeline: list[tuple[float, int]] = field(default_factory=list)  # (time, busy GPUs) steps
    clock: float = 0.0

    def advance(self, now: float) -> None:
        """advance integrates usage from the ledger's clock up to ``now``."""
        dt = now - self.clock
        if dt <= 0:
            return
        half_life = self.config.usage_half_life_s
        lo, hi = max(self.clock, self.window[0]), min(now, self.window[1])
        overlap = max(0.0, hi - lo)
        for tenant in set(self.decayed) | set(self.running_gpus):
            gpus = self.running_gpus.get(tenant, 0)
            self.decayed[tenant] = charge(self.decayed.get(tenant, 0.0), self.rates.get(tenant, 0.0), dt, half_life)
            if overlap and gpus:
                self.in_window[tenant] = self.in_window.get(tenant, 0.0) + gpus * overlap
        self.clock = now

    def change(self, now: float, tenant: str, delta_gpus: int, gpu_type: str | None = None) -> None:
        """change records a tenant starting (+) or releasing (−) GPUs of ``gpu_type`` at ``now``."""
        self.advance(now)
        self.running_gpus[tenant] = self.running_gpus.get(tenant, 0) + delta_gpus
        by_type = self.held.setdefault(tenant, {})
        by_type[gpu_type] = by_type.get(gpu_type, 0) + delta_gpus
        self.rates[tenant] = cost_rate(by_type.items(), self.config)
        self.busy_gpus += delta_gpus
        if self.timeline and self.timeline[-1][0] == now:
            self.timeline[-1] = (now, self.busy_gpus)
        else:
            self.timeline.append((now, self.busy_gpus))

    def tenant_states(self) -> tuple[TenantState, ...]:
        """tenant_states renders the tenants for a snapshot (known weights, decayed usage)."""
        names = set(self.weights) | set(self.decayed) | set(self.running_gpus)
        return tuple(
            TenantState(
                name=name,
                weight=self.weights.get(name, 1.0),
                guaranteed={"*": self.guarantees[name]} if name in self.guarantees else {},
                decayed_usage=self.decayed.get(name, 0.0),
            )
            for name in sorted(names)
        )
