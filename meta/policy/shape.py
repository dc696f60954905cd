"""Task shapes: a pending task's request flattened into plain numbers for the inner loops."""

from __future__ import annotations

from collections.abc import Collection
from typing import NamedTuple

from meta.model.clusters import cluster_of
from meta.model.kinds import Topology
from meta.policy.memo_bound import only_keys, outgrown
from meta.policy.snapshot import PendingTask


class Shape(NamedTuple):
    """Shape is what one task asks for per worker, how many workers, and where they may go.

    A named tuple, so that hashing and comparing shapes (the cycle's cache keys) runs in C.
    """

    gpu_type: str | None
    gpus: int
    cpus: float
    mem: int
    sto: int
    network: str | None
    partition: str | None
    workers: int
    topology: Topology
    avoid: frozenset[str]
    # sbatch's hard placement filters (--constraint, -w, -x, --exclusive) and -N's one worker per node
    features: tuple[frozenset[str], ...] = ()
    only: frozenset[str] = frozenset()
    barred: frozenset[str] = frozenset()
    exclusive: bool = False
    per_node: int = 0  # at most this many workers on one node (0: no limit)
    clusters: frozenset[str] = frozenset()  # -M: only nodes of these clusters (empty: any)

    @property
    def static_key(self) -> tuple:
        """static_key identifies the per-worker request that node-class filters depend on."""
        return (self.gpu_type, self.gpus, self.cpus, self.mem, self.sto, self.network, self.partition, self.features)

    @property
    def total_gpus(self) -> int:
        """total_gpus is the whole gang's GPU count."""
        return self.gpus * self.workers

    def bars(self, node: str) -> bool:
        """bars tells whether a hard node filter (-w, -x, -M) keeps the task off ``node``."""
        return (node in self.barred or (bool(self.only) and node not in self.only)
                or (bool(self.clusters) and cluster_of(node) not in self.clusters))

    def slots(self, gpu: int, cpu: float, mem: int, sto: int, cap: int) -> int:
        """slots is how many workers fit into the given free amounts, at most ``cap`` (and ``per_node``)."""
        n = min(cap, self.per_node) if self.per_node else cap
        if self.gpus:
            n = min(n, gpu // self.gpus)
        if self.cpus:
            # A tiny epsilon keeps 0.1 * 3 from failing to fit into 0.3 free cores.
            n = min(n, int((cpu + 1e-9) // self.cpus))
        if self.mem:
            n = min(n, mem // self.mem)
        if self.sto:
            n = min(n, sto // self.sto)
        return n if n > 0 else 0

    def describe_worker(self) -> str:
        """describe_worker renders one worker's request for messages."""
        parts = []
        if self.gpus:
            parts.append(f"{self.gpus} {self.gpu_type or 'GPU'}{'' if self.gpu_type is None else ' GPU'}"
                         f"{'s' if self.gpus > 1 else ''}")
        if self.cpus:
            parts.append(f"{self.cpus:g} cpus")
        if self.mem:
            parts.append(f"{self.mem // 1024 if self.mem >= 1024 else self.mem}"
                         f"{'G' if self.mem >= 1024 else 'M'} memory")
        return ", ".join(parts) or "no resources"


def shape_of(task: PendingTask) -> Shape:
    """shape_of flattens a PendingTask's per-worker request into a Shape."""
    r = task.per_worker
    return Shape(
        gpu_type=r.gpu_type if r.gpus else None,
        gpus=r.gpus,
        cpus=float(r.cpus),
        mem=r.memory_mib,
        sto=r.storage_gib,
        network=r.network,
        partition=task.partition,
        workers=max(1, task.workers),
        topology=task.topology,
        avoid=task.avoid_nodes,
        features=task.constraint,
        only=task.nodelist,
        barred=task.exclude,
        exclusive=task.exclusive,
        per_node=1 if task.one_per_node or task.exclusive else 0,
        clusters=task.clusters,
    )


class ShapeMemo:
    """ShapeMemo keeps each waiting task's shape from pass to pass while the task is the very same object.

    The daemon's view hands the policy the same frozen PendingTask objects period after period
    (``meta/cycle/snapshot/pending_view.py``); flattening 50,000 of them again each pass was a
    fifth of a steady pass (issue 24). A task that is not the object the shape was made from (a
    new view, another process) gets a fresh one, so a kept shape is always its task's shape_of.
    """

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        self._kept: dict[str, tuple[PendingTask, Shape]] = {}

    def shape(self, task: PendingTask) -> Shape:
        """shape is ``shape_of(task)``, made once per task object."""
        entry = self._kept.get(task.task_id)
        if entry is not None and entry[0] is task:
            return entry[1]
        shape = shape_of(task)
        self._kept[task.task_id] = (task, shape)
        return shape

    def keep_only(self, pending: Collection[PendingTask]) -> None:
        """keep_only drops the shapes of tasks that no longer wait, once the memo holds twice as many as wait."""
        if outgrown(len(self._kept), len(pending)):
            self._kept = only_keys(self._kept, {task.task_id for task in pending})
