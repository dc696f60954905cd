"""Backfill: hold specific nodes for a blocked head-of-line task at its earliest start.

The earliest start comes from running work's ``expected_end`` (and this cycle's placements,
which end after their runtime estimate). Work with no expected end is treated as running
forever, so a task that needs it gets no held start; its nodes are then kept from other gangs
so it does not starve. Later tasks may use held nodes only if they finish before the start or
fit in what the holder leaves spare (see ``placement.node_slots``). A gang's hold outlives its
cycle: the next snapshot carries it (``Snapshot.holds``) and ``SchedulePass.keep_promises`` keeps
its place among the held reservations, so a task ahead in line cannot take that place.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from meta.model.kinds import Topology
from meta.policy.capacity import Capacity
from meta.policy.equivalence import NodeClass
from meta.policy.gang import Pick, select
from meta.policy.shape import Shape

Release = tuple[float, int, int, float, int, int]  # (end, node index, gpus, cpus, memory, storage)


def releases_of(cap: Capacity) -> list[Release]:
    """releases_of lists per-node capacity returns of running work with a known (or stopping) end."""
    return [x for per in cap.ledger.releases.values() for x in per]


@dataclass(frozen=True, slots=True)
class Hold:
    """Hold is the outcome of an earliest-start search: when, where, and what stays spare."""

    start: float
    picks: list[Pick]
    spare: dict[int, list[float]]


def _candidates(
    cap: Capacity, shape: Shape, classes: Sequence[NodeClass], only: Collection[int] | None = None
) -> list[int]:
    """_candidates are feasible nodes (of ``only``, when given) not already held for someone else."""
    gang = shape.workers > 1
    return [
        i for c in classes for i in c.nodes
        if (only is None or i in only)
        and cap.hold_start[i] is None and not (gang and cap.gang_blocked[i] is not None)
        and cap.names[i] not in shape.avoid and not shape.bars(cap.names[i])
    ]


def earliest_start(
    cap: Capacity, shape: Shape, classes: Sequence[NodeClass], releases: Sequence[Release], now: float,
    only: Collection[int] | None = None,
) -> Hold | None:
    """earliest_start walks releases in time order until the task fits (on ``only``, if given), and picks nodes."""
    nodes = _candidates(cap, shape, classes, only)
    future = {i: [cap.gpu[i], cap.cpu[i], cap.mem[i], cap.sto[i]] for i in nodes}
    slots = {i: shape.slots(f[0], f[1], f[2], f[3], shape.workers) for i, f in future.items()}
    leaf_total: dict[str, int] = defaultdict(int)
    for i, n in slots.items():
        leaf_total[cap.leaf[i]] += n
    total = sum(slots.values())
    need_leaf = shape.topology is Topology.REQUIRE_SAME_SWITCH and shape.workers > 1
    # Overdue work may end any moment, and stopping work ends first: both count as "now".
    ordered = sorted((max(r[0], now), *r[1:]) for r in releases if r[1] in future)
    if only is not None:
        # A kept hold (scheduler.keep_promises) may fit on its nodes already: then it can start now.
        found = _pick(cap, shape, future, slots, total, leaf_total, need_leaf, now)
        if found is not None:
            return found
    for k, (end, node, g, c, m, st) in enumerate(ordered):
        f = future[node]
        f[0] += g
        f[1] += c
        f[2] += m
        f[3] += st
        new = shape.slots(int(f[0]), f[1], int(f[2]), int(f[3]), shape.workers)
        total += new - slots[node]
        leaf_total[cap.leaf[node]] += new - slots[node]
        slots[node] = new
        if k + 1 < len(ordered) and ordered[k + 1][0] == end:
            continue  # apply every release of the same instant first
        found = _pick(cap, shape, future, slots, total, leaf_total, need_leaf, end)
        if found is not None:
            return found
    return None


def _pick(
    cap: Capacity, shape: Shape, future: dict[int, list[float]], slots: dict[int, int], total: int,
    leaf_total: dict[str, int], need_leaf: bool, at: float,
) -> Hold | None:
    """_pick places the task on the capacity free at ``at`` (``future``), or None if it does not fit yet."""
    enough = max(leaf_total.values(), default=0) >= shape.workers if need_leaf else total >= shape.workers
    if not enough:
        return None
    picks = select([(i, n) for i, n in slots.items() if n], shape.workers, shape.topology, cap.leaf, cap.spine, cap.cluster)
    if not picks:
        return None
    spare = {}
    for i, count in picks:
        f = future[i]
        spare[i] = [f[0] - count * shape.gpus, f[1] - count * shape.cpus,
                    f[2] - count * shape.mem, f[3] - count * shape.sto]
    return Hold(at, picks, spare)


def nodes_when_all_end(cap: Capacity, shape: Shape, classes: Sequence[NodeClass]) -> list[Pick]:
    """nodes_when_all_end picks nodes for the task as if every node were empty (no known start)."""
    cands = []
    for c in classes:
        per_node = shape.slots(c.gpus, c.cpus, c.mem, c.sto, shape.workers)
        if per_node:
            cands.extend((i, per_node) for i in _candidates(cap, shape, [c]))
    return select(cands, shape.workers, shape.topology, cap.leaf, cap.spine, cap.cluster)
