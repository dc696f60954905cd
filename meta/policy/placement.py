"""Placement search: best-fit scoring over feasible classes, for single tasks and gangs.

Only nodes of classes that passed the filter chain are looked at, bucket by bucket from the
tightest fit upwards, so a one-GPU task lands on the node it fills best and whole nodes stay
free for gangs. Held nodes (backfill) are usable only by work that cannot delay their holder.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from meta.model.kinds import Topology
from meta.policy.capacity import Capacity
from meta.policy.equivalence import NodeClass
from meta.policy.gang import Pick, select
from meta.policy.shape import Shape


def node_slots(cap: Capacity, i: int, shape: Shape, end: float, ignore_holds: bool, limit: int) -> int:
    """node_slots is how many workers of ``shape`` node i can take now without delaying a hold."""
    g, c, m, s = cap.gpu[i], cap.cpu[i], cap.mem[i], cap.sto[i]
    start = cap.hold_start[i]
    if start is not None and not ignore_holds and end > start:
        # Work outliving the hold's start may only use what the held task leaves spare.
        spare = cap.hold_spare[i]
        assert spare is not None
        g, c, m, s = min(g, int(spare[0])), min(c, spare[1]), min(m, int(spare[2])), min(s, int(spare[3]))
    if shape.exclusive and not idle(cap, i, g, c, m):
        return 0
    return shape.slots(g, c, m, s, limit)


def idle(cap: Capacity, i: int, gpus: int, cpus: float, mem: int) -> bool:
    """idle tells whether node i's free amounts are all it has (sbatch --exclusive takes only idle nodes)."""
    inv = cap.inv
    return gpus >= inv.gpu[i] and cpus + 1e-9 >= inv.cpu[i] and mem >= inv.mem[i]


def best_single(
    cap: Capacity, shape: Shape, classes: Sequence[NodeClass], end: float, ignore_holds: bool = False
) -> int | None:
    """best_single finds the node a one-worker task fills best (fewest GPUs left over)."""
    best: int | None = None
    best_left = 1 << 30
    avoid = shape.avoid
    names = cap.names
    for cls in classes:
        buckets = cap.buckets[cls.id]
        for free in range(shape.gpus, len(buckets)):
            if free - shape.gpus >= best_left:
                break
            found = None
            for i in buckets[free]:
                if (avoid and names[i] in avoid) or shape.bars(names[i]):
                    continue
                if node_slots(cap, i, shape, end, ignore_holds, 1):
                    found = i
                    break
            if found is not None:
                best, best_left = found, free - shape.gpus
                break
    return best


def gang_candidates(
    cap: Capacity, shape: Shape, classes: Sequence[NodeClass], end: float, ignore_holds: bool = False
) -> list[tuple[int, int]]:
    """gang_candidates lists (node, slots) for every feasible node with room for a worker."""
    out: list[tuple[int, int]] = []
    avoid = shape.avoid
    names = cap.names
    blocked = cap.gang_blocked
    for cls in classes:
        buckets = cap.buckets[cls.id]
        for free in range(max(shape.gpus, 0), len(buckets)):
            for i in buckets[free]:
                if (avoid and names[i] in avoid) or (blocked[i] is not None and not ignore_holds) or shape.bars(names[i]):
                    continue
                n = node_slots(cap, i, shape, end, ignore_holds, shape.workers)
                if n:
                    out.append((i, n))
    return out


def type_groups(
    shape: Shape, classes: Sequence[NodeClass], cost: Callable[[str | None], float]
) -> list[list[NodeClass]]:
    """type_groups keeps a task on one GPU type; an any-type request tries cheap types first."""
    if not shape.gpus or shape.gpu_type is not None:
        return [list(classes)]
    groups: dict[str | None, list[NodeClass]] = defaultdict(list)
    for c in classes:
        groups[c.gpu_type].append(c)
    return [groups[t] for t in sorted(groups, key=lambda t: (cost(t), t or ""))]


def fit(
    cap: Capacity,
    shape: Shape,
    classes: Sequence[NodeClass],
    end: float,
    cost: Callable[[str | None], float],
    ignore_holds: bool = False,
    topology: Topology | None = None,
) -> list[Pick]:
    """fit returns picks (node, workers) for the whole task on free capacity, or [] if it cannot fit."""
    if shape.gpus:
        free = cap.free_by_type.get(shape.gpu_type, 0) if shape.gpu_type else sum(cap.free_by_type.values())
        if free < shape.gpus * (1 if shape.gpu_type is None else shape.workers):
            return []  # not enough free GPUs of the type anywhere: no need to look at nodes
    if shape.workers == 1:
        node = best_single(cap, shape, classes, end, ignore_holds)
        return [] if node is None else [(node, 1)]
    topo = shape.topology if topology is None else topology
    for group in type_groups(shape, classes, cost):
        cands = gang_candidates(cap, shape, group, end, ignore_holds)
        picks = select(cands, shape.workers, topo, cap.leaf, cap.spine, cap.cluster)
        if picks:
            return picks
    return []
