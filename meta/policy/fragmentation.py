"""Fragmentation: free GPUs, the stranded ones no pending shape can use, and the largest gang."""

from __future__ import annotations

from collections.abc import Iterable

from meta.policy.capacity import Capacity
from meta.policy.plan import FragmentationReport
from meta.policy.shape import Shape


def report(cap: Capacity, shapes: Iterable[Shape]) -> FragmentationReport:
    """report measures free GPUs on schedulable nodes after this cycle's placements."""
    worker_shapes = {(s.gpu_type, s.gpus, s.cpus, s.mem, s.sto, s.network, s.partition) for s in shapes if s.gpus}
    free_by_type: dict[str, int] = {}
    stranded = 0
    usable_by_type: dict[str, int] = {}
    seen: dict[tuple, bool] = {}
    for c in cap.classes:
        if not c.schedulable or not c.gpus:
            continue
        buckets = cap.buckets[c.id]
        for g in range(1, len(buckets)):
            for i in buckets[g]:  # only nodes with free GPUs
                key = (c.id, g, cap.cpu[i], cap.mem[i], cap.sto[i])
                usable = seen.get(key)
                if usable is None:
                    usable = _any_fits(worker_shapes, c, g, cap.cpu[i], cap.mem[i], cap.sto[i])
                    seen[key] = usable
                name = c.gpu_type or "gpu"
                free_by_type[name] = free_by_type.get(name, 0) + g
                if usable:
                    usable_by_type[name] = usable_by_type.get(name, 0) + g
                else:
                    stranded += g
    if not worker_shapes:
        stranded = 0  # an empty queue strands nothing
    largest = max(usable_by_type.values(), default=0) if worker_shapes else max(free_by_type.values(), default=0)
    return FragmentationReport(
        free_gpus=sum(free_by_type.values()),
        stranded_gpus=stranded,
        largest_placeable_gang_gpus=largest,
        free_by_type=free_by_type,
    )


def _any_fits(shapes: set[tuple], c, g: int, cpu: float, mem: int, sto: int) -> bool:
    """_any_fits tells whether any pending worker shape fits the free part of a node of class c."""
    for gpu_type, gpus, cpus, m, s, network, partition in shapes:
        if gpu_type is not None and gpu_type != c.gpu_type:
            continue
        if network is not None and network != c.network:
            continue
        if partition is not None and partition not in c.partitions:
            continue
        if gpus <= g and cpus <= cpu + 1e-9 and m <= mem and s <= sto:
            return True
    return False
