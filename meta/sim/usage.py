"""Tenant usage accounting: decayed usage for fair share and GPU-time inside the measured window."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from meta.policy.snapshot import TenantState


def guarantees_from_weights(weights: dict[str, float], capacity_gpus: int, fraction: float) -> dict[str, int]:
    """guarantees_from_weights splits ``fraction`` of the GPUs into per-tenant guarantees by weight."""
    total = sum(weights.values())
    if fraction <= 0 or total <= 0:
        return {}
    return {name: int(fraction * capacity_gpus * weight / total) for name, weight in weights.items()}


@dataclass(slots=True)
class UsageLedger:
    """UsageLedger integrates each tenant's running GPUs over time (decayed and windowed)."""

    half_life_s: float
    window: tuple[float, float]
    weights: dict[str, float]
    guarantees: dict[str, int] = field(default_factory=dict)  # tenant -> GPUs of any type
    running_gpus: dict[str, int] = field(default_factory=dict)
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
        decay = 2.0 ** (-dt / self.half_life_s)
        gain = (1.0 - decay) * self.half_life_s / math.log(2.0)
        lo, hi = max(self.clock, self.window[0]), min(now, self.window[1])
        overlap = max(0.0, hi - lo)
        for tenant in set(self.decayed) | set(self.running_gpus):
            gpus = self.running_gpus.get(tenant, 0)
            self.decayed[tenant] = self.decayed.get(tenant, 0.0) * decay + gpus * gain
            if overlap and gpus:
                self.in_window[tenant] = self.in_window.get(tenant, 0.0) + gpus * overlap
        self.clock = now

    def change(self, now: float, tenant: str, delta_gpus: int) -> None:
        """change records a tenant starting (+) or releasing (−) GPUs at ``now``."""
        self.advance(now)
        self.running_gpus[tenant] = self.running_gpus.get(tenant, 0) + delta_gpus
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
