"""Quiet periods: when nothing the cycle reads changed, the leader reuses its last pass (issue 24).

Steps 7 to 11 read 50,000 waiting tasks and walk them through the policy; when no write reached
the tables they read (``meta/store/changes.py``), Slurm's nodes and their foreign work are as
they were, and the last pass placed and preempted nothing, the same inputs would give the same
plan — so the period skips them, as Slurm's main scheduler runs on events. A pass that held
gangs (backfill reservations) may be reused too: their planned starts come from running work's
expected ends, fixed times, so the same pass later holds the same nodes from the same moment
until the first planned start comes (the daemon wakes then: ``holds_due``). Time alone also
changes a plan: a task turning aged or urgent, a begin time or ``after+delay`` coming (the pass
computes the earliest of those), and slow drifts no event marks (usage decay in fair share,
backfill windows): a full pass runs again at the earliest of those moments and at the latest
``quiet_max_s`` after the last one, like Slurm's ``sched_interval``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from meta.policy.plan import HeldReservation, Plan
from slurm_bridge.inventory import Inventory


@dataclass(frozen=True)
class Inputs:
    """Inputs is what steps 7 to 9 read besides the store: the leader's epoch, the nodes and who else holds them."""

    epoch: int
    inventory: Inventory
    unreachable: frozenset[str]

    def same_as(self, other: Inputs) -> bool:
        """same_as: the same epoch, nodes, foreign allocation, switch tree and reachable clusters."""
        mine, theirs = self.inventory, other.inventory
        return (self.epoch == other.epoch and self.unreachable == other.unreachable and mine.version == theirs.version
                and mine.usage == theirs.usage and mine.switch_parent == theirs.switch_parent
                and mine.nodes == theirs.nodes)  # fmt: skip


class QuietWatch:
    """QuietWatch remembers the last full pass that acted on nothing and says when a period may reuse it."""

    def __init__(self, max_quiet_s: float) -> None:
        self.max_quiet_s = max_quiet_s
        self._inputs: Inputs | None = None  # None: the next period makes a full pass
        self._until = 0.0  # wall-clock seconds: the next full pass, at the latest
        self.held: tuple[HeldReservation, ...] = ()  # the last full pass's held gangs, which a rest keeps

    def forget(self) -> None:
        """forget makes the next period a full pass (a failed period, a lost lead)."""
        self._inputs = None

    def may_rest(self, inputs: Inputs, changes: int, now: float) -> bool:
        """may_rest: no store change was logged, the inputs are the last pass's and its time has not run out."""
        last = self._inputs
        return last is not None and changes == 0 and now < self._until and inputs.same_as(last)

    def passed(self, inputs: Inputs, plan: Plan, now: float, wake_at: float | None) -> None:
        """passed records a full pass that committed; one that acted (placed or preempted) is never reused."""
        acted = plan.placements or plan.preemptions
        self.held = tuple(plan.held)
        if acted or self.max_quiet_s <= 0:
            self._inputs = None
            return
        self._inputs = inputs
        self._until = min(now + self.max_quiet_s, math.inf if wake_at is None else wake_at)
