"""Fairness: Jain's index over share-normalised GPU-time.

Definition used by every report: for each tenant with demand in the measured window,

* demand_i = GPU-seconds its jobs would hold inside the window if each ran from its submit
  time (an unconstrained cluster);
* fair_i = the weighted max-min ("water-filling") split of capacity × window by tenant
  weights, each tenant capped at demand_i (a tenant never deserves more than it asks for);
* x_i = min(received_i / fair_i, 1) — receiving more than the fair share because others left
  capacity idle is not unfair, so it is capped;

and Jain's index is (Σx)² / (n · Σx²): 1.0 when every tenant got at least its fair share,
→ 1/n when one tenant got everything it was owed and the others nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def water_fill(capacity: float, demand: Mapping[str, float], weights: Mapping[str, float]) -> dict[str, float]:
    """water_fill splits ``capacity`` by weight, capping each tenant at its demand."""
    fair = {name: 0.0 for name in demand}
    active = {name for name, want in demand.items() if want > 0}
    left = capacity
    while active and left > 1e-9:
        total_weight = sum(weights.get(name, 1.0) for name in active)
        step = {name: left * weights.get(name, 1.0) / total_weight for name in active}
        capped = {name for name in active if fair[name] + step[name] >= demand[name]}
        if not capped:
            for name in active:
                fair[name] += step[name]
            break
        for name in capped:
            left -= demand[name] - fair[name]
            fair[name] = demand[name]
        active -= capped
    return fair


def jain(values: Iterable[float]) -> float:
    """jain is Jain's fairness index of the values (1.0 for an empty or all-zero list)."""
    xs = list(values)
    squares = sum(x * x for x in xs)
    return 1.0 if not xs or squares == 0 else sum(xs) ** 2 / (len(xs) * squares)


def share_normalised(
    received: Mapping[str, float], demand: Mapping[str, float], weights: Mapping[str, float], capacity: float
) -> dict[str, float]:
    """share_normalised is each demanding tenant's received ÷ fair GPU-time, capped at 1."""
    fair = water_fill(capacity, demand, weights)
    return {
        name: min(received.get(name, 0.0) / share, 1.0)
        for name, share in fair.items()
        if share > 0
    }


def window_demand(intervals: Iterable[tuple[str, float, float, int]], window: tuple[float, float]) -> dict[str, float]:
    """window_demand sums gpus × |[submit, submit + duration] ∩ window| per tenant."""
    lo, hi = window
    demand: dict[str, float] = {}
    for tenant, start, duration, gpus in intervals:
        overlap = min(start + duration, hi) - max(start, lo)
        if overlap > 0 and gpus:
            demand[tenant] = demand.get(tenant, 0.0) + overlap * gpus
    return demand
