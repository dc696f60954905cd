"""Per-cluster fit: why a task's shape can or cannot go to each Slurm cluster of the site (issue 26).

Pure: it reads nothing and writes nothing, so ``metasched explain`` (``meta/service/explain.py``),
the simulator and the daemon can all ask it. ``static_fit`` judges each cluster on configured
capacity alone (the same checkers as ``feasibility.py``), in the order a user acts on them: the
job's own ``-M`` list, its tenant's confinement, data required elsewhere, an admin's drain, a worker no node there can host, ``-w``/``-x`` leaving no
node there, a gang larger than the cluster, every fitting node down. ``task_fit`` then adds what
the store knows about one task: where its attempt runs or ran, whether the last cycle left it
waiting for room, the one cluster a retry's checkpoint is readable on, and a preferred data cluster. There is no per-cluster free capacity in the store, so "busy" is said only when
the cycle's own reason for the task was a lack of room, and the cluster could otherwise host it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from meta.model.clusters import cluster_of
from meta.model.nodes import NodeState
from meta.policy.equivalence import NodeClass, build_classes
from meta.policy.feasibility import gang_reason, run_static_chain
from meta.policy.inventory import leaf_name
from meta.policy.plan import ReasonCode
from meta.policy.shape import Shape


class Fit(StrEnum):
    """Fit is one cluster's verdict for a task, as ``explain --json`` names it."""

    PLACED = "placed"  # the task's current or last attempt runs or ran here
    NOT_LISTED = "not_listed"  # the job's -M/--clusters list leaves this cluster out
    TENANT_CONFINED = "tenant_confined"  # an admin confined the job's tenant to other clusters
    DATA_ELSEWHERE = "data_elsewhere"  # the job's data must be read on another cluster (data.required)
    CHECKPOINT_ELSEWHERE = "checkpoint_elsewhere"  # a retry resumes from a checkpoint readable only on another
    DRAINED = "drained"  # an admin drained it (metasched cluster drain)
    NEVER_FITS = "never_fits"  # no node here could ever host one worker
    EXCLUDED = "excluded"  # -w/--nodelist or -x/--exclude leave no fitting node here
    TOO_FEW = "too_few_nodes"  # nodes fit one worker, but not the whole gang at once
    NODES_DOWN = "nodes_down"  # it would fit, but Slurm has the fitting nodes down or drained
    FITS = "fits"  # could host the task
    BUSY = "busy"  # could host it, but the last cycle found no room for it


# the cycle's reasons that mean "there was no room for it now", not a gate of the task's own
_NO_ROOM = frozenset({
    ReasonCode.NO_FEASIBLE_NODE, ReasonCode.WAITING_FOR_GANG_CAPACITY, ReasonCode.BLOCKED_BY_RESERVATION,
    ReasonCode.LOWER_FAIR_SHARE, ReasonCode.LOWER_PRIORITY, ReasonCode.TOPOLOGY_UNSATISFIED,
    ReasonCode.HELD_FOR_GANG, ReasonCode.PREEMPTING,
})  # fmt: skip


@dataclass(frozen=True, slots=True)
class ClusterFit:
    """ClusterFit is one cluster's verdict for a task: the code, the words, the nodes it runs on (if placed)."""

    cluster: str
    verdict: Fit
    message: str
    nodes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """to_dict is the verdict as ``explain --json`` answers it."""
        return {"cluster": self.cluster, "verdict": self.verdict.value, "message": self.message,
                "nodes": list(self.nodes)}  # fmt: skip


def site_clusters(nodes: Iterable[NodeState]) -> list[str]:
    """site_clusters is the clusters the nodes name, sorted; [] on a single-cluster site (unqualified names)."""
    return sorted({cluster_of(n.name) for n in nodes} - {""})


def static_fit(
    shape: Shape,
    nodes: Sequence[NodeState],
    drained: Mapping[str, str] | None = None,
    tenant: frozenset[str] = frozenset(),
    data: str = "",
) -> list[ClusterFit]:
    """static_fit judges every cluster of the nodes for ``shape`` on configured capacity.

    ``drained``: drained cluster -> the admin's reason; ``tenant``: the clusters the job's tenant
    is confined to (empty: any); ``data``: the cluster the job's data must be read on (data.required;
    "": none).
    """
    by_cluster: dict[str, list[NodeState]] = {}
    for n in nodes:
        by_cluster.setdefault(cluster_of(n.name), []).append(n)
    return [_judge(shape, name, by_cluster[name], drained or {}, tenant, data) for name in site_clusters(nodes)]


def _judge(
    shape: Shape, cluster: str, nodes: Sequence[NodeState], drained: Mapping[str, str], tenant: frozenset[str],
    data: str = "",
) -> ClusterFit:
    """_judge is one cluster's static verdict, the first reason that keeps the task off it."""
    if shape.clusters and cluster not in shape.clusters:
        return ClusterFit(cluster, Fit.NOT_LISTED, f"not in the job's --clusters ({', '.join(sorted(shape.clusters))})")
    if tenant and cluster not in tenant:
        return ClusterFit(cluster, Fit.TENANT_CONFINED, f"the tenant may run only on {', '.join(sorted(tenant))} "
                                                         "(an admin's setting)")  # fmt: skip
    if data and cluster != data:
        return ClusterFit(cluster, Fit.DATA_ELSEWHERE, f"the job's data lives on {data} (data.required)")
    if cluster in drained:
        why = f": {drained[cluster]}" if drained[cluster] else ""
        return ClusterFit(cluster, Fit.DRAINED, f"drained by an admin{why} (no new work goes there)")
    # avoid_nodes are a preference the cycle gives up rather than strand a task; -M was judged above
    free = shape._replace(avoid=frozenset(), clusters=frozenset())
    classes, _ = build_classes(tuple(nodes))
    fitting, reason = run_static_chain(free, classes)
    if reason is not None:
        return ClusterFit(cluster, Fit.NEVER_FITS, reason.message)
    return _judge_gang(free, cluster, nodes, fitting)


def _judge_gang(shape: Shape, cluster: str, nodes: Sequence[NodeState], fitting: list[NodeClass]) -> ClusterFit:
    """_judge_gang judges the nodes that fit one worker: -w/-x, the gang's size, their health in Slurm."""
    names = [n.name for n in nodes]
    leaves = [leaf_name(n.switch, cluster) for n in nodes]
    allowed = [i for c in fitting for i in c.nodes if not shape.bars(names[i])]
    if not allowed:
        return ClusterFit(cluster, Fit.EXCLUDED, f"--nodelist/--exclude leave no node here that could host "
                                                 f"{shape.describe_worker()}")  # fmt: skip
    reason = gang_reason(shape, fitting, names, leaves, ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE)
    if reason is not None:
        return ClusterFit(cluster, Fit.TOO_FEW, reason.message)
    healthy = [c for c in fitting if c.schedulable]
    if not healthy or gang_reason(shape, healthy, names, leaves, ReasonCode.NODE_UNHEALTHY) is not None:
        return ClusterFit(cluster, Fit.NODES_DOWN, f"{_count(shape, allowed)} could host it, but too many of them "
                                                   "are down or drained in Slurm")  # fmt: skip
    up = [i for c in healthy for i in c.nodes if not shape.bars(names[i])]
    down = f" ({len(allowed) - len(up)} more down or drained in Slurm)" if len(up) < len(allowed) else ""
    return ClusterFit(cluster, Fit.FITS, f"fits: {_count(shape, up)} can host it{down}")


def _count(shape: Shape, allowed: Sequence[int]) -> str:
    """_count says how many nodes fit a worker, and of what."""
    plural = "s" if len(allowed) > 1 else ""
    workers = f"{shape.workers} workers" if shape.workers > 1 else "a worker"
    return f"{len(allowed)} node{plural} for {workers} of {shape.describe_worker()}"


# verdicts that come before a checkpoint's: the job's and the tenant's own limits
_BEFORE_CHECKPOINT = frozenset({Fit.NOT_LISTED, Fit.TENANT_CONFINED, Fit.DATA_ELSEWHERE})


def task_fit(
    static: Sequence[ClusterFit],
    *,
    placed: Sequence[str] = (),
    attempt: str = "",
    waiting: str | None = None,
    checkpoint: str = "",
    data: str = "",
) -> list[ClusterFit]:
    """task_fit adds one task's facts to the static verdicts.

    ``placed``: the nodes of its current or last attempt (qualified names) and ``attempt`` how that
    attempt stands ("runs", "ran (attempt 1: failed)"); ``waiting``: the last cycle's reason code
    while the task is pending ("" when no cycle has looked at it yet, None when it is not pending);
    ``checkpoint``: the cluster a waiting retry's checkpoint is readable on ("": anywhere);
    ``data``: the cluster its data lives on when that is only a preference ("": none).
    """
    where = {cluster_of(n) for n in placed}
    if waiting is not None or not placed:
        out = [_waiting(fit, waiting, where, placed, attempt) for fit in static]
        if checkpoint and waiting is not None:
            out = [_checkpoint(fit, checkpoint) for fit in out]
    else:
        out = [_placed(fit, where, placed, attempt) for fit in static]
    return [_data_here(fit) if fit.cluster == data else fit for fit in out] if data else out


def _checkpoint(fit: ClusterFit, checkpoint: str) -> ClusterFit:
    """_checkpoint is a waiting retry's verdict on a cluster when its checkpoint is readable only on ``checkpoint``."""
    if fit.cluster == checkpoint:
        if fit.verdict in _BEFORE_CHECKPOINT or fit.verdict in (Fit.FITS, Fit.BUSY):
            return fit
        # drained, dark or down: the retry waits for it rather than start over elsewhere
        return ClusterFit(fit.cluster, fit.verdict, f"{fit.message}; the retry waits for it: its checkpoint is "
                                                    "readable only here")  # fmt: skip
    if fit.verdict in _BEFORE_CHECKPOINT:
        return fit
    return ClusterFit(fit.cluster, Fit.CHECKPOINT_ELSEWHERE, f"resumes from a checkpoint written on {checkpoint}, "
                                                             "readable only there")  # fmt: skip


def _data_here(fit: ClusterFit) -> ClusterFit:
    """_data_here names the preferred data cluster in a verdict that could (or does) host the task."""
    if fit.verdict not in (Fit.FITS, Fit.BUSY, Fit.PLACED):
        return fit
    return ClusterFit(fit.cluster, fit.verdict, f"{fit.message}; the job's data lives here (preferred)", fit.nodes)


def _placed(fit: ClusterFit, where: set[str], placed: Sequence[str], attempt: str) -> ClusterFit:
    """_placed is a cluster's verdict for a task that was placed: here, or why (or that) another was chosen."""
    if fit.cluster in where:
        nodes = tuple(n for n in placed if cluster_of(n) == fit.cluster)
        return ClusterFit(fit.cluster, Fit.PLACED, f"{attempt or 'placed'} here on {', '.join(nodes)}", nodes)
    if fit.verdict is Fit.FITS:
        return ClusterFit(fit.cluster, Fit.FITS, f"{fit.message}; the cycle placed it on {', '.join(sorted(where))}")
    return fit


def _waiting(fit: ClusterFit, waiting: str | None, where: set[str], placed: Sequence[str], attempt: str) -> ClusterFit:
    """_waiting is a cluster's verdict for a task that waits (or never ran): busy, fits, or the static reason."""
    out = fit
    if fit.verdict is Fit.FITS and waiting in _NO_ROOM:
        out = ClusterFit(fit.cluster, Fit.BUSY, f"fits, but the last cycle found no room for it here ({waiting})")
    elif fit.verdict is Fit.FITS and waiting:
        out = ClusterFit(fit.cluster, Fit.FITS, f"{fit.message}; the task waits for its reason ({waiting}), "
                                                "not for a cluster")  # fmt: skip
    if fit.cluster in where and attempt:
        nodes = ", ".join(n for n in placed if cluster_of(n) == fit.cluster)
        out = ClusterFit(out.cluster, out.verdict, f"{out.message}; its last attempt {attempt} here on {nodes}")
    return out
