"""Preemption: evict the least lost work, only for a good reason, never more than needed.

Reasons allowed: reclaiming guaranteed quota from borrowers, a higher priority class, or a
deadline in danger. Lost work is GPU-seconds since the last checkpoint (or start) plus the
restore cost per GPU. Non-preemptible work and work inside its minimum runtime are never
touched, and a gang is evicted whole (one Reservation at a time).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from meta.policy.capacity import Capacity
from meta.policy.config import SchedulerConfig
from meta.policy.equivalence import NodeClass
from meta.policy.gang import Pick, select
from meta.policy.quota import QuotaLedger
from meta.policy.shape import Shape
from meta.policy.snapshot import PendingTask, Reservation, Topology


@dataclass(slots=True)
class Victim:
    """Victim is a reservation that may be evicted, with its lost work and the reason."""

    res: Reservation
    lost: float
    why: str
    gpu_type: str | None
    freed: dict[int, tuple[int, float, int, int]]  # node index -> resources it frees there


def lost_work(r: Reservation, now: float) -> float:
    """lost_work is GPU-seconds since the last checkpoint (or start) plus restore cost per GPU."""
    since = max(r.start_time, r.last_checkpoint_time or r.start_time)
    gpus = r.gpus()
    return gpus * max(0.0, now - since) + r.restore_cost_s * gpus


def _why(task: PendingTask, rank: int, r: Reservation, reclaim: bool, urgent: bool,
         quota: QuotaLedger, gpu_type: str | None, config: SchedulerConfig, now: float) -> str | None:
    """_why returns the reason this reservation may be evicted for the task, or None."""
    victim_rank = config.rank(r.priority_class, r.kind, r.deadline)
    if victim_rank < rank:
        return f"higher priority class ({config.class_name(task.priority_class, task.kind, task.deadline)})"
    if reclaim and r.tenant != task.tenant and quota.borrowing(r.tenant, gpu_type):
        return f"{task.tenant} reclaims its guaranteed quota from borrower {r.tenant}"
    victim_endangered = r.deadline is not None and r.deadline - now <= config.deadline_urgency_s
    if urgent and victim_rank <= rank and not victim_endangered and r.deadline is None:
        return "deadline of the beneficiary is in danger"
    return None


def candidates(
    task: PendingTask, rank: int, reclaim: bool, urgent: bool, reservations: Sequence[Reservation],
    taken: set[str], cap: Capacity, feasible: set[int], quota: QuotaLedger, config: SchedulerConfig, now: float,
) -> list[Victim]:
    """candidates lists evictable reservations on feasible nodes, least lost work first."""
    out: list[Victim] = []
    for r in reservations:
        if r.stopping or not r.preemptible or r.attempt_id in taken or now - r.start_time < r.min_runtime_s:
            continue
        gpu_type, freed = _freed(r, cap, feasible)
        if not freed:
            continue
        why = _why(task, rank, r, reclaim, urgent, quota, gpu_type, config, now)
        if why is not None:
            out.append(Victim(r, lost_work(r, now), why, gpu_type, freed))
    out.sort(key=lambda v: (v.lost, v.res.attempt_id))
    return out[: config.max_victims_considered]


def _freed(r: Reservation, cap: Capacity, feasible: set[int]) -> tuple[str | None, dict[int, tuple]]:
    """_freed sums what a reservation would give back on each feasible node, and its GPU type."""
    freed: dict[int, tuple[int, float, int, int]] = {}
    gpu_type = None
    for share in r.shares:
        i = cap.index.get(share.node)
        if i is None:
            continue
        gpu_type = gpu_type or cap.gpu_type[i]
        if i in feasible:
            res = share.resources
            g, c, m, s = freed.get(i, (0, 0.0, 0, 0))
            freed[i] = (g + res.gpus, c + res.cpus, m + res.memory_mib, s + res.storage_gib)
    return gpu_type, freed


def stopping(reservations: Sequence[Reservation], taken: set[str], cap: Capacity, feasible: set[int]) -> list[Victim]:
    """stopping lists reservations already on their way out: their capacity is as good as free."""
    out = []
    for r in reservations:
        if r.stopping and r.attempt_id not in taken:
            gpu_type, freed = _freed(r, cap, feasible)
            if freed:
                out.append(Victim(r, 0.0, "already stopping", gpu_type, freed))
    return out


class _Trial:
    """_Trial keeps per-node slots with victims' capacity added, and aggregate slot counts."""

    def __init__(self, cap: Capacity, shape: Shape, feasible: set[int]) -> None:
        self.cap, self.shape = cap, shape
        self.extra: dict[int, list[float]] = defaultdict(lambda: [0, 0.0, 0, 0])
        self.slots = {i: self._slots(i) for i in feasible}
        self.leaf_total: dict[str, int] = defaultdict(int)
        for i, n in self.slots.items():
            self.leaf_total[cap.leaf[i]] += n
        self.total = sum(self.slots.values())

    def _slots(self, i: int) -> int:
        cap, e = self.cap, self.extra.get(i, (0, 0.0, 0, 0))
        return self.shape.slots(cap.gpu[i] + int(e[0]), cap.cpu[i] + e[1], cap.mem[i] + int(e[2]),
                                cap.sto[i] + int(e[3]), self.shape.workers)

    def apply(self, v: Victim, sign: int) -> None:
        """apply adds (sign=1) or removes (sign=-1) a victim's freed capacity."""
        for i, amounts in v.freed.items():
            if i not in self.slots:
                continue  # held or avoided: freeing it does not help this task
            e = self.extra[i]
            for k in range(4):
                e[k] += sign * amounts[k]
            new = self._slots(i)
            delta = new - self.slots[i]
            self.slots[i] = new
            self.total += delta
            self.leaf_total[self.cap.leaf[i]] += delta

    def enough(self) -> bool:
        """enough is the aggregate test: total slots (or one leaf's, if required) cover the gang."""
        if self.shape.topology is Topology.REQUIRE_SAME_SWITCH and self.shape.workers > 1:
            return max(self.leaf_total.values(), default=0) >= self.shape.workers
        return self.total >= self.shape.workers

    def picks(self) -> list[Pick]:
        """picks chooses nodes on free plus freed capacity."""
        cands = [(i, n) for i, n in self.slots.items() if n]
        return select(cands, self.shape.workers, self.shape.topology, self.cap.leaf, self.cap.spine)


def choose(
    cap: Capacity, shape: Shape, classes: Sequence[NodeClass], victims: list[Victim], leaving: list[Victim]
) -> tuple[list[Victim], list[Pick], dict[int, list[float]]] | None:
    """choose adds victims by least lost work until the task fits, then drops the unnecessary ones.

    ``leaving`` are reservations already stopping: they count first and cost nothing; the result
    lists them too when the picks use their nodes (the caller does not evict them again).
    """
    feasible = {
        i for c in classes for i in c.nodes
        if cap.hold_start[i] is None and cap.gang_blocked[i] is None and cap.names[i] not in shape.avoid
    }
    trial = _Trial(cap, shape, feasible)
    chosen: list[Victim] = []
    for v in [*leaving, *victims]:
        trial.apply(v, 1)
        chosen.append(v)
        if trial.enough() and trial.picks():
            break
    else:
        return None
    # Minimise: try dropping the costliest victims first; keep only those the fit needs.
    for v in sorted(chosen, key=lambda v: -v.lost):
        trial.apply(v, -1)
        if trial.enough() and trial.picks():
            chosen.remove(v)
        else:
            trial.apply(v, 1)
    picks = trial.picks()
    used = {i for i, _ in picks}
    chosen = [v for v in chosen if used & v.freed.keys()]
    return chosen, picks, {i: list(trial.extra.get(i, (0, 0.0, 0, 0))) for i in used}
