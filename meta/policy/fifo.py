"""fifo: the strict first-come-first-served baseline (first fit, no backfill, no preemption).

Tasks are taken in submit order; each is placed on the first nodes (in inventory order) that
fit it. The first task that does not fit blocks every task behind it, as a FIFO queue without
backfill does. Tasks that could never fit even on an empty cluster are marked unresolvable
and skipped (otherwise one bad request would stall the queue forever).

The free-capacity and first-fit helpers here are shared with the ``slurmlike`` baseline.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from meta.model.kinds import Topology
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.policy.plan import FragmentationReport, PendingReason, Placement, Plan, ReasonCode
from meta.policy.snapshot import NodeShare, PendingTask, Snapshot

Free = dict[str, list[float]]  # node name -> [cpus, memory_mib, gpus] still free


def free_capacity(snapshot: Snapshot) -> Free:
    """free_capacity is each schedulable node's capacity minus every live reservation's share."""
    free: Free = {
        node.name: [node.capacity.cpus, node.capacity.memory_mib, node.capacity.gpus]
        for node in snapshot.nodes
        if node.schedulable()
    }
    for reservation in snapshot.reservations:
        for share in reservation.shares:
            left = free.get(share.node)
            if left is not None:
                res = share.resources
                left[0] -= res.cpus
                left[1] -= res.memory_mib
                left[2] -= res.gpus
    return free


def worker_slots(left: Sequence[float], need: ResourceVector) -> int:
    """worker_slots is how many workers of shape ``need`` fit into one node's free ``left``."""
    slots = 1 << 30
    for have, want in ((left[2], need.gpus), (left[0], need.cpus), (left[1], need.memory_mib)):
        if want > 0:
            slots = min(slots, int(have // want))
    return max(slots, 0)


def eligible(node: NodeState, task: PendingTask) -> bool:
    """eligible applies the hard filters: GPU type, GPU presence, partition and avoided nodes."""
    need = task.per_worker
    if need.gpus and (node.capacity.gpus < need.gpus or (need.gpu_type and need.gpu_type != node.capacity.gpu_type)):
        return False
    if task.partition and task.partition not in node.partitions:
        return False
    return node.name not in task.avoid_nodes


def _candidate_groups(task: PendingTask, nodes: Sequence[NodeState]) -> Iterable[list[NodeState]]:
    """_candidate_groups yields node lists to try: one per switch for require-same-switch gangs."""
    if task.topology != Topology.REQUIRE_SAME_SWITCH or task.workers == 1:
        yield list(nodes)
        return
    by_switch: dict[str | None, list[NodeState]] = {}
    for node in nodes:
        by_switch.setdefault(node.switch, []).append(node)
    yield from by_switch.values()


def first_fit(task: PendingTask, nodes: Sequence[NodeState], free: Free) -> list[tuple[NodeState, int]] | None:
    """first_fit picks (node, workers) pairs in node order for the whole gang, or None; no mutation."""
    need_gpus = task.per_worker.gpus
    for group in _candidate_groups(task, nodes):
        chosen: list[tuple[NodeState, int]] = []
        remaining = task.workers
        for node in group:
            left = free.get(node.name)
            if left is None or left[2] < need_gpus or not eligible(node, task):
                continue
            take = min(worker_slots(left, task.per_worker), remaining)
            if take > 0:
                chosen.append((node, take))
                remaining -= take
                if remaining == 0:
                    return chosen
    return None


def occupy(task: PendingTask, chosen: list[tuple[NodeState, int]], free: Free) -> tuple[NodeShare, ...]:
    """occupy subtracts the chosen workers from ``free`` and returns one NodeShare per worker."""
    need = task.per_worker
    shares: list[NodeShare] = []
    for node, count in chosen:
        left = free[node.name]
        left[0] -= need.cpus * count
        left[1] -= need.memory_mib * count
        left[2] -= need.gpus * count
        resources = need
        if need.gpus and need.gpu_type != node.capacity.gpu_type:
            resources = need.model_copy(update={"gpu_type": node.capacity.gpu_type})
        shares.extend(NodeShare(node.name, resources) for _ in range(count))
    return tuple(shares)


def never_fits(task: PendingTask, nodes: Sequence[NodeState]) -> bool:
    """never_fits tells whether the task cannot fit even on the whole cluster left empty."""
    empty: Free = {n.name: [n.capacity.cpus, n.capacity.memory_mib, n.capacity.gpus] for n in nodes if n.schedulable()}
    return first_fit(task, nodes, empty) is None


def unresolvable_reason(task: PendingTask) -> PendingReason:
    """unresolvable_reason explains a task no node set could ever host."""
    return PendingReason(
        ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE,
        f"{task.workers} × {task.per_worker.describe()} does not fit the cluster even when empty",
        remedy="ask for fewer or smaller workers, or another GPU type",
    )


def fragmentation(nodes: Sequence[NodeState], free: Free, waiting: Iterable[PendingTask]) -> FragmentationReport:
    """fragmentation counts free GPUs per type and those no waiting worker shape can use."""
    # Plain tuples: hashing pydantic vectors for thousands of waiters costs more than the check.
    shapes = {
        (t.per_worker.gpus, t.per_worker.cpus, t.per_worker.memory_mib, t.per_worker.gpu_type)
        for t in waiting
        if t.per_worker.gpus
    }
    free_gpus = stranded = 0
    by_type: dict[str, int] = {}
    for node in nodes:
        left = free.get(node.name)
        if left is None or left[2] <= 0:
            continue
        gpus = int(left[2])
        free_gpus += gpus
        key = node.capacity.gpu_type or "untyped"
        by_type[key] = by_type.get(key, 0) + gpus
        usable = any(
            gpus_ >= g and left[0] >= c and left[1] >= m and (not t or t == node.capacity.gpu_type)
            for g, c, m, t in shapes
            for gpus_ in (left[2],)
        )
        if shapes and not usable:
            stranded += gpus
    return FragmentationReport(
        free_gpus=free_gpus,
        stranded_gpus=stranded,
        largest_placeable_gang_gpus=max(by_type.values(), default=0),
        free_by_type=by_type,
    )


def place(task: PendingTask, chosen: list[tuple[NodeState, int]], free: Free, backfilled: bool = False) -> Placement:
    """place turns a first-fit choice into a Placement and occupies its capacity."""
    shares = occupy(task, chosen, free)
    return Placement(task.task_id, task.job_id, shares, backfilled=backfilled, reason="fifo" if not backfilled else "backfill")


def schedule(snapshot: Snapshot, config: Any = None) -> Plan:
    """schedule places tasks strictly in submit order until the first one that does not fit."""
    plan = Plan(inventory_version=snapshot.inventory_version)
    free = free_capacity(snapshot)
    nodes = snapshot.nodes
    ordered = sorted(snapshot.pending, key=lambda t: (t.submit_time, t.task_id))
    blocked_by: PendingTask | None = None
    waiting: list[PendingTask] = []
    behind_reason: PendingReason | None = None
    for task in ordered:
        if blocked_by is not None:
            plan.reasons[task.task_id] = behind_reason  # type: ignore[assignment]
            waiting.append(task)
            continue
        chosen = first_fit(task, nodes, free)
        if chosen is not None:
            plan.placements.append(place(task, chosen, free))
            continue
        if never_fits(task, nodes):
            plan.reasons[task.task_id] = unresolvable_reason(task)
            continue
        blocked_by = task
        waiting.append(task)
        plan.reasons[task.task_id] = PendingReason(
            ReasonCode.NO_FEASIBLE_NODE, "head of the FIFO queue; not enough free capacity yet",
            remedy="wait for running jobs to finish",
        )
        behind_reason = PendingReason(
            ReasonCode.LOWER_PRIORITY, f"FIFO: waiting behind {task.job_name or task.job_id}",
            blocking_job=task.job_id, blocking_tenant=task.tenant,
        )
    plan.fragmentation = fragmentation(nodes, free, waiting)
    return plan
