"""Checkpoint policy: how often to checkpoint (Young/Daly from failure rate and measured cost).

What preempting a running task costs — GPU-seconds since its last checkpoint plus restore
cost — is priced by the scheduler itself (``meta.policy.preemption.lost_work``) from the
checkpoint times this package records.
"""

from __future__ import annotations

import math


def young_daly_interval_s(checkpoint_cost_s: float, mtbf_s: float) -> float:
    """young_daly_interval_s is the optimal checkpoint interval sqrt(2·C·M) − C (Daly's first order).

    ``checkpoint_cost_s`` is how long writing one checkpoint takes; ``mtbf_s`` the mean time
    between failures of the whole allocation (a node's MTBF divided by the node count).
    """
    if checkpoint_cost_s <= 0 or mtbf_s <= 0:
        raise ValueError("checkpoint cost and MTBF must be positive")
    if checkpoint_cost_s >= 2 * mtbf_s:
        return mtbf_s  # failures come faster than checkpoints: checkpoint as often as you fail
    return math.sqrt(2 * checkpoint_cost_s * mtbf_s) - checkpoint_cost_s


def allocation_mtbf_s(node_mtbf_s: float, nodes: int) -> float:
    """allocation_mtbf_s: a gang fails when any of its nodes does."""
    if node_mtbf_s <= 0 or nodes < 1:
        raise ValueError("node MTBF must be positive and nodes at least 1")
    return node_mtbf_s / nodes


def expected_waste_fraction(interval_s: float, checkpoint_cost_s: float, mtbf_s: float) -> float:
    """expected_waste_fraction is the share of time lost to checkpointing and rework (first order)."""
    if interval_s <= 0:
        raise ValueError("interval must be positive")
    return checkpoint_cost_s / interval_s + (interval_s + checkpoint_cost_s) / (2 * mtbf_s)


def recommend_interval_s(
    measured_costs_s: list[float], node_mtbf_s: float, nodes: int, fallback_cost_s: float = 60.0
) -> float:
    """recommend_interval_s applies Young/Daly to the median measured checkpoint cost of a task."""
    costs = sorted(c for c in measured_costs_s if c and c > 0)
    cost = costs[len(costs) // 2] if costs else fallback_cost_s
    return young_daly_interval_s(cost, allocation_mtbf_s(node_mtbf_s, nodes))
