"""Slurm reservations that hold nodes for a head-of-line gang, kept idempotent by name.

``plan_reservations`` compares what the scheduler wants with what Slurm has and yields create /
update / delete actions; ``apply_reservations`` runs them. Names are ``ms-hold-<task>``, so a
restarted scheduler finds and adopts its own reservations and leaves everyone else's alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

from slurm_bridge import hostlist
from slurm_bridge.errors import SlurmParseError
from slurm_bridge.launch import check_token
from slurm_bridge.parse.scontrol import SlurmReservation

if TYPE_CHECKING:
    from slurm_bridge.client import SlurmClient

HOLD_PREFIX = "ms-hold-"
# IGNORE_JOBS: the nodes are usually busy right now (that is why the gang waits); without it
# Slurm refuses with "Requested nodes are busy".
DEFAULT_FLAGS: tuple[str, ...] = ("IGNORE_JOBS",)
_CREATED = re.compile(r"Reservation created:\s*(\S+)")
_START_TOLERANCE = timedelta(seconds=60)


def hold_name(task_id: str) -> str:
    """hold_name is the reservation name for a task's head-of-line hold."""
    name = f"{HOLD_PREFIX}{task_id}"
    check_token("reservation name", name)
    return name


@dataclass(frozen=True, slots=True)
class ReservationSpec:
    """ReservationSpec is the reservation the plan wants: name, nodes, start (None = now), duration."""

    name: str
    nodes: tuple[str, ...]
    duration_s: int
    start: datetime | None = None
    users: tuple[str, ...] = ("root",)
    flags: tuple[str, ...] = DEFAULT_FLAGS

    def __post_init__(self) -> None:
        check_token("reservation name", self.name)
        if not self.nodes or self.duration_s <= 0:
            raise ValueError("a reservation needs nodes and a positive duration")
        for value in (*self.nodes, *self.users, *self.flags):
            check_token("reservation field", value)


def _start(spec: ReservationSpec) -> str:
    """_start is ``now`` or a local ISO time without offset, as scontrol expects."""
    if spec.start is None:
        return "now"
    local = spec.start.astimezone() if spec.start.tzinfo else spec.start
    return local.replace(tzinfo=None, microsecond=0).isoformat()


def _duration(seconds: int) -> str:
    """_duration renders whole minutes (rounded up), scontrol's Duration unit."""
    return str(max(1, -(-seconds // 60)))


def create_args(spec: ReservationSpec) -> list[str]:
    """create_args is the scontrol argv (after ``scontrol``) that creates ``spec``."""
    return [
        "create",
        "reservation",
        f"ReservationName={spec.name}",
        f"Nodes={hostlist.compress(spec.nodes)}",
        f"StartTime={_start(spec)}",
        f"Duration={_duration(spec.duration_s)}",
        f"Users={','.join(spec.users)}",
        f"Flags={','.join(spec.flags)}",
    ]


def update_args(spec: ReservationSpec) -> list[str]:
    """update_args is the scontrol argv that moves an existing reservation to ``spec``'s nodes and start."""
    return [
        "update",
        f"ReservationName={spec.name}",
        f"Nodes={hostlist.compress(spec.nodes)}",
        f"StartTime={_start(spec)}",
        f"Duration={_duration(spec.duration_s)}",
    ]


def delete_args(name: str) -> list[str]:
    """delete_args is the scontrol argv that deletes reservation ``name``."""
    check_token("reservation name", name)
    return ["delete", f"ReservationName={name}"]


def parse_created(output: str) -> str:
    """parse_created reads the name from ``Reservation created: <name>``."""
    match = _CREATED.search(output)
    if not match:
        raise SlurmParseError(f"scontrol create reservation: unexpected output {output.strip()[:200]!r}")
    return match.group(1)


class ActionKind(StrEnum):
    """ActionKind is what to do with one reservation."""

    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class ReservationAction:
    """ReservationAction is one step of reconciling reservations: kind, name and the wanted spec."""

    kind: ActionKind
    name: str
    spec: ReservationSpec | None = None


def needs_update(spec: ReservationSpec, existing: SlurmReservation, now: datetime) -> bool:
    """needs_update tells whether Slurm's reservation differs from the spec in nodes or start."""
    if set(spec.nodes) != set(existing.nodes):
        return True
    if existing.start is None:
        return True
    wanted = spec.start or now
    if spec.start is None and existing.start <= now:
        return False  # "now" and already started: same thing
    return abs(existing.start - wanted) > _START_TOLERANCE


def plan_reservations(
    desired: Sequence[ReservationSpec],
    existing: Sequence[SlurmReservation],
    now: datetime,
    prefix: str = HOLD_PREFIX,
) -> list[ReservationAction]:
    """plan_reservations: create what is absent, update what moved, delete our holds the plan dropped."""
    have = {reservation.name: reservation for reservation in existing}
    wanted = {spec.name: spec for spec in desired}
    actions = []
    for name, spec in sorted(wanted.items()):
        if name not in have:
            actions.append(ReservationAction(ActionKind.CREATE, name, spec))
        elif needs_update(spec, have[name], now):
            actions.append(ReservationAction(ActionKind.UPDATE, name, spec))
    for name in sorted(have):
        if name.startswith(prefix) and name not in wanted:
            actions.append(ReservationAction(ActionKind.DELETE, name))
    return actions


def apply_reservations(
    client: SlurmClient, desired: Sequence[ReservationSpec], now: datetime
) -> list[ReservationAction]:
    """apply_reservations reads Slurm's reservations, plans and applies the actions; returns them."""
    actions = plan_reservations(desired, client.reservations(), now)
    for action in actions:
        if action.kind == ActionKind.CREATE and action.spec:
            client.create_reservation(action.spec)
        elif action.kind == ActionKind.UPDATE and action.spec:
            client.update_reservation(action.spec)
        else:
            client.delete_reservation(action.name)
    return actions
