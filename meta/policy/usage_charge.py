"""Fair-share usage charge: cost-weighted GPU-seconds accrued at a constant rate and decayed by a half-life.

The daemon's usage step and the simulator's ledger both charge through here, so the decayed
usage ``FairShare`` reads means the same in both (issue 20). Pure: no I/O, no clock.

With ``h`` the half-life, ``λ = ln 2 / h`` and a rate ``r`` (cost-weighted GPUs) held over
``[t, t + Δ]``, usage obeys ``u' = r − λu``, whose exact solution is::

    u(t + Δ) = u(t) · 2^(−Δ/h) + r · (1 − 2^(−Δ/h)) · h / ln 2

Being exact, splitting one interval of constant rate into several calls gives the same
result (the daemon charges every period, the simulator at every start and end), and a
constant rate converges to ``r · h / ln 2`` — the normaliser ``FairShare`` divides by.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from meta.policy.config import SchedulerConfig

_LN2 = math.log(2.0)


def decay(value: float, elapsed_s: float, half_life_s: float) -> float:
    """decay halves ``value`` every ``half_life_s`` seconds (a zero half-life forgets at once)."""
    if half_life_s <= 0:
        return 0.0
    return value * math.pow(0.5, max(elapsed_s, 0.0) / half_life_s)


def charge(prior: float, rate: float, elapsed_s: float, half_life_s: float) -> float:
    """charge is the decayed usage after holding ``rate`` cost-weighted GPUs for ``elapsed_s`` seconds.

    A non-positive ``elapsed_s`` changes nothing (a clock step backwards never grows usage);
    a non-positive half-life keeps no memory at all, the limit of the formula as h → 0.
    """
    if elapsed_s <= 0:
        return prior
    if half_life_s <= 0:
        return 0.0
    x = elapsed_s * _LN2 / half_life_s
    # expm1 keeps 1 − e^(−x) accurate when a period is tiny against the half-life (x ~ 1e-5).
    gain = -math.expm1(-x) * half_life_s / _LN2
    return prior * math.exp(-x) + rate * gain


def cost_rate(held: Iterable[tuple[str | None, int]], config: SchedulerConfig) -> float:
    """cost_rate is the cost-weighted GPUs of ``(gpu_type, gpus)`` pieces under ``config.gpu_cost``."""
    return sum(gpus * config.gpu_cost(gpu_type) for gpu_type, gpus in held)
