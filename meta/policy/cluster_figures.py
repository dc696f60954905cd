"""Per-cluster figures: nodes by state, GPUs total and free by type, live attempts, drained (issue 26).

Pure: the daemon's gauges (``meta/cycle/period_metrics.py``, from the period's snapshot and plan)
and the web view's cluster table (``meta/service/web/data.py``, from the stored inventory and the
live attempts) both call ``cluster_figures``, so a Prometheus series and the page count alike.
A site of one cluster (unqualified node names) has no figures: its cluster-wide gauges and the
cluster map already say all of it, as ``metasched_slurm_cluster_up`` exports nothing there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from meta.model.clusters import cluster_of
from meta.model.nodes import NodeState

UNTYPED = "gpu"  # GPUs whose type the inventory does not name (the name metasched_free_gpus uses)
NODE_STATES = ("schedulable", "drained", "down")


def node_state(node: NodeState) -> str:
    """node_state is ``down`` (not healthy), ``drained`` (healthy, no new work) or ``schedulable``."""
    if not node.healthy:
        return "down"
    return "drained" if node.drained else "schedulable"


@dataclass(frozen=True, slots=True)
class ClusterFigures:
    """ClusterFigures is one cluster's row: nodes per state, GPUs total and free per type, live attempts, drained."""

    cluster: str
    nodes: dict[str, int] = field(default_factory=dict)  # every NODE_STATES key, 0 when none
    total_gpus: dict[str, int] = field(default_factory=dict)  # GPU type -> GPUs on schedulable nodes
    free_gpus: dict[str, int] = field(default_factory=dict)  # GPU type -> those nobody holds
    running_attempts: int = 0
    drained: bool = False


def cluster_figures(
    nodes: Iterable[NodeState],
    held: Mapping[str, int],
    attempts: Iterable[Sequence[str]],
    drained: Collection[str] = (),
    clusters: Iterable[str] = (),
) -> list[ClusterFigures]:
    """cluster_figures is one row per cluster, sorted by name ([] when no node name and no ``clusters`` names one).

    ``held`` is GPUs held per node; ``attempts`` the nodes of each live attempt (an attempt
    counts on the cluster of its first node: -M sends a job to one cluster). ``clusters`` adds
    clusters with no node in ``nodes`` (a cluster the daemon asks but whose sinfo is empty).
    A GPU type appears for a cluster when any node of it has GPUs of that type, 0 while none
    of them is schedulable, so its series exists before and after an outage.
    """
    rows: dict[str, ClusterFigures] = {}

    def row(cluster: str) -> ClusterFigures:
        if cluster not in rows:
            rows[cluster] = ClusterFigures(cluster, {state: 0 for state in NODE_STATES}, drained=cluster in drained)
        return rows[cluster]

    for name in clusters:
        if name:
            row(name)
    for node in nodes:
        cluster = cluster_of(node.name)
        if not cluster:
            continue  # an unqualified name: a single-cluster site's node
        figures = row(cluster)
        state = node_state(node)
        figures.nodes[state] += 1
        if not node.capacity.gpus:
            continue
        gpu_type = node.capacity.gpu_type or UNTYPED
        figures.total_gpus.setdefault(gpu_type, 0)
        figures.free_gpus.setdefault(gpu_type, 0)
        if state == "schedulable":
            figures.total_gpus[gpu_type] += node.capacity.gpus
            # an over-held node (a preemption's victim and its replacement, both this period) is full, never negative
            figures.free_gpus[gpu_type] += max(0, node.capacity.gpus - held.get(node.name, 0))
    live: Counter[str] = Counter(cluster_of(names[0]) for names in attempts if names)
    for cluster, count in live.items():
        if cluster in rows:
            rows[cluster] = replace(rows[cluster], running_attempts=count)
    return [rows[name] for name in sorted(rows)]

