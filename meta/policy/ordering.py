"""Ordering: aged tasks first, then urgent deadlines, then priority classes, fair share inside.

Within one priority class, tenants take turns by lowest weighted dominant share (re-read after
every placement, so a tenant that just got capacity drops back); within a tenant, the oldest
task goes first (optionally nudged towards short jobs).
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from meta.policy.config import SchedulerConfig
from meta.policy.fairshare import FairShare
from meta.policy.snapshot import PendingTask


def slack(task: PendingTask, now: float) -> float | None:
    """slack is the time a deadline task can still wait: deadline - now - runtime estimate."""
    if task.deadline is None:
        return None
    return task.deadline - now - task.runtime_estimate_s


def is_aged(task: PendingTask, now: float, config: SchedulerConfig) -> bool:
    """is_aged tells whether a task has waited past max_wait and now outranks fair share."""
    return now - task.submit_time >= config.max_wait_s


def is_urgent(task: PendingTask, now: float, config: SchedulerConfig) -> bool:
    """is_urgent tells whether a deadline task's slack has run below the urgency window."""
    s = slack(task, now)
    return s is not None and s <= config.deadline_urgency_s


def _tenant_key(task: PendingTask, config: SchedulerConfig) -> tuple:
    """_tenant_key orders one tenant's tasks of one class: earlier (or shorter) first."""
    size = task.runtime_estimate_s
    if config.short_job_gpu_exponent:
        size *= max(1, task.per_worker.gpus * task.workers) ** config.short_job_gpu_exponent
    return (task.submit_time + config.short_job_weight * size, task.task_id)


def ordered(
    pending: Sequence[PendingTask], fair: FairShare, config: SchedulerConfig, now: float,
    rank_of: Callable[[PendingTask], int] | None = None,
    within_guarantee: Callable[[PendingTask], bool] | None = None,
) -> Iterator[PendingTask]:
    """ordered yields pending tasks in scheduling order; fair share is re-read lazily as it changes.

    Tasks that fit inside their tenant's guarantee go before tasks that would borrow (as in
    Kueue): otherwise borrowers take the capacity a reclaiming tenant just freed by preemption,
    and become the cheapest victims of the next cycle (a preemption storm).
    """
    if within_guarantee is None:
        yield from _ordered(pending, fair, config, now, rank_of)
        return
    owned: list[PendingTask] = []
    borrowing: list[PendingTask] = []
    for t in pending:  # classified once, before any placement changes usage
        (owned if within_guarantee(t) else borrowing).append(t)
    # Inside guarantees tenants take turns by share (each is owed its own); borrowers may merge.
    inside = replace(config, fair_share_horizon_s=None) if config.guaranteed_in_share_order else config
    yield from _ordered(owned, fair, inside, now, rank_of)
    yield from _ordered(borrowing, fair, config, now, rank_of)


def _ordered(
    pending: Sequence[PendingTask], fair: FairShare, config: SchedulerConfig, now: float,
    rank_of: Callable[[PendingTask], int] | None,
) -> Iterator[PendingTask]:
    """_ordered yields one group: aged, then urgent deadlines, then classes with fair-share turns."""
    aged: list[PendingTask] = []
    urgent: list[PendingTask] = []
    by_rank: dict[int, dict[str, list[PendingTask]]] = defaultdict(lambda: defaultdict(list))
    for task in pending:
        if is_aged(task, now, config):
            aged.append(task)
        elif is_urgent(task, now, config):
            urgent.append(task)
        else:
            rank = rank_of(task) if rank_of else config.rank(task.priority_class, task.kind, task.deadline)
            by_rank[rank][task.tenant].append(task)
    # Aging bounds every wait: past max_wait, plain submit order wins over everything else.
    aged.sort(key=lambda t: (t.submit_time, t.task_id))
    yield from aged
    # Deadlines: the least slack first.
    urgent.sort(key=lambda t: (slack(t, now), t.task_id))
    yield from urgent
    for rank in sorted(by_rank, reverse=True):
        yield from _interleave(by_rank[rank], fair, config)


def _interleave(
    queues: dict[str, list[PendingTask]], fair: FairShare, config: SchedulerConfig
) -> Iterator[PendingTask]:
    """_interleave hands the next turn to the tenant whose head task is furthest up the line.

    By default that is the tenant with the lowest current share. With ``fair_share_horizon_s``
    set, tenants' tasks merge by the within-tenant key (submit time, nudged towards short jobs)
    shifted back by horizon x share: a tenant with more than its share waits longer, but its
    short jobs can still pass another tenant's long ones.
    """
    horizon = config.fair_share_horizon_s
    heads: dict[str, int] = {}
    heap: list[tuple[float, tuple, str]] = []

    def position(tenant: str, key: tuple) -> float:
        """position is a tenant's place in line: its share, or its head's key shifted by its share."""
        share = fair.share(tenant)
        return share if horizon is None else key[0] + horizon * share

    def push(tenant: str, at: int) -> None:
        """push queues the tenant's task at index ``at`` at its current position."""
        key = _tenant_key(queues[tenant][at], config)
        heapq.heappush(heap, (position(tenant, key), key, tenant))

    for tenant, tasks in queues.items():
        tasks.sort(key=lambda t: _tenant_key(t, config))
        heads[tenant] = 0
        push(tenant, 0)
    while heap:
        pos, key, tenant = heapq.heappop(heap)
        if position(tenant, key) > pos + 1e-12:
            # The tenant got capacity since it was queued: re-queue at its new position.
            push(tenant, heads[tenant])
            continue
        at = heads[tenant]
        heads[tenant] = at + 1
        yield queues[tenant][at]
        if at + 1 < len(queues[tenant]):
            push(tenant, at + 1)
