"""The scheduler's output: placements, preemptions, held reservations and a reason per waiter."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from meta.policy.snapshot import NodeShare, PriorHold

if TYPE_CHECKING:
    from meta.policy.decisions import CycleContext, Decision


class ReasonCode(StrEnum):
    """ReasonCode is the typed cause of a task not being placed in this cycle."""

    UNSCHEDULABLE_AND_UNRESOLVABLE = "UnschedulableAndUnresolvable"  # no node could ever host it
    NO_FEASIBLE_NODE = "NoFeasibleNode"  # feasible nodes exist but none is free now
    WAITING_FOR_GANG_CAPACITY = "WaitingForGangCapacity"
    WAITING_FOR_QUOTA = "WaitingForQuota"  # tenant at its limit for the GPU type
    BLOCKED_BY_RESERVATION = "BlockedByReservation"  # capacity held for a head-of-line gang
    LOWER_FAIR_SHARE = "LowerFairShare"  # capacity went to tenants ahead in fair-share order
    LOWER_PRIORITY = "LowerPriority"
    TOPOLOGY_UNSATISFIED = "TopologyUnsatisfied"
    # this task is first in line with nodes held for it: a gang, or (hold_min_gpus 0) a task of any size
    HELD_FOR_GANG = "HeldForGang"
    PREEMPTING = "Preempting"  # victims are being evicted for this task
    NODE_UNHEALTHY = "NodeUnhealthy"
    JOB_ARRAY_TASK_LIMIT = "JobArrayTaskLimit"  # the job's throttle (--array ...%N, max_parallel) is reached
    # gates before the policy (meta/policy/dependencies.py): Slurm's own reason names
    DEPENDENCY = "Dependency"
    DEPENDENCY_NEVER_SATISFIED = "DependencyNeverSatisfied"
    BEGIN_TIME = "BeginTime"
    JOB_HELD_USER = "JobHeldUser"
    JOB_HELD_ADMIN = "JobHeldAdmin"


@dataclass(frozen=True, slots=True)
class PendingReason:
    """PendingReason explains why a task waits and what would make it run."""

    code: ReasonCode
    message: str
    remedy: str = ""
    blocking_job: str | None = None
    blocking_tenant: str | None = None


@dataclass(frozen=True, slots=True)
class Placement:
    """Placement binds a pending task to one NodeShare per worker."""

    task_id: str
    job_id: str
    shares: tuple[NodeShare, ...]
    backfilled: bool = False
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Preemption:
    """Preemption evicts one whole reservation (a whole gang) for a named beneficiary."""

    attempt_id: str
    task_id: str
    reason: str
    lost_gpu_seconds: float
    for_task: str | None = None


@dataclass(frozen=True, slots=True)
class HeldReservation:
    """HeldReservation keeps nodes for a head-of-line gang until its planned start."""

    task_id: str
    job_id: str
    nodes: tuple[str, ...]
    planned_start: float
    preempting: bool = False  # the nodes a preemption frees for this task: bound to it until its turn next cycle


def carried(held: Iterable[HeldReservation]) -> tuple[PriorHold, ...]:
    """carried turns a plan's holds into the next snapshot's ``holds`` (the daemon and the simulator alike)."""
    return tuple(PriorHold(h.task_id, tuple(h.nodes), h.planned_start, h.preempting) for h in held)


@dataclass(frozen=True, slots=True)
class FragmentationReport:
    """FragmentationReport separates stranded GPUs from a true shortage."""

    free_gpus: int = 0
    stranded_gpus: int = 0  # free GPUs that no pending shape can use
    largest_placeable_gang_gpus: int = 0
    free_by_type: dict[str, int] = field(default_factory=dict)
    placeable_by_type: dict[str, int] = field(default_factory=dict)  # largest gang placeable now, per GPU type


@dataclass(slots=True)
class Plan:
    """Plan is the decision of one cycle; the apply step commits it under the leader's fence."""

    placements: list[Placement] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    held: list[HeldReservation] = field(default_factory=list)
    reasons: dict[str, PendingReason] = field(default_factory=dict)
    fragmentation: FragmentationReport = field(default_factory=FragmentationReport)
    inventory_version: int = 0
    decisions: list[Decision] = field(default_factory=list)  # on record, only when schedule(record=k)
    context: CycleContext | None = None  # shares and ordering knobs at cycle start, with the decisions
