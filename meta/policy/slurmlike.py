"""slurmlike: a Slurm-like baseline — multifactor priority with EASY backfill, no preemption.

Priority follows Slurm's priority/multifactor plugin with the weights of a typical site
(``PriorityWeightAge=1000``, ``PriorityWeightFairshare=10000``, ``PriorityWeightJobSize=1000``,
``PriorityMaxAge=7-0``, ``PriorityFavorSmall=NO``)::

    priority = w_age · min(age / max_age, 1) + w_fs · 2^(-U/S) + w_size · gpus / cluster_gpus

with U the tenant's decayed usage over everybody's and S its weight over all weights (the
"classic" fair-share formula). Tasks are started in priority order until the first one that
does not fit; that one gets a reservation at its *shadow time*: the earliest moment, given the
running jobs' expected ends (start + time limit), at which it fits. Lower-priority tasks are
then backfilled when they fit now and either end before the shadow time or only use capacity
the reservation does not need.

How this differs from real Slurm (on purpose, or to keep it small):

* fair share uses the classic 2^(-U/S) formula, not the default Fair Tree algorithm; no account
  hierarchy, no QOS or partition priority factors, no TRES billing weights (usage = GPU-time);
* EASY backfill: only the highest-priority blocked task gets a reservation; Slurm's backfill
  reserves for every job it examines (conservative backfill, bounded by ``bf_max_job_test``);
* the backfill pass runs in every cycle, not every ``bf_interval``; resolution is exact, not
  ``bf_resolution`` slots; no ``bf_window`` limit;
* job size factor counts GPUs (Slurm counts nodes or CPUs);
* no association limits (GrpTRES) and no preemption; time limits are never enforced because
  the simulator's estimates are upper bounds of the real duration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from meta.model.kinds import Topology
from meta.model.nodes import NodeState
from meta.policy.fifo import (
    Free,
    fragmentation,
    free_capacity,
    never_fits,
    occupy,
    unresolvable_reason,
    worker_slots,
)
from meta.policy.fifo import (
    first_fit as _first_fit,
)
from meta.policy.plan import HeldReservation, PendingReason, Placement, Plan, ReasonCode
from meta.policy.snapshot import NodeShare, PendingTask, Snapshot


@dataclass(frozen=True, slots=True)
class SlurmLikeConfig:
    """SlurmLikeConfig holds the multifactor weights and backfill limits."""

    weight_age: float = 1000.0
    weight_fairshare: float = 10000.0
    weight_job_size: float = 1000.0
    max_age_s: float = 7 * 86400.0
    bf_max_job_test: int = 500  # Slurm's default: tasks examined by one backfill pass
    unknown_end_s: float = 86400.0  # assumed remaining time of a reservation with no expected end


def fairshare_factors(snapshot: Snapshot) -> dict[str, float]:
    """fairshare_factors is Slurm's classic 2^(-U/S) per tenant (1.0 when nobody has usage)."""
    tenants = snapshot.tenants
    total_weight = sum(t.weight for t in tenants) or 1.0
    total_usage = sum(t.decayed_usage for t in tenants)
    factors: dict[str, float] = {}
    for tenant in tenants:
        share = tenant.weight / total_weight
        usage = tenant.decayed_usage / total_usage if total_usage > 0 else 0.0
        factors[tenant.name] = 2.0 ** (-usage / share) if share > 0 else 0.0
    return factors


def multifactor(snapshot: Snapshot, config: SlurmLikeConfig | None = None) -> Callable[[PendingTask], float]:
    """multifactor is Slurm's multifactor priority of a pending task in this snapshot (higher goes first).

    One formula for the baseline and for metasched's ``tenant_order: multifactor``: fair share
    (2^(-U/S)) plus age (capped at max_age) plus size (the task's share of the cluster's GPUs).
    """
    config = config or SlurmLikeConfig()
    factors = fairshare_factors(snapshot)
    default_fs = 1.0 if not factors else min(factors.values())
    total_gpus = sum(n.capacity.gpus for n in snapshot.nodes) or 1
    now = snapshot.now
    size_w = config.weight_job_size / total_gpus
    age_w = config.weight_age / config.max_age_s
    max_age, w_fs = config.max_age_s, config.weight_fairshare

    def priority(task: PendingTask) -> float:
        """priority is the task's multifactor score."""
        age = min(max(now - task.submit_time, 0.0), max_age)
        return age_w * age + w_fs * factors.get(task.tenant, default_fs) + size_w * task.per_worker.gpus * task.workers

    return priority


def priorities(snapshot: Snapshot, config: SlurmLikeConfig) -> list[tuple[float, PendingTask]]:
    """priorities orders pending tasks by multifactor priority (ties: submit time, task id)."""
    priority = multifactor(snapshot, config)
    ranked = [(priority(task), task) for task in snapshot.pending]
    ranked.sort(key=lambda pair: (-pair[0], pair[1].submit_time, pair[1].task_id))
    return ranked


@dataclass(slots=True)
class Shadow:
    """Shadow is the reservation of the blocked top task: when it starts and what it will hold."""

    task: PendingTask
    start: float
    spare: Free  # capacity left at the shadow time once the reservation is taken
    nodes: tuple[str, ...]


def _releases(snapshot: Snapshot, started: list[tuple[PendingTask, tuple[NodeShare, ...]]], config: SlurmLikeConfig):
    """_releases lists (expected end, shares) of running work, this cycle's starts included."""
    now = snapshot.now
    events = []
    for reservation in snapshot.reservations:
        end = reservation.expected_end
        end = now + config.unknown_end_s if end is None else max(end, now)
        events.append((end, reservation.shares))
    for task, shares in started:
        events.append((now + task.runtime_estimate_s, shares))
    events.sort(key=lambda event: event[0])
    return events


def _slot_key(task: PendingTask, node: NodeState) -> str | None:
    """_slot_key groups nodes whose slots may be summed: one switch for same-switch gangs."""
    return node.switch if task.topology == Topology.REQUIRE_SAME_SWITCH else None


def shadow_time(snapshot: Snapshot, task: PendingTask, free: Free, started, config: SlurmLikeConfig) -> Shadow | None:
    """shadow_time finds the earliest expected time the task fits and the nodes it would take."""
    from meta.policy.fifo import eligible

    projected: Free = {name: list(left) for name, left in free.items()}
    nodes = {n.name: n for n in snapshot.nodes if n.name in projected and eligible(n, task)}
    slots = {name: worker_slots(projected[name], task.per_worker) for name in nodes}
    totals: dict[str | None, int] = {}
    for name, count in slots.items():
        key = _slot_key(task, nodes[name])
        totals[key] = totals.get(key, 0) + count
    for end, shares in _releases(snapshot, started, config):
        touched = set()
        for share in shares:
            left = projected.get(share.node)
            if left is None:
                continue
            left[0] += share.resources.cpus
            left[1] += share.resources.memory_mib
            left[2] += share.resources.gpus
            touched.add(share.node)
        for name in touched & nodes.keys():
            new = worker_slots(projected[name], task.per_worker)
            key = _slot_key(task, nodes[name])
            totals[key] = totals.get(key, 0) + new - slots[name]
            slots[name] = new
        if any(total >= task.workers for total in totals.values()):
            chosen = _first_fit(task, snapshot.nodes, projected)
            if chosen is None:
                continue
            held = occupy(task, chosen, projected)
            return Shadow(task, end, projected, tuple(dict.fromkeys(s.node for s in held)))
    return None


def _effective_free(free: Free, shadow: Shadow | None, ends_before_shadow: bool) -> Free:
    """_effective_free is what a backfill candidate may use now without delaying the shadow task."""
    if shadow is None or ends_before_shadow:
        return free
    return {name: [min(a, b) for a, b in zip(left, shadow.spare[name], strict=True)] for name, left in free.items()}


def _shape_key(task: PendingTask, short: bool) -> tuple | None:
    """_shape_key identifies tasks that fit or fail together (None when node-specific)."""
    if task.avoid_nodes:
        return None
    return (task.per_worker, task.workers, task.partition, task.topology, short)


def schedule(snapshot: Snapshot, config: Any = None) -> Plan:
    """schedule starts tasks by multifactor priority, reserves for the first blocked one, backfills."""
    config = config if isinstance(config, SlurmLikeConfig) else SlurmLikeConfig()
    plan = Plan(inventory_version=snapshot.inventory_version)
    free = free_capacity(snapshot)
    nodes = snapshot.nodes
    started: list[tuple[PendingTask, tuple[NodeShare, ...]]] = []
    shadow: Shadow | None = None
    failed_shapes: set[tuple] = set()
    waiting: list[PendingTask] = []
    examined = 0
    for _, task in priorities(snapshot, config):
        if shadow is not None:
            examined += 1
            if examined > config.bf_max_job_test:
                waiting.append(task)
                plan.reasons[task.task_id] = _behind(shadow, "beyond bf_max_job_test")
                continue
        if _try_start(task, snapshot, free, shadow, failed_shapes, plan, started):
            continue
        waiting.append(task)
        if shadow is not None:
            plan.reasons[task.task_id] = _behind(shadow, "no backfill hole")
            continue
        if never_fits(task, nodes):
            waiting.pop()
            plan.reasons[task.task_id] = unresolvable_reason(task)
            continue
        shadow = shadow_time(snapshot, task, free, started, config)
        plan.reasons[task.task_id] = _head_reason(task, shadow)
        if shadow is not None:
            plan.held.append(HeldReservation(task.task_id, task.job_id, shadow.nodes, shadow.start))
    plan.fragmentation = fragmentation(nodes, free, waiting)
    return plan


def _try_start(task, snapshot, free, shadow, failed_shapes, plan, started) -> bool:
    """_try_start places the task now if it fits (and, when backfilling, cannot delay the shadow)."""
    short = shadow is not None and snapshot.now + task.runtime_estimate_s <= shadow.start
    key = _shape_key(task, short)
    if key is not None and key in failed_shapes:
        return False
    usable = _effective_free(free, shadow, short)
    chosen = _first_fit(task, snapshot.nodes, usable)
    if chosen is None:
        if key is not None:
            failed_shapes.add(key)
        return False
    shares = occupy(task, chosen, free)
    if shadow is not None and not short:
        occupy(task, chosen, shadow.spare)
    backfilled = shadow is not None
    plan.placements.append(Placement(task.task_id, task.job_id, shares, backfilled, "backfill" if backfilled else "priority"))
    started.append((task, shares))
    return True


def _head_reason(task: PendingTask, shadow: Shadow | None) -> PendingReason:
    """_head_reason explains the reserved top task's wait."""
    if shadow is None:
        return PendingReason(ReasonCode.NO_FEASIBLE_NODE, "highest priority; no expected start known yet")
    return PendingReason(
        ReasonCode.HELD_FOR_GANG if task.workers > 1 else ReasonCode.NO_FEASIBLE_NODE,
        f"highest-priority blocked task; reserved from t={shadow.start:.0f} on {len(shadow.nodes)} node(s)",
        remedy="wait for the reservation",
    )


def _behind(shadow: Shadow, why: str) -> PendingReason:
    """_behind explains a task waiting behind the reserved top task."""
    return PendingReason(
        ReasonCode.BLOCKED_BY_RESERVATION,
        f"lower priority than {shadow.task.job_name or shadow.task.job_id}; {why}",
        blocking_job=shadow.task.job_id,
        blocking_tenant=shadow.task.tenant,
    )
