"""split_clusters: one simulated site cut into several Slurm clusters by node count (issue 26).

The nodes are taken in the spec's group order and cut into ``n`` runs of (nearly) equal node
counts; cluster ``k`` is named ``c<k>`` unless names are given, and every node and switch name of
it becomes ``c<k>/...`` (``NodeGroup.cluster``). A group the cut falls inside is split in two, each
part keeping the group's shape; when every group is one leaf switch (Crux), a switch goes whole to
the cluster its middle node falls in, so no ToR straddles two clusters. Tenant weights, warm-up and
notes stay the site's: one metasched serves every cluster.
"""

from __future__ import annotations

from collections.abc import Sequence

from meta.model.clusters import check_cluster_name
from meta.sim.cluster import ClusterError, ClusterSpec, NodeGroup


def default_names(n: int) -> list[str]:
    """default_names is ``c1`` … ``cN``."""
    return [f"c{k + 1}" for k in range(n)]


def split_clusters(spec: ClusterSpec, n: int, names: Sequence[str] | None = None) -> ClusterSpec:
    """split_clusters cuts a one-cluster spec into ``n`` clusters of (nearly) equal node counts."""
    names = list(names) if names is not None else default_names(n)
    if n < 1 or len(names) != n or len(set(names)) != n:
        raise ClusterError(f"cannot split into {n} clusters named {names}")
    for name in names:
        check_cluster_name(name)
    if spec.cluster_names():
        raise ClusterError(f"cluster {spec.name!r} already names its Slurm clusters")
    if n == 1:
        return spec
    total = spec.node_count()
    if n > total:
        raise ClusterError(f"cannot split {total} nodes into {n} clusters")
    bounds = [round(total * (k + 1) / n) for k in range(n)]  # end (exclusive) of each cluster's run
    if all(g.switch for g in spec.node_groups):
        groups = _whole_switches(spec.node_groups, bounds, names)
    else:
        groups = _cut(spec.node_groups, bounds, names)
    if {g.cluster for g in groups if g.count} != set(names):
        raise ClusterError(f"cluster {spec.name!r} has too few switches for {n} clusters")
    notes = [*spec.notes, f"split into {n} Slurm clusters by node count ({', '.join(names)})"]
    return spec.model_copy(update={"name": f"{spec.name}@{n}", "node_groups": groups, "notes": notes})


def _cluster_at(position: float, bounds: list[int]) -> int:
    """_cluster_at is the index of the cluster whose run holds node ``position``."""
    return next(k for k, end in enumerate(bounds) if position < end)


def _cut(groups: list[NodeGroup], bounds: list[int], names: list[str]) -> list[NodeGroup]:
    """_cut walks the nodes in order and splits any group a cluster boundary falls inside."""
    out: list[NodeGroup] = []
    start = 0
    for group in groups:
        left = group.count
        while left:
            k = _cluster_at(start, bounds)
            take = min(left, bounds[k] - start)
            out.append(group.model_copy(update={"cluster": names[k], "count": take}))
            start, left = start + take, left - take
    return out


def _whole_switches(groups: list[NodeGroup], bounds: list[int], names: list[str]) -> list[NodeGroup]:
    """_whole_switches gives each one-switch group whole to the cluster its middle node falls in."""
    out: list[NodeGroup] = []
    start = 0
    for group in groups:
        k = _cluster_at(min(start + group.count / 2, bounds[-1] - 0.5), bounds)
        out.append(group.model_copy(update={"cluster": names[k]}))
        start += group.count
    return out
