"""Feasibility: hard filters chained before any scoring, as in Nomad's ``feasible/stack.go``.

Static checkers run over equivalence classes (node capacity, never free capacity); gang checkers
then look at node counts and the switch tree. A task that fails here on *every* node, healthy or
not, can never run (UnschedulableAndUnresolvable); one that fails only because the hosting nodes
are down or drained waits (NodeUnhealthy). The quota check comes last among the filters and
lives in ``quota.py`` because it depends on live usage, not on the inventory.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from meta.model.clusters import cluster_of
from meta.model.kinds import Topology
from meta.model.nodes import NodeState
from meta.policy.equivalence import NodeClass, build_classes
from meta.policy.inventory import leaf_name
from meta.policy.plan import PendingReason, ReasonCode
from meta.policy.shape import Shape, shape_of
from meta.policy.snapshot import PendingTask


@dataclass(frozen=True, slots=True)
class Checker:
    """Checker is one stage of the filter chain: a predicate and the message when it rejects all."""

    name: str
    ok: Callable[[NodeClass, Shape], bool]
    why: Callable[[Shape, Sequence[NodeClass]], tuple[str, str]]  # (message, remedy)


def _largest(classes: Sequence[NodeClass], attr: str) -> float:
    return max((getattr(c, attr) for c in classes), default=0)


def _gpu_types(classes: Sequence[NodeClass]) -> str:
    return ", ".join(sorted({c.gpu_type for c in classes if c.gpu_type})) or "none"


def _partition_ok(c: NodeClass, s: Shape) -> bool:
    return s.partition is None or s.partition in c.partitions


def _partition_why(s: Shape, seen: Sequence[NodeClass]) -> tuple[str, str]:
    names = ", ".join(sorted({p for c in seen for p in c.partitions})) or "none"
    return f"no node is in partition '{s.partition}'", f"submit to one of the partitions: {names}"


def _gpu_type_ok(c: NodeClass, s: Shape) -> bool:
    return not s.gpus or (c.gpus > 0 and (s.gpu_type is None or s.gpu_type == c.gpu_type))


def _gpu_type_why(s: Shape, seen: Sequence[NodeClass]) -> tuple[str, str]:
    return (f"no node has {s.gpu_type or 'any'} GPUs (types here: {_gpu_types(seen)})",
            "request a GPU type this cluster has")


def _gpu_count_ok(c: NodeClass, s: Shape) -> bool:
    return s.gpus <= c.gpus


def _gpu_count_why(s: Shape, seen: Sequence[NodeClass]) -> tuple[str, str]:
    most = int(_largest(seen, "gpus"))
    kind = s.gpu_type or "GPU"
    return (f"no node has {s.gpus} {kind} GPUs per worker (the largest {kind} node has {most})",
            f"use at most {most} GPUs per worker and more workers")


def _cpus_ok(c: NodeClass, s: Shape) -> bool:
    return s.cpus <= c.cpus + 1e-9


def _cpus_why(s: Shape, seen: Sequence[NodeClass]) -> tuple[str, str]:
    most = _largest(seen, "cpus")
    return f"no matching node has {s.cpus:g} cpus (largest: {most:g})", f"ask for at most {most:g} cpus per worker"


def _mem_ok(c: NodeClass, s: Shape) -> bool:
    return s.mem <= c.mem


def _mem_why(s: Shape, seen: Sequence[NodeClass]) -> tuple[str, str]:
    most = int(_largest(seen, "mem"))
    return (f"no matching node has {s.mem} MiB of memory (largest: {most} MiB)",
            f"ask for at most {most} MiB per worker")


def _sto_ok(c: NodeClass, s: Shape) -> bool:
    return s.sto <= c.sto


def _sto_why(s: Shape, seen: Sequence[NodeClass]) -> tuple[str, str]:
    most = int(_largest(seen, "sto"))
    return (f"no matching node has {s.sto} GiB of local storage (largest: {most} GiB)",
            f"ask for at most {most} GiB of scratch per worker")


def _network_ok(c: NodeClass, s: Shape) -> bool:
    return s.network is None or s.network == c.network


def _network_why(s: Shape, seen: Sequence[NodeClass]) -> tuple[str, str]:
    nets = ", ".join(sorted({c.network for c in seen if c.network})) or "none"
    return f"no matching node is on network '{s.network}' (networks: {nets})", "drop or change the network class"


def _features_ok(c: NodeClass, s: Shape) -> bool:
    return not s.features or any(alternative <= c.features for alternative in s.features)


def _features_why(s: Shape, seen: Sequence[NodeClass]) -> tuple[str, str]:
    wanted = " or ".join("&".join(sorted(alternative)) for alternative in s.features)
    have = ", ".join(sorted({f for c in seen for f in c.features})) or "none"
    return f"no matching node has the features {wanted} (features here: {have})", "constrain on features nodes have"


STATIC_CHAIN: tuple[Checker, ...] = (
    # Partition first: it is the cheapest cut and users reason about partitions first.
    Checker("partition", _partition_ok, _partition_why),
    # GPU type: typed GRES never mix, an a100 request does not fit an h100 node.
    Checker("gpu-type", _gpu_type_ok, _gpu_type_why),
    # GPU count per worker against the node's configured GPUs (not free ones: that is "wait").
    Checker("gpu-count", _gpu_count_ok, _gpu_count_why),
    # CPUs per worker against configured cores.
    Checker("cpus", _cpus_ok, _cpus_why),
    # Memory per worker against configured memory.
    Checker("memory", _mem_ok, _mem_why),
    # Local scratch storage per worker.
    Checker("storage", _sto_ok, _sto_why),
    # Network class (e.g. InfiniBand) must match exactly when asked for.
    Checker("network", _network_ok, _network_why),
    # sbatch --constraint: node features read from Slurm.
    Checker("constraint", _features_ok, _features_why),
)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Verdict is the filter chain's answer for one shape: healthy feasible classes or a reason."""

    classes: tuple[NodeClass, ...]
    reason: PendingReason | None = None


def run_static_chain(shape: Shape, classes: Sequence[NodeClass]) -> tuple[list[NodeClass], PendingReason | None]:
    """run_static_chain applies every static checker in order and names the one that rejected all."""
    survivors = list(classes)
    for checker in STATIC_CHAIN:
        passed = [c for c in survivors if checker.ok(c, shape)]
        if not passed:
            message, remedy = checker.why(shape, survivors or classes)
            return [], PendingReason(ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE, message, remedy)
        survivors = passed
    return survivors, None


def gang_reason(
    shape: Shape, classes: Sequence[NodeClass], names: Sequence[str], leaf_of: Sequence[str], code: ReasonCode
) -> PendingReason | None:
    """gang_reason checks avoid_nodes, gang size and required topology on configured capacity."""
    # avoid_nodes: a node-level filter, so it runs after the class-level chain.
    slots_by_leaf: dict[str, int] = defaultdict(int)
    slots_by_cluster: dict[str, int] = defaultdict(int)
    usable = 0
    allowed = 0
    for c in classes:
        per_node = shape.slots(c.gpus, c.cpus, c.mem, c.sto, shape.workers)
        for i in c.nodes:
            if shape.bars(names[i]):
                continue
            allowed += 1
            if names[i] in shape.avoid:
                continue
            usable += 1
            slots_by_leaf[leaf_of[i]] += per_node
            slots_by_cluster[cluster_of(names[i])] += per_node
    if not allowed:
        return PendingReason(code, "no matching node is left by --nodelist/--exclude/--clusters",
                             "name other nodes or clusters")
    if not usable:
        return PendingReason(code, "every matching node is in avoid_nodes", "remove some nodes from avoid_nodes")
    total = sum(slots_by_leaf.values())
    # Gang size: all workers must fit at once, even on an otherwise empty cluster.
    if total < shape.workers:
        return PendingReason(
            code,
            f"even an empty cluster fits only {total} of {shape.workers} workers of {shape.describe_worker()}",
            f"reduce workers to {total}" if total else "use a smaller worker shape",
        )
    # A gang never spans two Slurm clusters: all workers must fit on one of them.
    one_cluster = max(slots_by_cluster.values())
    if one_cluster < shape.workers:
        return PendingReason(
            code,
            f"no single Slurm cluster fits {shape.workers} workers of {shape.describe_worker()} (best: {one_cluster}); "
            "a gang never spans clusters",
            f"reduce workers to {one_cluster}",
        )
    # Required topology: all workers under one leaf switch.
    if shape.topology is Topology.REQUIRE_SAME_SWITCH and shape.workers > 1:
        best = max(slots_by_leaf.values())
        if best < shape.workers:
            return PendingReason(
                code,
                f"no single switch can host {shape.workers} workers of {shape.describe_worker()} (best: {best})",
                f"reduce workers to {best} or use prefer-same-switch",
            )
    return None


def evaluate(
    shape: Shape, classes: Sequence[NodeClass], names: Sequence[str], leaf_of: Sequence[str]
) -> Verdict:
    """evaluate runs the whole chain: unresolvable on every node, unhealthy-only, or feasible classes."""
    static_ok, reason = run_static_chain(shape, classes)
    if reason is not None:
        return Verdict((), reason)
    reason = gang_reason(shape, static_ok, names, leaf_of, ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE)
    if reason is not None:
        return Verdict((), reason)
    # Health and drain state: failing only here means the task waits for nodes to come back.
    healthy = [c for c in static_ok if c.schedulable]
    if not healthy:
        return Verdict((), PendingReason(
            ReasonCode.NODE_UNHEALTHY,
            f"every node that could host {shape.describe_worker()} is down or drained",
            "wait for the nodes to return to service",
        ))
    reason = gang_reason(shape, healthy, names, leaf_of, ReasonCode.NODE_UNHEALTHY)
    if reason is not None:
        return Verdict((), PendingReason(ReasonCode.NODE_UNHEALTHY, reason.message + " while some are down",
                                         "wait for the nodes to return to service"))
    return Verdict(tuple(healthy))


def never_feasible(task: PendingTask, nodes: Sequence[NodeState]) -> PendingReason | None:
    """never_feasible returns an UnschedulableAndUnresolvable reason if no node could ever host task."""
    node_tuple = tuple(nodes)
    classes, _ = build_classes(node_tuple)
    shape = shape_of(task)._replace(avoid=frozenset())  # avoided nodes are used rather than stranding a task
    static_ok, reason = run_static_chain(shape, classes)
    if reason is not None:
        return reason
    names = [n.name for n in node_tuple]
    leaves = [leaf_name(n.switch, cluster_of(n.name)) for n in node_tuple]
    return gang_reason(shape, static_ok, names, leaves, ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE)
