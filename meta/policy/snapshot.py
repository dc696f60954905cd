"""The scheduler's input: one consistent, immutable picture of the cluster and the queue.

The live daemon builds it from the store and Slurm inventory; the simulator builds it from a
trace. Both hand the same types to ``schedule()``. Times are seconds (float, epoch or
simulated clock, as long as one snapshot uses one clock).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from meta.model.kinds import JobKind, Topology
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector


@dataclass(frozen=True, slots=True)
class NodeShare:
    """NodeShare is the part of one node that one worker of a placement holds."""

    node: str
    resources: ResourceVector


@dataclass(frozen=True, slots=True)
class Reservation:
    """Reservation is a live attempt holding capacity (launching, unknown, running or stopping)."""

    attempt_id: str
    task_id: str
    job_id: str
    tenant: str
    priority_class: str
    shares: tuple[NodeShare, ...]
    start_time: float
    expected_end: float | None = None
    last_checkpoint_time: float | None = None
    restore_cost_s: float = 0.0
    preemptible: bool = False
    min_runtime_s: float = 0.0
    kind: JobKind = JobKind.TRAINING
    deadline: float | None = None
    stopping: bool = False  # already being preempted/cancelled: its capacity frees soon, never a victim again

    def gpus(self) -> int:
        """gpus is the number of GPUs the reservation holds across all nodes."""
        return sum(share.resources.gpus for share in self.shares)


@dataclass(frozen=True, slots=True)
class TenantState:
    """TenantState carries a tenant's weight, quotas per GPU type and decayed usage."""

    name: str
    weight: float = 1.0
    guaranteed: dict[str, int] = field(default_factory=dict)  # gpu_type -> GPUs, "*" = any type
    limit: dict[str, int] = field(default_factory=dict)  # gpu_type -> GPUs, absent = unlimited
    decayed_usage: float = 0.0  # cost-weighted GPU-seconds, decayed with the configured half-life
    clusters: frozenset[str] = frozenset()  # the Slurm clusters its tasks may run on (empty: any; issue 26)
    # limits of each cluster's own association where they differ by cluster (cluster -> key -> GPUs; issue 26)
    cluster_limits: Mapping[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PendingTask:
    """PendingTask is one schedulable unit waiting for capacity: a gang, a partition or an eval."""

    task_id: str
    job_id: str
    tenant: str
    kind: JobKind
    priority_class: str
    submit_time: float
    per_worker: ResourceVector
    workers: int = 1
    runtime_estimate_s: float = 3600.0
    deadline: float | None = None
    topology: Topology = Topology.NONE
    partition: str | None = None
    preemptible: bool = False
    checkpoint_interval_s: float | None = None
    restore_cost_s: float = 0.0
    avoid_nodes: frozenset[str] = frozenset()
    job_name: str = ""
    # sbatch's hard placement filters: --constraint (alternatives of required node features),
    # -w (only these nodes), -x (never these), --exclusive (whole idle nodes); -N: one worker per node
    constraint: tuple[frozenset[str], ...] = ()
    nodelist: frozenset[str] = frozenset()
    exclude: frozenset[str] = frozenset()
    exclusive: bool = False
    clusters: frozenset[str] = frozenset()  # -M: only nodes of these Slurm clusters (empty: any)
    one_per_node: bool = False
    # where its data lives (issue 26; policy/data_locality.py): the cluster ("" none) and whether
    # it is required there (a hard filter) or only preferred
    data_cluster: str = ""
    data_required: bool = False
    # a retry resumes from a checkpoint only the cluster that wrote it can read: runs only there ("" none)
    checkpoint_cluster: str = ""
    max_parallel: int | None = None  # the job's throttle: at most this many of its tasks at once

    def total(self) -> ResourceVector:
        """total is the whole gang's request."""
        return self.per_worker.scale(self.workers)


@dataclass(frozen=True, slots=True)
class PriorHold:
    """PriorHold is nodes an earlier cycle held for a waiting task's start: a promise this cycle keeps."""

    task_id: str
    nodes: tuple[str, ...]
    planned_start: float
    # held for the beneficiary of a preemption: the nodes its victims free are bound to it (scheduler.keep_promises)
    preempting: bool = False


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Snapshot is the immutable input of one scheduling cycle."""

    now: float
    nodes: tuple[NodeState, ...]
    reservations: tuple[Reservation, ...] = ()
    tenants: tuple[TenantState, ...] = ()
    pending: tuple[PendingTask, ...] = ()
    switch_parent: dict[str, str] = field(default_factory=dict)  # leaf -> spine, spine -> core ...
    inventory_version: int = 0
    # The previous cycle's holds (Plan.held): kept while their task waits for capacity (backfill.py).
    holds: tuple[PriorHold, ...] = ()


def tasks_named(pending: Iterable[PendingTask], task_ids: Collection[str]) -> dict[str, PendingTask]:
    """tasks_named indexes the waiting tasks among ``task_ids`` by id (none asked: the queue is not walked).

    A period places, holds or counts a few of 50,000 waiting tasks; indexing the whole queue for
    them cost a few milliseconds each time, several times a period (issue 24).
    """
    return {t.task_id: t for t in pending if t.task_id in task_ids} if task_ids else {}
