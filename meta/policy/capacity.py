"""Capacity: the cycle's free capacity per node in plain numbers, bucketed for best fit.

Reservations are read once here (one pass over their shares); inner loops then touch only
lists of ints and floats. Each schedulable node sits in a bucket keyed by (class, free GPUs),
so a best-fit search walks a handful of buckets instead of every node.
"""

from __future__ import annotations

from collections.abc import Iterable

from meta.policy.inventory import Inventory
from meta.policy.snapshot import Reservation

Usage = tuple[str, str | None, int, float, int]  # (tenant, GPU type, GPUs, cpus, memory MiB)


class Capacity:
    """Capacity tracks free cpus/memory/GPUs/storage per node plus the backfill holds on nodes."""

    def __init__(self, inv: Inventory, reservations: Iterable[Reservation]) -> None:
        self.inv = inv
        self.names, self.index, self.cls, self.classes = inv.names, inv.index, inv.node_class, inv.classes
        self.gpu_type, self.leaf, self.spine = inv.gpu_type, inv.leaf, inv.spine
        self.gpu, self.cpu, self.mem, self.sto = list(inv.gpu), list(inv.cpu), list(inv.mem), list(inv.sto)
        self._over: list[int] = []
        self.usage: list[Usage] = [self._subtract(r) for r in reservations]
        self._clamp()
        self.start = (list(self.gpu), list(self.cpu), list(self.mem), list(self.sto))
        self.buckets = self._buckets()
        self.free_by_type = self._free_by_type()
        n = len(self.names)
        self.hold_start: list[float | None] = [None] * n
        self.hold_spare: list[list[float] | None] = [None] * n
        self.hold_job: list[str | None] = [None] * n
        self.gang_blocked: list[str | None] = [None] * n

    def _subtract(self, r: Reservation) -> Usage:
        """_subtract removes one live reservation and returns its totals for quota and fair share."""
        index, gpu, cpu, mem, sto = self.index, self.gpu, self.cpu, self.mem, self.sto
        gpus = 0
        cpus = 0.0
        memory = 0
        gpu_type = None
        for share in r.shares:
            i = index.get(share.node)
            if i is None:
                continue
            res = share.resources
            gpu[i] -= res.gpus
            cpu[i] -= res.cpus
            mem[i] -= res.memory_mib
            sto[i] -= res.storage_gib
            if gpu[i] < 0 or cpu[i] < 0 or mem[i] < 0 or sto[i] < 0:
                self._over.append(i)
            gpus += res.gpus
            cpus += res.cpus
            memory += res.memory_mib
            if res.gpus and gpu_type is None:
                gpu_type = res.gpu_type or self.gpu_type[i]
        return (r.tenant, gpu_type, gpus, cpus, memory)

    def _clamp(self) -> None:
        """_clamp treats an over-reserved node as full rather than negative."""
        for i in self._over:
            for arr in (self.gpu, self.cpu, self.mem, self.sto):
                if arr[i] < 0:
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
        other = object.__new__(Capacity)
        other.__dict__.update(self.__dict__)
        other.gpu, other.cpu, other.mem, other.sto = (list(a) for a in self.start)
        other.buckets = other._buckets()
        other.free_by_type = other._free_by_type()
        n = len(self.names)
        other.hold_start = [None] * n
        other.hold_spare = [None] * n
        other.hold_job = [None] * n
        other.gang_blocked = [None] * n
        return other
