"""Cycle step 12, holds: the plan's held reservations become ``ms-hold-<task>`` reservations.

The policy backfills only work that cannot delay a held gang; a Slurm reservation on the same
nodes from the planned start makes that true for jobs submitted to Slurm directly as well.
Slurm is touched only when the wanted set changes (and once after start-up, to adopt or clean up
what an earlier run left), so holds add no calls to a steady period.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from meta.policy.plan import HeldReservation
from slurm_bridge.client import SlurmClient
from slurm_bridge.errors import SlurmError
from slurm_bridge.reservations import ReservationSpec, apply_reservations, hold_name

log = logging.getLogger("metasched.holds")
_NOW_SLACK = timedelta(seconds=60)
_START_MARGIN = timedelta(minutes=5)
_MAX_HOLD_S = 24 * 3600


def desired_holds(
    held: Sequence[HeldReservation], runtime_s: Mapping[str, float], now: datetime
) -> list[ReservationSpec]:
    """desired_holds turns the plan's holds into reservation specs (start "now" when it is due)."""
    specs = []
    for hold in held:
        start = datetime.fromtimestamp(hold.planned_start, UTC)
        if start - now > _NOW_SLACK:
            # Slurm refuses to start a job whose time limit runs into a reservation on its nodes.
            # The work metasched runs or backfills there until the planned start reaches Slurm a
            # little later than planned, so the hold begins a margin later (on a whole minute);
            # metasched itself still starts the gang as soon as the capacity is free.
            start = _ceil_minute(start + _START_MARGIN)
        duration = int(min(max(runtime_s.get(hold.task_id, 3600.0), 60.0), _MAX_HOLD_S))
        specs.append(
            ReservationSpec(
                name=hold_name(hold.task_id),
                nodes=tuple(sorted(set(hold.nodes))),
                duration_s=duration,
                start=None if start - now <= _NOW_SLACK else start,
            )
        )
    return specs


def holds_due(held: Sequence[HeldReservation]) -> float | None:
    """holds_due is when the first held reservation must start "now" (epoch seconds; None: nothing held).

    Until then the wanted reservations stay as synced: a quiet period may rest on a pass that
    held gangs, and the next full pass runs by this moment (issue 24).
    """
    starts = [hold.planned_start for hold in held]
    return min(starts) - _NOW_SLACK.total_seconds() if starts else None


def _ceil_minute(moment: datetime) -> datetime:
    """_ceil_minute rounds up to a whole minute (scontrol takes minutes; never round into a job)."""
    floor = moment.replace(second=0, microsecond=0)
    return floor if floor == moment else floor + timedelta(minutes=1)


class HoldSync:
    """HoldSync keeps Slurm's ``ms-hold-*`` reservations equal to the latest plan's holds."""

    def __init__(self, client: SlurmClient):
        self.client = client
        self._applied: frozenset[tuple] | None = None  # None: not synced since start-up

    @staticmethod
    def _key(specs: Sequence[ReservationSpec]) -> frozenset[tuple]:
        return frozenset((s.name, s.nodes, s.start) for s in specs)

    def sync(self, specs: Sequence[ReservationSpec], now: datetime) -> int:
        """sync applies the wanted holds if they changed; returns the number of Slurm actions."""
        key = self._key(specs)
        if key == self._applied:
            return 0
        try:
            actions = apply_reservations(self.client, specs, now)
        except SlurmError as exc:
            log.warning("could not sync holds: %s", exc)
            self._applied = None  # try again next period
            return 0
        self._applied = key
        for action in actions:
            log.info("hold %s: %s", action.name, action.kind.value)
        return len(actions)
