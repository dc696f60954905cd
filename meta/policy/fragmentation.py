"""Fragmentation: free GPUs, the stranded ones no pending shape can use, and the largest gang."""

from __future__ import annotations

from collections.abc import Iterable

from meta.policy.capacity import Capacity
from meta.policy.equivalence import NodeClass
from meta.policy.plan import FragmentationReport
from meta.policy.shape import Shape


def report(cap: Capacity, shapes: Iterable[Shape]) -> FragmentationReport:
    """report measures free GPUs on schedulable nodes after this cycle's placements."""
    worker_shapes = {(s.gpu_type, s.gpus, s.cpus, s.mem, s.sto, s.network, s.partition) for s in shapes if s.gpus}
    free_by_type: dict[str, int] = {}
    usable_by_type: dict[str, int] = {}
    stranded = 0
    for c in cap.classes:
        if not c.schedulable or not c.gpus:
            continue
        name = c.gpu_type or "gpu"
        matching = _matching(worker_shapes, c)
        buckets = cap.buckets[c.id]
        for g in range(1, len(buckets)):
            nodes = buckets[g]
            if not nodes:
                continue
            free_by_type[name] = free_by_type.get(name, 0) + g * len(nodes)
            needs = _pareto([(cpus, mem, sto) for gpus, cpus, mem, sto in matching if gpus <= g])
            usable = sum(g for i in nodes if _fits_any(needs, cap.cpu[i], cap.mem[i], cap.sto[i]))
            usable_by_type[name] = usable_by_type.get(name, 0) + usable
            stranded += g * len(nodes) - usable
    if not worker_shapes:
        stranded = 0  # an empty queue strands nothing
    placeable = usable_by_type if worker_shapes else free_by_type
    largest = max(placeable.values(), default=0)
    return FragmentationReport(
        free_gpus=sum(free_by_type.values()),
        stranded_gpus=stranded,
        largest_placeable_gang_gpus=largest,
        free_by_type=free_by_type,
        placeable_by_type=dict(placeable),
    )


def _matching(shapes: set[tuple], c: NodeClass) -> list[tuple[int, float, int, int]]:
    """_matching keeps the worker shapes whose type, network and partition fit class c."""
    out = []
    for gpu_type, gpus, cpus, mem, sto, network, partition in shapes:
        if gpu_type is not None and gpu_type != c.gpu_type:
            continue
        if network is not None and network != c.network:
            continue
        if partition is not None and partition not in c.partitions:
            continue
        out.append((gpus, cpus, mem, sto))
    return out


def _pareto(needs: list[tuple[float, int, int]]) -> list[tuple[float, int, int]]:
    """_pareto drops needs that another need undercuts in every dimension."""
    needs = sorted(set(needs))
    out: list[tuple[float, int, int]] = []
    for n in needs:
        if not any(o[0] <= n[0] and o[1] <= n[1] and o[2] <= n[2] for o in out):
            out.append(n)
    return out


def _fits_any(needs: list[tuple[float, int, int]], cpu: float, mem: int, sto: int) -> bool:
    """_fits_any tells whether any (cpus, memory, storage) need fits the free amounts."""
    for cpus, m, s in needs:
        if cpus <= cpu + 1e-9 and m <= mem and s <= sto:
            return True
    return False
