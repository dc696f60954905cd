"""Slurm reservations that hold nodes for a head-of-line gang, kept idempotent by name.

``plan_reservations`` compares what the scheduler wants with what Slurm has and yields create /
update / delete actions; ``apply_reservations`` runs them. Names are ``ms-hold-<task>``, so a
restarted scheduler finds and adopts its own reservations and leaves everyone else's alone.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

from meta.model.clusters import cluster_of, qualify, split_qualified
from slurm_bridge import hostlist
from slurm_bridge.errors import ReservationInUse, SlurmError, SlurmParseError, SlurmRejected
from slurm_bridge.launch import check_token
from slurm_bridge.parse.scontrol import SlurmReservation

if TYPE_CHECKING:
    from slurm_bridge.client import SlurmClient

log = logging.getLogger(__name__)

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


def update_args(spec: ReservationSpec, *, move_start: bool = True) -> list[str]:
    """update_args is the scontrol argv that moves a reservation to ``spec``'s nodes (and start)."""
    args = ["update", f"ReservationName={spec.name}", f"Nodes={hostlist.compress(spec.nodes)}"]
    # Slurm refuses a new StartTime once a reservation has started ("Reservation already started").
    args += [f"StartTime={_start(spec)}"] if move_start else []
    return args + [f"Duration={_duration(spec.duration_s)}"]


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
    UPDATE = "update"  # nodes and/or start of a reservation that has not started yet
    UPDATE_NODES = "update_nodes"  # nodes of a running reservation; its start stays
    REPLACE = "replace"  # a started reservation must move its start: delete, then create
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class ReservationAction:
    """ReservationAction is one step of reconciling reservations: kind, name and the wanted spec."""

    kind: ActionKind
    name: str
    spec: ReservationSpec | None = None


def _started(existing: SlurmReservation, now: datetime) -> bool:
    """_started tells whether Slurm's reservation has begun (its start can no longer move)."""
    return existing.state == "ACTIVE" or (existing.start is not None and existing.start <= now)


def _start_moved(spec: ReservationSpec, existing: SlurmReservation, now: datetime) -> bool:
    """_start_moved: "now" matches any started reservation; a time matches within a minute."""
    if existing.start is None:
        return True
    if spec.start is None:
        return not _started(existing, now) and existing.start - now > _START_TOLERANCE
    return abs(existing.start - spec.start) > _START_TOLERANCE


def change_for(spec: ReservationSpec, existing: SlurmReservation, now: datetime) -> ActionKind | None:
    """change_for is the action that makes Slurm's reservation match the spec (None = it matches)."""
    nodes_moved = set(spec.nodes) != set(existing.nodes)
    start_moved = _start_moved(spec, existing, now)
    if not (nodes_moved or start_moved):
        return None
    if not _started(existing, now):
        return ActionKind.UPDATE
    return ActionKind.REPLACE if start_moved else ActionKind.UPDATE_NODES


def plan_reservations(
    desired: Sequence[ReservationSpec],
    existing: Sequence[SlurmReservation],
    now: datetime,
    prefix: str = HOLD_PREFIX,
) -> list[ReservationAction]:
    """plan_reservations: create what is absent, change what moved, delete our holds the plan dropped."""
    have = {reservation.name: reservation for reservation in existing}
    # on a site of several clusters Slurm's names read cluster/ms-hold-<task>: a hold is on its nodes' cluster
    wanted = {qualify(cluster_of(spec.nodes[0]), spec.name): spec for spec in desired}
    actions = []
    for name, spec in sorted(wanted.items()):
        kind = ActionKind.CREATE if name not in have else change_for(spec, have[name], now)
        if kind is not None:
            actions.append(ReservationAction(kind, name, spec))
    for name in sorted(have):
        if split_qualified(name)[1].startswith(prefix) and name not in wanted:
            actions.append(ReservationAction(ActionKind.DELETE, name))
    return actions


def apply_reservations(
    client: SlurmClient, desired: Sequence[ReservationSpec], now: datetime
) -> list[ReservationAction]:
    """apply_reservations reads Slurm's reservations, plans and applies the actions; returns them."""
    actions = plan_reservations(desired, client.reservations(), now)
    # deletes first: a new hold may cover nodes a dropped hold still reserves ("overlaps")
    actions.sort(key=lambda action: action.kind != ActionKind.DELETE)
    failed = []
    for action in actions:
        try:
            _apply(client, action)
        except ReservationInUse:
            # The held gang already runs inside it: the reservation ends at its EndTime, or a
            # later cycle deletes it once the jobs are gone. Nothing else is blocked by this.
            log.info("reservation %s still in use; will delete it later", action.name)
        except SlurmError as error:
            # one refused hold (or one on a cluster that does not answer) must not keep the others
            # from being applied
            log.warning("reservation %s: %s failed: %s", action.name, action.kind.value, error)
            failed.append(action)
    if failed:
        raise SlurmRejected(f"{len(failed)} reservation action(s) failed: {', '.join(a.name for a in failed)}")
    return actions


def _apply(client: SlurmClient, action: ReservationAction) -> None:
    """_apply runs one reservation action through the client."""
    spec = action.spec
    if action.kind == ActionKind.DELETE or spec is None:
        client.delete_reservation(action.name)
    elif action.kind == ActionKind.CREATE:
        client.create_reservation(spec)
    elif action.kind == ActionKind.REPLACE:
        client.delete_reservation(action.name)
        client.create_reservation(spec)
    else:
        client.update_reservation(spec, move_start=action.kind == ActionKind.UPDATE)
