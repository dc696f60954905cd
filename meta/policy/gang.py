"""Gang placement: all workers or none, on the fewest switches, leaving the least fragmentation."""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Sequence

from meta.model.kinds import Topology

Pick = tuple[int, int]  # (node index, workers placed there)


def pack(cands: Sequence[tuple[int, int]], workers: int) -> list[Pick]:
    """pack puts workers on few nodes: whole big nodes first, then the tightest node for the tail."""
    # Sorted by slots: the tail goes to the smallest node that still fits it (best fit), so
    # partially used nodes absorb remainders and whole nodes stay free for the next big gang.
    ordered = sorted(cands, key=lambda c: (c[1], c[0]))
    keys = [slots for _, slots in ordered]
    picks: list[Pick] = []
    remaining = workers
    while remaining > 0 and ordered:
        at = bisect_left(keys, remaining)
        if at < len(ordered):
            picks.append((ordered[at][0], remaining))
            return picks
        node, slots = ordered.pop()
        keys.pop()
        picks.append((node, slots))
        remaining -= slots
    return picks if remaining <= 0 else []


def _take_groups(groups: list[list[tuple[int, int]]], workers: int) -> list[Pick]:
    """_take_groups fills workers from the largest groups first so the gang spans few switches."""
    chosen: list[tuple[int, int]] = []
    have = 0
    for group in sorted(groups, key=lambda g: -sum(s for _, s in g)):
        chosen.extend(group)
        have += sum(s for _, s in group)
        if have >= workers:
            return pack(chosen, workers)
    return []


def select(
    cands: Sequence[tuple[int, int]],
    workers: int,
    topology: Topology,
    leaf_of: Sequence[str],
    spine_of: Sequence[str],
    cluster_of: Sequence[str] = (),
) -> list[Pick]:
    """select chooses nodes for a gang from (node, slots) candidates, or returns [] if it cannot fit.

    Leaf switches first, then spines, then a cluster: a gang never spans two Slurm clusters
    (``cluster_of`` per node; empty: one cluster).
    """
    if sum(s for _, s in cands) < workers:
        return []
    by_leaf: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for cand in cands:
        by_leaf[leaf_of[cand[0]]].append(cand)
    leaf_total = {leaf: sum(s for _, s in group) for leaf, group in by_leaf.items()}
    fitting = [leaf for leaf, total in leaf_total.items() if total >= workers]
    if fitting:
        # One switch: the fullest one that still fits keeps emptier switches whole.
        best = min(fitting, key=lambda leaf: (leaf_total[leaf], leaf))
        return pack(by_leaf[best], workers)
    if topology is Topology.REQUIRE_SAME_SWITCH:
        return []
    by_spine: dict[str, list[list[tuple[int, int]]]] = defaultdict(list)
    for group in by_leaf.values():
        by_spine[spine_of[group[0][0]]].append(group)
    spine_total = {sp: sum(leaf_total[leaf_of[g[0][0]]] for g in groups) for sp, groups in by_spine.items()}
    fitting_spines = [sp for sp, total in spine_total.items() if total >= workers]
    if fitting_spines:
        best = min(fitting_spines, key=lambda sp: (spine_total[sp], sp))
        return _take_groups(by_spine[best], workers)
    return _one_cluster(list(by_leaf.values()), workers, cluster_of)


def _one_cluster(groups: list[list[tuple[int, int]]], workers: int, cluster_of: Sequence[str]) -> list[Pick]:
    """_one_cluster takes the gang's switches from the fullest cluster that still fits it ([] when none does)."""
    if not cluster_of:
        return _take_groups(groups, workers)
    by_cluster: dict[str, list[list[tuple[int, int]]]] = defaultdict(list)
    for group in groups:
        by_cluster[cluster_of[group[0][0]]].append(group)
    total = {c: sum(s for g in gs for _, s in g) for c, gs in by_cluster.items()}
    fitting = [c for c, have in total.items() if have >= workers]
    if not fitting:
        return []
    return _take_groups(by_cluster[min(fitting, key=lambda c: (total[c], c))], workers)
