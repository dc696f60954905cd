"""Preemption: evict the least lost work, only for a good reason, never more than needed.

Reasons allowed: reclaiming guaranteed quota from borrowers, a higher priority class, or a
deadline in danger. Lost work is GPU-seconds since the last checkpoint (or start) plus the
restore cost per GPU. Non-preemptible work and work inside its minimum runtime are never
touched, and a gang is evicted whole (one Reservation at a time).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from meta.model.kinds import Topology
from meta.policy.capacity import Capacity
from meta.policy.config import SchedulerConfig
from meta.policy.equivalence import NodeClass
from meta.policy.gang import Pick, select
from meta.policy.quota import QuotaLedger
from meta.policy.shape import Shape
from meta.policy.snapshot import PendingTask, Reservation


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


Share = tuple[int, int, float, int, int]  # (node index, gpus, cpus, memory, storage)


@dataclass(slots=True)
class Evictable:
    """Evictable is a running reservation that rules allow to be evicted at all, with its cost."""

    res: Reservation
    rank: int
    lost: float
    gpu_type: str | None
    shares: list[Share]


def evictable(
    cap: Capacity, rank_of: Callable[[tuple], int], now: float
) -> tuple[list[Evictable], list[Evictable]]:
    """evictable splits running work into evictable (least lost work first) and already stopping."""
    pool: list[Evictable] = []
    leaving: list[Evictable] = []
    ranks: dict[tuple, int] = {}
    for r, rank_key, gpus, since, protected_until, entry in cap.ledger.evictable.values():
        shares = entry[0]
        if r.stopping:
            leaving.append(Evictable(r, 0, 0.0, entry[2], shares))
        elif now >= protected_until:
            # Lost work: GPU-seconds since the last checkpoint (or start) plus restore cost per GPU.
            lost = gpus * max(0.0, now - since) + r.restore_cost_s * gpus
            rank = ranks.get(rank_key)
            if rank is None:
                rank = ranks[rank_key] = rank_of(rank_key)
            pool.append(Evictable(r, rank, lost, entry[2], shares))
    pool.sort(key=lambda e: (e.lost, e.res.attempt_id))
    return pool, leaving


def heaviest_first(pool: Sequence[Evictable], share: Callable[[str], float]) -> list[Evictable]:
    """heaviest_first orders evictable work by its tenant's fair share, largest first, then least lost work."""
    shares = {e.res.tenant: share(e.res.tenant) for e in pool}
    return sorted(pool, key=lambda e: (-shares[e.res.tenant], e.lost, e.res.attempt_id))


def _why(task: PendingTask, rank: int, e: Evictable, reclaim: bool, urgent: bool,
         quota: QuotaLedger, config: SchedulerConfig, lighter: Callable[[str], bool] | None = None) -> str | None:
    """_why returns the reason this reservation may be evicted for the task, or None.

    ``lighter(tenant)`` tells whether a tenant's fair share is below the task's tenant's: such a
    borrower is spared by a reclaim (``reclaim_spares_lighter``).
    """
    if e.rank < rank:
        return f"higher priority class ({config.class_name(task.priority_class, task.kind, task.deadline)})"
    if (reclaim and e.res.tenant != task.tenant and quota.borrowing(e.res.tenant, e.gpu_type)
            and not (lighter is not None and lighter(e.res.tenant))):
        return f"{task.tenant} reclaims its guaranteed quota from borrower {e.res.tenant}"
    if urgent and e.rank <= rank and e.res.deadline is None:
        return "deadline of the beneficiary is in danger"
    return None


def candidates(
    task: PendingTask, rank: int, reclaim: bool, urgent: bool, pool: Sequence[Evictable],
    taken: set[str], feasible: set[int], quota: QuotaLedger, config: SchedulerConfig,
    rounded: bool = False, lighter: Callable[[str], bool] | None = None,
) -> list[Victim]:
    """candidates lists evictable reservations on feasible nodes for this task, least lost work first.

    ``rounded``: the reclaim takes the task's tenant past its guarantee (``guarantee_rounds_up_to_task``)
    and the task could be evicted in turn. Then reclaiming never takes a victim's tenant below its
    own guarantee: below it, that tenant could reclaim at once in the same way from the task's
    tenant, now the borrower, and the two would evict each other's jobs for ever (a livelock;
    tests/sim/test_preemption_terminates.py). Every reclaim then lowers the guarantees left unmet.
    """
    if not reclaim and not urgent and all(e.rank >= rank for e in pool):
        return []  # only a higher class could evict, and nothing running is lower
    out: list[Victim] = []
    borrowing: dict[tuple[str, str | None], bool] = {}
    released: dict[str, int] = {}  # rounded: GPUs of the victims listed so far, per tenant
    for e in pool:
        if e.res.attempt_id in taken:
            continue
        if e.rank >= rank and not urgent:
            # Only reclaim could apply: the victim's tenant must be a borrower (memoised per tenant).
            key = (e.res.tenant, e.gpu_type)
            if key not in borrowing:
                borrowing[key] = e.res.tenant != task.tenant and quota.borrowing(e.res.tenant, e.gpu_type)
            if not borrowing[key]:
                continue
        may_reclaim, gpus = reclaim, 0
        if rounded:
            # Counting every victim listed so far, choose() can pick any of them and the tenant keeps its guarantee.
            gpus = released.get(e.res.tenant, 0) + sum(share[1] for share in e.shares)
            may_reclaim = reclaim and quota.keeps_guarantee(e.res.tenant, e.gpu_type, gpus)
        why = _why(task, rank, e, may_reclaim, urgent, quota, config, lighter)
        if why is None:
            continue
        freed = _freed(e.shares, feasible)
        if freed:
            if rounded:
                released[e.res.tenant] = gpus
            out.append(Victim(e.res, e.lost, why, e.gpu_type, freed))
            if len(out) >= config.max_victims_considered:
                break
    return out


def _freed(shares: Sequence[Share], feasible: set[int]) -> dict[int, tuple[int, float, int, int]]:
    """_freed sums what a reservation would give back on each feasible node."""
    freed: dict[int, tuple[int, float, int, int]] = {}
    for i, g, c, m, s in shares:
        if i in feasible:
            g0, c0, m0, s0 = freed.get(i, (0, 0.0, 0, 0))
            freed[i] = (g0 + g, c0 + c, m0 + m, s0 + s)
    return freed


def stopping(leaving: Sequence[Evictable], taken: set[str], feasible: set[int]) -> list[Victim]:
    """stopping lists reservations already on their way out: their capacity is as good as free."""
    out = []
    for e in leaving:
        if e.res.attempt_id not in taken:
            freed = _freed(e.shares, feasible)
            if freed:
                out.append(Victim(e.res, 0.0, "already stopping", e.gpu_type, freed))
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
        return select(cands, self.shape.workers, self.shape.topology, self.cap.leaf, self.cap.spine, self.cap.cluster)


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
        and not shape.bars(cap.names[i])
    }
    if shape.gpus:
        # Cheap bound first: free plus freeable GPUs on usable nodes must cover the whole task.
        free = sum(cap.gpu[i] for i in feasible)
        freeable = sum(g for v in (*leaving, *victims) for i, (g, _, _, _) in v.freed.items() if i in feasible)
        if free + freeable < shape.total_gpus:
            return None
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
    dropped: set[int] = set()
    for v in sorted(chosen, key=lambda v: -v.lost):
        trial.apply(v, -1)
        if trial.enough() and trial.picks():
            dropped.add(id(v))
        else:
            trial.apply(v, 1)
    chosen = [v for v in chosen if id(v) not in dropped]
    picks = trial.picks()
    used = {i for i, _ in picks}
    chosen = [v for v in chosen if used & v.freed.keys()]
    return chosen, picks, {i: list(trial.extra.get(i, (0, 0.0, 0, 0))) for i in used}
