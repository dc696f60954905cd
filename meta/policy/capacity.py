"""Capacity: the cycle's free capacity per node in plain numbers, bucketed for best fit.

Pydantic objects are read once here; inner loops touch only lists of ints and floats. Each
schedulable node sits in a bucket keyed by (class, free GPUs), so a best-fit search walks a
handful of buckets instead of every node.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from meta.policy.equivalence import NodeClass
from meta.policy.feasibility import leaf_name
from meta.policy.snapshot import NodeShare, NodeState, Reservation


class Capacity:
    """Capacity tracks free cpus/memory/GPUs/storage per node plus the backfill holds on nodes."""

    def __init__(
        self,
        nodes: Sequence[NodeState],
        classes: Sequence[NodeClass],
        node_class: Sequence[int],
        reservations: Iterable[Reservation],
        switch_parent: dict[str, str],
    ) -> None:
        self.names = [n.name for n in nodes]
        self.index = {name: i for i, name in enumerate(self.names)}
        self.cls = list(node_class)
        self.classes = classes
        self.gpu_type = [classes[c].gpu_type for c in node_class]
        self.leaf = [leaf_name(n.switch) for n in nodes]
        self.spine = [switch_parent.get(leaf, "") for leaf in self.leaf]
        self.gpu = [classes[c].gpus for c in node_class]
        self.cpu = [classes[c].cpus for c in node_class]
        self.mem = [classes[c].mem for c in node_class]
        self.sto = [classes[c].sto for c in node_class]
        for r in reservations:
            self._subtract_shares(r.shares)
        self.buckets: list[list[dict[int, None]]] = [
            [{} for _ in range(c.gpus + 1)] if c.schedulable else [] for c in classes
        ]
        self.free_by_type: dict[str | None, int] = {}
        for i, c in enumerate(self.cls):
            if classes[c].schedulable:
                self.buckets[c][self.gpu[i]][i] = None
                self.free_by_type[self.gpu_type[i]] = self.free_by_type.get(self.gpu_type[i], 0) + self.gpu[i]
        n = len(self.names)
        self.hold_start: list[float | None] = [None] * n
        self.hold_spare: list[list[float] | None] = [None] * n
        self.hold_job: list[str | None] = [None] * n
        self.gang_blocked: list[str | None] = [None] * n

    def _subtract_shares(self, shares: Iterable[NodeShare]) -> None:
        """_subtract_shares removes live reservations; an over-reserved node clamps at zero."""
        for share in shares:
            i = self.index.get(share.node)
            if i is None:
                continue
            r = share.resources
            self.gpu[i] = max(0, self.gpu[i] - r.gpus)
            self.cpu[i] = max(0.0, self.cpu[i] - r.cpus)
            self.mem[i] = max(0, self.mem[i] - r.memory_mib)
            self.sto[i] = max(0, self.sto[i] - r.storage_gib)

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

    def free_gpus(self, i: int) -> int:
        """free_gpus is the free GPU count on node i."""
        return self.gpu[i]

    def snapshot_copy(self) -> Capacity:
        """snapshot_copy freezes the cycle-start view used to explain who took the capacity."""
        other = object.__new__(Capacity)
        for name in ("names", "index", "cls", "classes", "gpu_type", "leaf", "spine", "hold_job"):
            setattr(other, name, getattr(self, name))
        other.gpu, other.cpu, other.mem, other.sto = list(self.gpu), list(self.cpu), list(self.mem), list(self.sto)
        other.buckets = [[dict(b) for b in per_class] for per_class in self.buckets]
        other.free_by_type = dict(self.free_by_type)
        n = len(self.names)
        other.hold_start = [None] * n
        other.hold_spare = [None] * n
        other.gang_blocked = [None] * n
        return other
