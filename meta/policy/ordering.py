"""Ordering: aged tasks first, then urgent deadlines, then priority classes, fair share inside.

Within one priority class, tenants take turns by lowest weighted dominant share (re-read after
every placement, so a tenant that just got capacity drops back); within a tenant, the oldest
task goes first (optionally nudged towards short jobs). With ``tenant_order: multifactor`` the
class's places go to tenants in Slurm's multifactor order instead, each filled with its
tenant's next task (slot-preserving tenant order).
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
    if task.deadline is None:  # most tasks: no call to slack (a pass asks this of every waiting task)
        return False
    return task.deadline - now - task.runtime_estimate_s <= config.deadline_urgency_s


def submit_key(task: PendingTask, config: SchedulerConfig) -> float:
    """submit_key is a task's place inside its tenant's line: submit time + min(weight x size, cap)."""
    size = task.runtime_estimate_s
    if config.short_job_gpu_exponent:
        size *= max(1, task.per_worker.gpus * task.workers) ** config.short_job_gpu_exponent
    penalty = config.short_job_weight * size
    cap = config.short_job_max_penalty_s
    # The cap is the promise: a job is never passed by same-line work submitted more than cap after it.
    return task.submit_time + (penalty if cap is None else min(penalty, cap))


def _tenant_key(task: PendingTask, config: SchedulerConfig) -> tuple:
    """_tenant_key orders one tenant's tasks of one class: earlier (or shorter) first."""
    return (submit_key(task, config), task.task_id)


class OrderTrace:
    """OrderTrace is where ordered() leaves, for the task it just yielded, its line and who is next in it.

    Only the decision record reads it (``meta/policy/decisions.py``); setting it costs a few
    attribute writes per task, and the rivals are looked up only when a decision asks.
    """

    __slots__ = ("guaranteed", "tier", "position", "_line", "_at", "_heap", "_queues", "_heads", "_where", "_key")

    def __init__(self) -> None:
        self.guaranteed: bool | None = None
        self.tier, self.position = "class", 0.0
        self._line: list[PendingTask] | None = None
        self._at = 0
        self._heap: list = []
        self._queues: dict[str, list[PendingTask]] = {}
        self._heads: dict[str, int] = {}
        self._where: Callable[[str, tuple], float] = lambda _tenant, key: key[0]
        self._key: Callable[[PendingTask], tuple] = lambda t: (t.submit_time, t.task_id)

    def in_line(self, tier: str, line: list[PendingTask], at: int, position: float) -> None:
        """in_line says the task is ``line[at]`` of a sorted line (aged or urgent)."""
        # one attribute a statement: a wider unpacking would build a tuple per waiting task
        self.tier = tier
        self._line = line
        self._at = at
        self.position = position

    @property
    def lined(self) -> bool:
        """lined tells whether the last task came from a sorted line (aged, urgent or multifactor slots)."""
        return self._line is not None

    def turns(self, heap: list, queues: dict, heads: dict, where: Callable[[str, tuple], float],
              key: Callable[[PendingTask], tuple]) -> None:
        """turns says the next tasks come from the tenants' turns of one class (set once per class)."""
        self._heap = heap
        self._queues = queues
        self._heads = heads
        self._where = where
        self._key = key

    def in_turns(self, position: float) -> None:
        """in_turns says the task came from the tenants' turns, at ``position``."""
        self.tier = "class"
        self._line = None
        self.position = position

    def rivals(self, tenant: str, k: int) -> list[PendingTask]:
        """rivals are up to ``k`` tasks next in the same line: the others' heads and the tenant's own next."""
        if self._line is not None:
            return self._line[self._at + 1 : self._at + 1 + k]
        heads = [(self._where(t, key), key, t) for _, key, t in heapq.nsmallest(k, self._heap)]
        nxt = self._heads.get(tenant, 0)
        own = self._queues.get(tenant, [])
        if nxt < len(own):
            heads.append((self._where(tenant, self._key(own[nxt])), (), tenant))
        heads.sort(key=lambda h: h[0])
        out = []
        for _, _, t in heads[:k]:
            at = self._heads[t] if t != tenant else nxt
            out.append(self._queues[t][at])
        return out


def ordered(
    pending: Sequence[PendingTask], fair: FairShare, config: SchedulerConfig, now: float,
    rank_of: Callable[[PendingTask], int] | None = None,
    within_guarantee: Callable[[PendingTask], bool] | None = None,
    trace: OrderTrace | None = None,
    priority: Callable[[PendingTask], float] | None = None,
) -> Iterator[PendingTask]:
    """ordered yields pending tasks in scheduling order; fair share is re-read lazily as it changes.

    Tasks that fit inside their tenant's guarantee go before tasks that would borrow (as in
    Kueue): otherwise borrowers take the capacity a reclaiming tenant just freed by preemption,
    and become the cheapest victims of the next cycle (a preemption storm). With a ``trace``,
    each yielded task's line and place in it are left there for the decision record.
    ``priority`` is Slurm's multifactor priority (slurmlike.multifactor), which
    ``tenant_order: multifactor`` needs.
    """
    if config.tenant_order == "multifactor" and priority is None:
        raise ValueError("tenant_order 'multifactor' needs the tasks' multifactor priority")
    if within_guarantee is None:
        yield from _ordered(pending, fair, config, now, rank_of, trace, priority)
        return
    owned: list[PendingTask] = []
    borrowing: list[PendingTask] = []
    for t in pending:  # classified once, before any placement changes usage
        (owned if within_guarantee(t) else borrowing).append(t)
    # Inside guarantees tenants take turns by share (each is owed its own); borrowers may merge.
    inside = replace(config, fair_share_horizon_s=None) if config.guaranteed_in_share_order else config
    if trace is not None:
        trace.guaranteed = True
    yield from _ordered(owned, fair, inside, now, rank_of, trace, priority)
    if trace is not None:
        trace.guaranteed = False
    yield from _ordered(borrowing, fair, config, now, rank_of, trace, priority)


def _ordered(
    pending: Sequence[PendingTask], fair: FairShare, config: SchedulerConfig, now: float,
    rank_of: Callable[[PendingTask], int] | None, trace: OrderTrace | None = None,
    priority: Callable[[PendingTask], float] | None = None,
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
    # Deadlines: the least slack first.
    urgent.sort(key=lambda t: (slack(t, now), t.task_id))
    if trace is None:
        yield from aged
        yield from urgent
    else:
        for i, t in enumerate(aged):
            trace.in_line("aged", aged, i, t.submit_time)
            yield t
        for i, t in enumerate(urgent):
            trace.in_line("urgent", urgent, i, slack(t, now) or 0.0)
            yield t
    for rank in sorted(by_rank, reverse=True):
        if priority is not None and config.tenant_order == "multifactor":
            yield from _slots(by_rank[rank], priority, config, trace)
        else:
            yield from _interleave(by_rank[rank], fair, config, trace)


def _slots(
    queues: dict[str, list[PendingTask]], priority: Callable[[PendingTask], float], config: SchedulerConfig,
    trace: OrderTrace | None = None,
) -> Iterator[PendingTask]:
    """_slots walks Slurm's multifactor order and fills each place with its tenant's next task.

    Which tenant gets the n-th place is exactly plain Slurm's order of these tasks; which of the
    tenant's tasks takes it is the within-tenant key (shortest-first). A tenant's short jobs
    therefore only ever pass its own long ones, never another tenant's work. Unlike the turns,
    the order is fixed for the cycle (Slurm computes priorities once per pass as well).
    """
    line = sorted((t for tasks in queues.values() for t in tasks),
                  key=lambda t: (-priority(t), t.submit_time, t.task_id))  # fmt: skip
    heads = dict.fromkeys(queues, 0)
    for tasks in queues.values():
        tasks.sort(key=lambda t: _tenant_key(t, config))
    out: list[PendingTask] = []
    for slot in line:
        at = heads[slot.tenant]
        heads[slot.tenant] = at + 1
        out.append(queues[slot.tenant][at])
    if trace is None:
        yield from out
        return
    for i, t in enumerate(out):
        trace.in_line("class", out, i, float(i))
        yield t


def _interleave(
    queues: dict[str, list[PendingTask]], fair: FairShare, config: SchedulerConfig, trace: OrderTrace | None = None
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

    def key_of(task: PendingTask) -> tuple:
        """key_of is the within-tenant key under this group's config."""
        return _tenant_key(task, config)

    if trace is not None:
        trace.turns(heap, queues, heads, position, key_of)
    for tenant, tasks in queues.items():
        tasks.sort(key=key_of)
        heads[tenant] = 0
        push(tenant, 0)
    while heap:
        pos, key, tenant = heapq.heappop(heap)
        if position(tenant, key) > pos + 1e-12:
            # The tenant got capacity since it was queued: re-queue at its new position.
            push(tenant, heads[tenant])
            continue
        tasks, at = queues[tenant], heads[tenant]
        while True:
            heads[tenant] = at + 1
            if trace is not None:
                trace.in_turns(pos)
            yield tasks[at]
            at += 1
            if at == len(tasks):
                break
            key = key_of(tasks[at])
            pos = position(tenant, key)
            # The tenant's next task goes on at once if it is ahead of every other head: what
            # pushing it and popping the heap would give, without either (a long run is common).
            if heap and not (pos, key, tenant) < heap[0]:
                heapq.heappush(heap, (pos, key, tenant))
                break
