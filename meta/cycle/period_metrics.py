"""Cycle step 15, gauges: the leader's per-period metric values, computed from what the cycle already holds (snapshot, plan).

Pure functions from the period's Snapshot and Plan to ``{labels: value}`` maps with a value for
every known key (0 when empty), and ``publish`` that hands them to ``Metrics``. The only store
reads are the two grouped counts (tasks pending per tenant, attempts per state) and, for jobs
finished this period, one grouped read of their end times.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from meta.cycle.metrics import Labels, Metrics, set_all
from meta.cycle.snapshot.build import SpecCache
from meta.model.errors import JOB_FAULTS
from meta.model.kinds import JobKind
from meta.model.spec import InferenceSpec
from meta.model.states import AttemptState
from meta.policy.cluster_figures import NODE_STATES, ClusterFigures, cluster_figures
from meta.policy.config import SchedulerConfig
from meta.policy.gpu_keys import ANY
from meta.policy.plan import Plan, ReasonCode
from meta.policy.snapshot import NodeShare, PendingTask, Snapshot, tasks_named
from meta.store.chunks import among
from meta.store.models import Attempt, Job

UNTYPED = "gpu"  # GPUs whose type the inventory does not name (as the fragmentation report calls them)
KINDS = tuple(kind.value for kind in JobKind)


def _type(gpu_type: str | None) -> str:
    return gpu_type or UNTYPED


def tenant_names(snapshot: Snapshot) -> list[str]:
    """tenant_names are the known tenants: the tenants table and any tenant with work in the snapshot."""
    names = {t.name for t in snapshot.tenants}
    names.update(t.tenant for t in snapshot.pending)
    names.update(r.tenant for r in snapshot.reservations)
    return sorted(names)


def gpu_types(snapshot: Snapshot) -> list[str]:
    """gpu_types are the GPU types of the cluster's nodes and of the tenants' quotas ("*" is not a type)."""
    types = {_type(n.capacity.gpu_type) for n in snapshot.nodes if n.capacity.gpus}
    for tenant in snapshot.tenants:
        types.update(k for k in (*tenant.guaranteed, *tenant.limit) if k != ANY)
    return sorted(types)


def committed_tasks(snapshot: Snapshot, plan: Plan, skipped: Collection[str]) -> dict[str, PendingTask]:
    """committed_tasks indexes the waiting tasks this period's committed placements started, by task id.

    Built once per period: the placement counters, the held-GPU gauge and the queue depth all
    need it, and each walk of the queue costs a few ms at 50,000 waiting (issue 24).
    """
    return tasks_named(snapshot.pending, {p.task_id for p in plan.placements if p.task_id not in skipped})


def held_gpus(snapshot: Snapshot, plan: Plan, placed: Mapping[str, PendingTask]) -> dict[str, dict[str, int]]:
    """held_gpus is GPUs per tenant and type: live attempts plus this period's committed placements (``placed``)."""
    held: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))

    def add(tenant: str, shares: Iterable[NodeShare]) -> None:
        for share in shares:
            if share.resources.gpus:
                held[tenant][_type(share.resources.gpu_type)] += share.resources.gpus

    for reservation in snapshot.reservations:
        add(reservation.tenant, reservation.shares)
    for placement in plan.placements:
        if placement.task_id in placed:
            add(placed[placement.task_id].tenant, placement.shares)
    return held


def quota_values(
    snapshot: Snapshot, held: Mapping[str, Mapping[str, int]], tenants: Iterable[str], types: Iterable[str]
) -> tuple[dict[Labels, float], dict[Labels, float], dict[Labels, float], dict[Labels, float]]:
    """quota_values is (allocated, guaranteed, limit, borrowed) per (tenant, type), "*" summing all types.

    Borrowed follows the quota ledger: a type with a guarantee of its own borrows beyond it;
    other types draw on the "*" guarantee, and what the tenant holds beyond that is borrowed.
    Limits appear only where one is set (absent: unlimited).
    """
    states = {t.name: t for t in snapshot.tenants}
    keys = [*types, ANY]
    allocated: dict[Labels, float] = {}
    guaranteed: dict[Labels, float] = {}
    limit: dict[Labels, float] = {}
    borrowed: dict[Labels, float] = {}
    for tenant in tenants:
        state = states.get(tenant)
        guarantee = dict(state.guaranteed) if state else {}
        limits = dict(state.limit) if state else {}
        by_type = held.get(tenant, {})
        total = sum(by_type.values())
        over_any = max(0, total - guarantee.get(ANY, 0))
        for key in keys:
            amount = total if key == ANY else by_type.get(key, 0)
            allocated[(tenant, key)] = amount
            guaranteed[(tenant, key)] = guarantee.get(key, 0)
            if key in limits:
                limit[(tenant, key)] = limits[key]
            if key == ANY:
                borrowed[(tenant, key)] = over_any
            elif key in guarantee:
                borrowed[(tenant, key)] = max(0, amount - guarantee[key])
            else:
                borrowed[(tenant, key)] = min(amount, over_any)
    return allocated, guaranteed, limit, borrowed


def share_values(snapshot: Snapshot, tenants: Iterable[str]) -> tuple[dict[Labels, float], ...]:
    """share_values is (weight, decayed usage, usage fraction over weight fraction) per tenant (ratio 0: no usage)."""
    states = {t.name: t for t in snapshot.tenants}
    names = list(tenants)
    weights = {n: (states[n].weight if n in states and states[n].weight > 0 else 1.0) for n in names}
    usage = {n: (states[n].decayed_usage if n in states else 0.0) for n in names}
    total_weight, total_usage = sum(weights.values()), sum(usage.values())
    ratio = {
        n: (usage[n] / total_usage) / (weights[n] / total_weight) if total_usage > 0 else 0.0 for n in names
    }
    return (
        {(n,): weights[n] for n in names},
        {(n,): usage[n] for n in names},
        {(n,): ratio[n] for n in names},
    )


@dataclass(frozen=True)
class Oldest:
    """Oldest is each tenant's earliest waiting submit time, and every tenant the gauge shows."""

    earliest: dict[str, float]
    names: list[str]


def waiting_values(
    snapshot: Snapshot, plan: Plan, tenants: Iterable[str], placed: Collection[str] = ()
) -> tuple[dict[Labels, float], Oldest, dict[Labels, float]]:
    """waiting_values is (waiting tasks per tenant and reason, each tenant's earliest waiting submit, overdue tasks per tenant).

    A task placed this period (``placed``: committed_tasks) no longer waits; one whose placement
    did not commit still does.
    """
    now, reasons = snapshot.now, plan.reasons
    counts: Counter[tuple[str, str]] = Counter()  # plain keys in the loop: it runs once per waiting task
    earliest: dict[str, float] = {}
    late: Counter[str] = Counter()
    for task in snapshot.pending:
        tenant = task.tenant
        if task.deadline is not None and task.deadline < now:  # placed now or not, it is late
            late[tenant] += 1
        if task.task_id in placed:
            continue
        reason = reasons.get(task.task_id)
        if reason is not None:
            counts[(tenant, reason.code)] += 1
        if task.submit_time < earliest.get(tenant, now):
            earliest[tenant] = task.submit_time
    for reservation in snapshot.reservations:
        if reservation.deadline is not None and reservation.deadline < now:
            late[reservation.tenant] += 1
    names = sorted({*tenants, *earliest, *late, *(tenant for tenant, _ in counts)})
    by_reason: dict[Labels, float] = {(n, code.value): counts.get((n, code), 0) for n in names for code in ReasonCode}
    overdue: dict[Labels, float] = {(n,): late.get(n, 0) for n in names}
    return by_reason, Oldest(earliest, names), overdue


def oldest_values(oldest: Oldest, now: float) -> dict[Labels, float]:
    """oldest_values is the oldest wait per tenant at ``now`` (0 for a tenant with nothing waiting)."""
    return {(n,): max(0.0, now - oldest.earliest.get(n, now)) for n in oldest.names}


def age_oldest(metrics: Metrics, oldest: Oldest, now: float) -> None:
    """age_oldest moves the oldest-wait gauge to ``now`` while the daemon rests (the rest of the gauges hold)."""
    set_all(metrics.oldest_pending, oldest_values(oldest, now))


def capacity_values(snapshot: Snapshot, plan: Plan, types: Iterable[str]) -> tuple[dict[Labels, float], ...]:
    """capacity_values is (GPUs on schedulable nodes, free GPUs, largest placeable gang) per GPU type."""
    keys = list(types)
    total: dict[Labels, float] = {(t,): 0 for t in keys}
    for node in snapshot.nodes:
        if node.schedulable() and node.capacity.gpus:
            key = (_type(node.capacity.gpu_type),)
            total[key] = total.get(key, 0) + node.capacity.gpus
    frag = plan.fragmentation
    free = {(t,): frag.free_by_type.get(t, 0) for t in keys}
    largest = {(t,): frag.placeable_by_type.get(t, 0) for t in keys}
    return total, free, largest


def period_clusters(
    snapshot: Snapshot, plan: Plan, skipped: Collection[str] = (), clusters: Iterable[str] = (),
    drained: Collection[str] = (),
) -> list[ClusterFigures]:
    """period_clusters is each Slurm cluster's figures after this period's committed placements ([]: one cluster).

    Held GPUs are the live attempts' (a preemption's victim holds its GPUs until it ends) plus
    the placements that committed, on the snapshot's nodes: foreign work already taken out, a
    dark or drained cluster's nodes drained, as the policy saw them.
    """
    held: Counter[str] = Counter()
    attempts: list[tuple[str, ...]] = []
    for shares in [r.shares for r in snapshot.reservations] + [
        p.shares for p in plan.placements if p.task_id not in skipped
    ]:
        attempts.append(tuple(share.node for share in shares))
        for share in shares:
            held[share.node] += share.resources.gpus
    return cluster_figures(snapshot.nodes, held, attempts, drained, clusters)


def cluster_values(figures: Iterable[ClusterFigures]) -> tuple[dict[Labels, float], ...]:
    """cluster_values is (nodes per state, total GPUs per type, free GPUs per type, live attempts, drained) per cluster."""
    nodes: dict[Labels, float] = {}
    total: dict[Labels, float] = {}
    free: dict[Labels, float] = {}
    running: dict[Labels, float] = {}
    drained: dict[Labels, float] = {}
    for row in figures:
        nodes.update({(row.cluster, state): row.nodes.get(state, 0) for state in NODE_STATES})
        total.update({(row.cluster, t): gpus for t, gpus in row.total_gpus.items()})
        free.update({(row.cluster, t): gpus for t, gpus in row.free_gpus.items()})
        running[(row.cluster,)] = row.running_attempts
        drained[(row.cluster,)] = 1 if row.drained else 0
    return nodes, total, free, running, drained


def attempt_counts(session: Session) -> dict[str, int]:
    """attempt_counts is the number of attempts per state: one grouped query."""
    return dict(session.execute(select(Attempt.state, func.count()).group_by(Attempt.state)).all())


def waiting_depth(queued: Mapping[str, int], placed: Mapping[str, PendingTask]) -> dict[str, int]:
    """waiting_depth is the waiting tasks per tenant once this period's placements committed.

    ``queued`` is the waiting queue's count at the snapshot (``WaitingQueue.depth``: eligible or
    not, held or gated too); a grouped count over tasks joined to jobs cost 30-125 ms a period at
    50,000 waiting tasks (issue 24).
    """
    depth = dict(queued)
    for task in placed.values():
        depth[task.tenant] = max(0, depth.get(task.tenant, 0) - 1)
    return depth


def publish(
    metrics: Metrics,
    snapshot: Snapshot,
    plan: Plan,
    config: SchedulerConfig,
    *,
    skipped: Collection[str],
    placed: Mapping[str, PendingTask],
    depth: Mapping[str, int],
    attempts: Mapping[str, int],
    clusters: Iterable[str] = (),
    drained: Collection[str] = (),
) -> Oldest:
    """publish sets every cycle gauge from this period's snapshot, plan and store counts; the earliest waits, to age while resting.

    ``clusters`` are the Slurm clusters the daemon asks (none on a single-cluster site),
    ``drained`` the ones an admin drained.
    """
    tenants = sorted(set(tenant_names(snapshot)) | set(depth))
    types = gpu_types(snapshot)
    metrics.know_tenants(tenants, KINDS)
    set_all(metrics.queue_depth, {(t,): depth.get(t, 0) for t in tenants})
    set_all(metrics.attempts, {(s.value,): attempts.get(s.value, 0) for s in AttemptState})
    allocated, guaranteed, limit, borrowed = quota_values(snapshot, held_gpus(snapshot, plan, placed), tenants, types)
    for gauge, values in (
        (metrics.allocated, allocated), (metrics.guaranteed, guaranteed), (metrics.limit, limit),
        (metrics.borrowed, borrowed),
    ):  # fmt: skip
        set_all(gauge, values)
    for gauge, values in zip((metrics.weight, metrics.usage, metrics.usage_ratio), share_values(snapshot, tenants), strict=True):
        set_all(gauge, values)
    by_reason, oldest, overdue = waiting_values(snapshot, plan, tenants, placed)
    set_all(metrics.pending_tasks, by_reason)
    set_all(metrics.oldest_pending, oldest_values(oldest, snapshot.now))
    set_all(metrics.overdue, overdue)
    capacity = capacity_values(snapshot, plan, types)
    for gauge, values in zip((metrics.cluster_gpus, metrics.free_gpus, metrics.largest_gang), capacity, strict=True):
        set_all(gauge, values)
    per_cluster = cluster_values(period_clusters(snapshot, plan, skipped, clusters, drained))
    for gauge, values in zip(
        (metrics.cluster_nodes, metrics.cluster_total_gpus, metrics.cluster_free_gpus,
         metrics.cluster_running_attempts, metrics.cluster_drained), per_cluster, strict=True,
    ):  # fmt: skip
        set_all(gauge, values)
    metrics.stranded_gpus.set(plan.fragmentation.stranded_gpus)
    metrics.aging_bound.set(config.max_wait_s)
    return oldest


def count_placements(
    metrics: Metrics, snapshot: Snapshot, plan: Plan, placed: Mapping[str, PendingTask], preempted: Collection[str]
) -> None:
    """count_placements adds the period's committed placements (``placed``) and preemptions to the counters."""
    for placement in plan.placements:
        task = placed.get(placement.task_id)
        if task is None:
            continue
        metrics.placements.labels(task.tenant).inc()
        metrics.queue_delay.labels(task.kind.value, task.tenant).observe(max(0.0, snapshot.now - task.submit_time))
    victims = {p.attempt_id for p in plan.preemptions}
    tenant_of = {r.attempt_id: r.tenant for r in snapshot.reservations if r.attempt_id in victims} if victims else {}
    for preemption in plan.preemptions:
        tenant = tenant_of.get(preemption.attempt_id)
        if tenant is not None and preemption.attempt_id in preempted:
            metrics.preemptions.labels(tenant).inc()
            metrics.lost_gpu_seconds.labels(tenant).inc(max(0.0, preemption.lost_gpu_seconds))


def deadline_outcomes(
    session: Session, specs: SpecCache, job_ids: Collection[str], since: datetime
) -> dict[Labels, int]:
    """deadline_outcomes counts finished jobs with a deadline by (tenant, met|missed); jobs that ended before ``since`` are left out."""
    if not job_ids:
        return {}
    rows = session.execute(
        select(Job.id, Job.tenant, func.max(Attempt.ended_at))
        .join(Attempt, Attempt.job_id == Job.id)
        .where(among(session, Job.id, list(job_ids)))
        .group_by(Job.id, Job.tenant)
    ).all()
    counts: dict[Labels, int] = defaultdict(int)
    for job_id, tenant, ended in rows:
        try:
            spec = specs.get(session, job_id)
        except JOB_FAULTS:
            continue
        deadline = spec.deadline if isinstance(spec, InferenceSpec) else None
        if deadline is None or ended is None or ended < since:
            continue
        counts[(tenant, "met" if ended <= deadline else "missed")] += 1
    return dict(counts)
