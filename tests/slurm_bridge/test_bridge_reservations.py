"""Reservations: argv, idempotent planning (create / update / replace / delete) and applying."""

from datetime import UTC, datetime, timedelta

import pytest

from slurm_bridge.errors import ReservationInUse
from slurm_bridge.parse.scontrol import SlurmReservation, parse_show_reservation
from slurm_bridge.reservations import (
    ActionKind,
    ReservationSpec,
    apply_reservations,
    create_args,
    hold_name,
    parse_created,
    plan_reservations,
    update_args,
)

NOW = datetime(2026, 12, 2, 17, 0, tzinfo=UTC)


def existing(name="ms-hold-t1", nodes=("a100n1", "a100n2"), start=NOW + timedelta(hours=1), state="INACTIVE"):
    return SlurmReservation(
        name, nodes, start, start + timedelta(hours=1), "01:00:00", frozenset(), ("root",), (), state
    )


def spec(name="ms-hold-t1", nodes=("a100n1", "a100n2"), start=NOW + timedelta(hours=1)):
    return ReservationSpec(name, nodes, duration_s=3600, start=start)


def test_create_args_at_a_time():
    args = create_args(ReservationSpec("ms-hold-t1", ("a100n2", "a100n1"), 5400, start=NOW))
    assert args[:4] == ["create", "reservation", "ReservationName=ms-hold-t1", "Nodes=a100n[1-2]"]
    assert args[4].startswith("StartTime=2026-12-02T") and "+" not in args[4]
    assert args[5:] == ["Duration=90", "Users=root", "Flags=IGNORE_JOBS"]


def test_update_args_of_a_started_reservation_keep_the_start():
    assert not any(a.startswith("StartTime=") for a in update_args(spec(), move_start=False))


def test_hold_name_and_created():
    assert hold_name("job-7f3e-0") == "ms-hold-job-7f3e-0"
    assert parse_created("Reservation created: ms-hold-x\n") == "ms-hold-x"
    with pytest.raises(ValueError):
        hold_name("a b")


@pytest.mark.parametrize(
    ("desired", "have", "want"),
    [
        ([spec()], [], [ActionKind.CREATE]),
        ([spec()], [existing()], []),
        ([spec(start=NOW + timedelta(hours=1, seconds=30))], [existing()], []),
        ([spec(nodes=("a100n1",))], [existing()], [ActionKind.UPDATE]),
        ([spec(start=NOW + timedelta(hours=2))], [existing()], [ActionKind.UPDATE]),
        ([spec(start=None)], [existing(start=NOW - timedelta(minutes=5), state="ACTIVE")], []),
        (
            [spec(start=None, nodes=("h100n1",))],
            [existing(start=NOW - timedelta(minutes=5), state="ACTIVE")],
            [ActionKind.UPDATE_NODES],
        ),
        ([spec()], [existing(start=NOW - timedelta(minutes=5), state="ACTIVE")], [ActionKind.REPLACE]),
        ([], [existing()], [ActionKind.DELETE]),
        ([], [existing(name="someone-elses")], []),
    ],
)
def test_plan(desired, have, want):
    assert [action.kind for action in plan_reservations(desired, have, NOW)] == want


class FakeClient:
    """FakeClient keeps reservations in memory and records calls."""

    def __init__(self, reservations=(), in_use=()):
        self.items = {r.name: r for r in reservations}
        self.in_use = set(in_use)
        self.calls = []

    def reservations(self):
        return list(self.items.values())

    def create_reservation(self, s):
        self.calls.append(("create", s.name))
        self.items[s.name] = existing(s.name, s.nodes, s.start or NOW, "INACTIVE" if s.start else "ACTIVE")
        return s.name

    def update_reservation(self, s, *, move_start=True):
        self.calls.append(("update", s.name, move_start))
        self.items[s.name] = existing(s.name, s.nodes, s.start if move_start else self.items[s.name].start)

    def delete_reservation(self, name):
        self.calls.append(("delete", name))
        if name in self.in_use:
            raise ReservationInUse("in use")
        self.items.pop(name, None)


def test_apply_is_idempotent():
    client = FakeClient()
    apply_reservations(client, [spec()], NOW)
    assert apply_reservations(client, [spec()], NOW) == []
    assert client.calls == [("create", "ms-hold-t1")]


def test_replace_deletes_then_creates():
    client = FakeClient([existing(start=NOW - timedelta(minutes=1), state="ACTIVE")])
    apply_reservations(client, [spec()], NOW)
    assert client.calls == [("delete", "ms-hold-t1"), ("create", "ms-hold-t1")]


def test_reservation_in_use_is_left_for_later():
    client = FakeClient([existing()], in_use={"ms-hold-t1"})
    actions = apply_reservations(client, [], NOW)
    assert [a.kind for a in actions] == [ActionKind.DELETE]
    assert "ms-hold-t1" in client.items


def test_plan_against_captured_reservations(captured):
    have = parse_show_reservation(captured("scontrol-show-reservation.txt").read_text())
    gang = next(r for r in have if r.name == "ms-resv-gang")
    wanted = ReservationSpec("ms-resv-gang", gang.nodes, 3600, start=gang.start)
    actions = plan_reservations([wanted], have, gang.start - timedelta(hours=1), prefix="ms-resv-")
    assert [(a.kind, a.name) for a in actions] == [(ActionKind.DELETE, "ms-resv-now")]


def test_plan_on_several_clusters_matches_holds_by_their_clusters_names():
    # Slurm's names come back qualified (dev2/ms-hold-t1) through the cluster set; the plan's hold is
    # the same reservation, not a new one, and a dropped hold on another cluster is deleted by its full name
    have = [existing("dev2/ms-hold-t1", nodes=("dev2/b1", "dev2/b2")), existing("emu/ms-hold-t9", nodes=("emu/a1",)),
            existing("emu/maintenance", nodes=("emu/a2",))]
    wanted = [spec("ms-hold-t1", nodes=("dev2/b1", "dev2/b2"))]
    actions = plan_reservations(wanted, have, NOW)
    assert [(a.kind, a.name) for a in actions] == [(ActionKind.DELETE, "emu/ms-hold-t9")]
