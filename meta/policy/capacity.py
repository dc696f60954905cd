"""Capacity: the cycle's free capacity per node in plain numbers, bucketed for best fit.

Reservations are read once here (one pass over their shares); inner loops then touch only
lists of ints and floats. Each schedulable node sits in a bucket keyed by (class, free GPUs),
so a best-fit search walks a handful of buckets instead of every node.
"""

from __future__ import annotations

from collections.abc import Iterable

from meta.policy.inventory import Inventory
from meta.policy.snapshot import Reservation

TenantUsage = dict[str, list]  # tenant -> [{GPU type: GPUs}, cpus, memory MiB]
_Entry = tuple[list[tuple[int, int, float, int, int]], str, str | None, int, float, int]


class Ledger:
    """Ledger is what live reservations hold, kept between cycles and updated by difference.

    Cycles see mostly the same reservation objects; subtracting only the ones that came and
    adding back the ones that went keeps the per-cycle cost proportional to the change.
    """

    def __init__(self, inv: Inventory) -> None:
        self.inv = inv
        self.held: dict[int, tuple[Reservation, _Entry]] = {}  # id -> (reservation kept alive, entry)
        self.free = [list(inv.gpu), list(inv.cpu), list(inv.mem), list(inv.sto)]
        self.tenants: TenantUsage = {}
        # Known capacity returns: id -> [(end, node, gpus, cpus, memory, storage)]; stopping work
        # returns at -inf (that is, now), work without an expected end never.
        self.releases: dict[int, list[tuple[float, int, int, float, int, int]]] = {}
        # Reservations that may ever be evicted (or are stopping), with what pricing them needs.
        self.evictable: dict[int, tuple[Reservation, tuple, int, float, float, _Entry]] = {}

    def _entry(self, r: Reservation) -> _Entry:
        """_entry flattens a reservation into per-node amounts and its totals."""
        index, types = self.inv.index, self.inv.gpu_type
        shares = []
        gpus, cpus, mem, gpu_type = 0, 0.0, 0, None
        for share in r.shares:
            i = index.get(share.node)
            if i is None:
                continue
            res = share.resources
            shares.append((i, res.gpus, res.cpus, res.memory_mib, res.storage_gib))
            gpus += res.gpus
            cpus += res.cpus
            mem += res.memory_mib
            if res.gpus and gpu_type is None:
                gpu_type = res.gpu_type or types[i]
        return (shares, r.tenant, gpu_type, gpus, cpus, mem)

    def _apply(self, entry: _Entry, sign: int) -> None:
        """_apply subtracts (sign=1) or returns (sign=-1) a reservation's capacity and usage."""
        gpu, cpu, mem, sto = self.free
        shares, tenant, gpu_type, gpus, cpus, memory = entry
        for i, g, c, m, s in shares:
            gpu[i] -= sign * g
            cpu[i] -= sign * c
            mem[i] -= sign * m
            sto[i] -= sign * s
        usage = self.tenants.get(tenant)
        if usage is None:
            usage = self.tenants[tenant] = [{}, 0.0, 0]
        if gpus:
            usage[0][gpu_type] = usage[0].get(gpu_type, 0) + sign * gpus
        usage[1] += sign * cpus
        usage[2] += sign * memory

    def update(self, reservations: Iterable[Reservation]) -> None:
        """update brings the ledger to exactly this set of reservations."""
        current = {id(r): r for r in reservations}
        held = self.held
        for key in [k for k in held if k not in current]:
            self._apply(held.pop(key)[1], -1)
            self.releases.pop(key, None)
            self.evictable.pop(key, None)
        for key, r in current.items():
            if key not in held:
                entry = self._entry(r)
                held[key] = (r, entry)
                self._apply(entry, 1)
                if r.preemptible or r.stopping:
                    since = max(r.start_time, r.last_checkpoint_time or r.start_time)
                    rank_key = (r.priority_class, r.kind, r.deadline is not None)
                    self.evictable[key] = (r, rank_key, entry[3], since, r.start_time + r.min_runtime_s, entry)
                end = float("-inf") if r.stopping else r.expected_end
                if end is not None:
                    self.releases[key] = [(end, i, g, c, m, st) for i, g, c, m, st in entry[0]]


def ledger_for(inv: Inventory, reservations: Iterable[Reservation]) -> Ledger:
    """ledger_for returns the inventory's ledger brought up to date with these reservations."""
    ledger = inv.ledger
    if ledger is None:
        ledger = inv.ledger = Ledger(inv)
    ledger.update(reservations)
    return ledger


class Capacity:
    """Capacity tracks free cpus/memory/GPUs/storage per node plus the backfill holds on nodes."""

    def __init__(self, inv: Inventory, reservations: Iterable[Reservation]) -> None:
        self.inv = inv
        self.names, self.index, self.cls, self.classes = inv.names, inv.index, inv.node_class, inv.classes
        self.gpu_type, self.leaf, self.spine, self.cluster = inv.gpu_type, inv.leaf, inv.spine, inv.cluster
        ledger = self.ledger = ledger_for(inv, reservations)
        self.gpu, self.cpu, self.mem, self.sto = (list(a) for a in ledger.free)
        self.usage: TenantUsage = {t: [dict(u[0]), u[1], u[2]] for t, u in ledger.tenants.items()}
        self._clamp()
        self.start = (list(self.gpu), list(self.cpu), list(self.mem), list(self.sto))
        self.buckets = self._buckets()
        self.free_by_type = self._free_by_type()
        n = len(self.names)
        self.hold_start: list[float | None] = [None] * n
        self.hold_spare: list[list[float] | None] = [None] * n
        self.hold_job: list[str | None] = [None] * n
        self.gang_blocked: list[str | None] = [None] * n

    def shares_of(self, r: Reservation) -> list[tuple[int, int, float, int, int]]:
        """shares_of is a live reservation's (node index, gpus, cpus, memory, storage) per share."""
        return self.ledger.held[id(r)][1][0]

    def _clamp(self) -> None:
        """_clamp treats an over-reserved node as full rather than negative."""
        for arr in (self.gpu, self.cpu, self.mem, self.sto):
            if min(arr, default=0) < 0:
                for i, v in enumerate(arr):
                    if v < 0:
                        arr[i] = 0

    def _free_by_type(self) -> dict[str | None, int]:
        """_free_by_type sums free GPUs per type on schedulable nodes, from the buckets."""
        out: dict[str | None, int] = {}
        for c in self.classes:
            if c.schedulable:
                out[c.gpu_type] = out.get(c.gpu_type, 0) + sum(g * len(b) for g, b in enumerate(self.buckets[c.id]))
        return out

    def _buckets(self) -> list[list[dict[int, None]]]:
        """_buckets files every schedulable node under (class, free GPUs)."""
        buckets: list[list[dict[int, None]]] = [
            [{} for _ in range(c.gpus + 1)] if c.schedulable else [] for c in self.classes
        ]
        gpu = self.gpu
        for c in self.classes:
            if c.schedulable:
                per_class = buckets[c.id]
                for i in c.nodes:
                    per_class[gpu[i]][i] = None
        return buckets

    def take(self, i: int, gpu: int, cpu: float, mem: int, sto: int, end: float) -> None:
        """take consumes capacity on node i for work ending at ``end`` (holds are respected)."""
        old = self.gpu[i]
        self.gpu[i] = old - gpu
        self.cpu[i] -= cpu
        self.mem[i] -= mem
        self.sto[i] -= sto
        if gpu:
            bucket = self.buckets[self.cls[i]]
            del bucket[old][i]
            bucket[old - gpu][i] = None
            self.free_by_type[self.gpu_type[i]] -= gpu
        start = self.hold_start[i]
        if start is not None and end > start:
            # Work that outlives the hold's start eats into the spare the head does not need.
            spare = self.hold_spare[i]
            assert spare is not None
            spare[0] -= gpu
            spare[1] -= cpu
            spare[2] -= mem
            spare[3] -= sto

    def hold(self, i: int, start: float, spare: list[float], job: str) -> None:
        """hold reserves node i for a head-of-line task from ``start``, leaving ``spare`` usable after."""
        self.hold_start[i] = start
        self.hold_spare[i] = spare
        self.hold_job[i] = job

    def at_cycle_start(self) -> Capacity:
        """at_cycle_start rebuilds the cycle-start view used to explain who took the capacity."""
        return self.with_free(self.start)

    def with_free(self, free: tuple[list, list, list, list]) -> Capacity:
        """with_free is a view of the same nodes with these free amounts (copied) and no holds."""
        other = object.__new__(Capacity)
        other.__dict__.update(self.__dict__)
        other.gpu, other.cpu, other.mem, other.sto = (list(a) for a in free)
        other._clamp()
        other.buckets = other._buckets()
        other.free_by_type = other._free_by_type()
        n = len(self.names)
        other.hold_start = [None] * n
        other.hold_spare = [None] * n
        other.hold_job = [None] * n
        other.gang_blocked = [None] * n
        return other
