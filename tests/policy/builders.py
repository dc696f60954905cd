"""Builders for policy tests: short constructors for nodes, tasks, reservations and snapshots."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from meta.model.kinds import JobKind, Topology
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.policy.config import SchedulerConfig
from meta.policy.plan import Plan, ReasonCode
from meta.policy.scheduler import schedule
from meta.policy.snapshot import NodeShare, PendingTask, Reservation, Snapshot, TenantState

NOW = 100_000.0


def rv(gpus: int = 0, gpu_type: str | None = "h100", cpus: float = 0, mem: int = 0, sto: int = 0,
       network: str | None = None) -> ResourceVector:
    """rv builds a ResourceVector with MiB memory and GiB storage."""
    return ResourceVector(cpus=cpus, memory_mib=mem, gpus=gpus, gpu_type=gpu_type if gpus else None,
                          storage_gib=sto, network=network)


def node(name: str, gpus: int = 8, gpu_type: str = "h100", switch: str = "leaf0", cpus: float = 64,
         mem: int = 512 * 1024, sto: int = 1000, network: str | None = "ib", partitions: tuple[str, ...] = ("gpu",),
         healthy: bool = True, drained: bool = False) -> NodeState:
    """node builds a GPU node (8 h100 by default) on leaf0."""
    return NodeState(name, rv(gpus, gpu_type, cpus, mem, sto, network), partitions, switch, healthy, drained)


def task(tid: str, tenant: str = "a", gpus: int = 1, gpu_type: str | None = "h100", workers: int = 1,
         kind: JobKind = JobKind.TRAINING, cls: str | None = None, submit: float = NOW - 100,
         runtime: float = 3600, cpus: float = 0, mem: int = 0, **kw) -> PendingTask:
    """task builds a pending task; the job id is the task id with a 'j' prefix."""
    return PendingTask(
        task_id=tid, job_id=f"j{tid}", tenant=tenant, kind=kind, priority_class=cls or kind.value,
        submit_time=submit, per_worker=rv(gpus, gpu_type, cpus, mem), workers=workers,
        runtime_estimate_s=runtime, **kw,
    )


def running(aid: str, node_name: str, gpus: int, tenant: str = "x", gpu_type: str = "h100",
            cls: str = "training", kind: JobKind = JobKind.TRAINING, start: float = NOW - 3600,
            end: float | None = None, preemptible: bool = False, checkpoint: float | None = None,
            restore: float = 0.0, min_runtime: float = 0.0, extra_nodes: Iterable[str] = (),
            deadline: float | None = None, stopping: bool = False) -> Reservation:
    """running builds a live reservation of ``gpus`` on a node (and as much on each extra node)."""
    shares = tuple(NodeShare(n, rv(gpus, gpu_type)) for n in (node_name, *extra_nodes))
    return Reservation(aid, f"t{aid}", f"j{aid}", tenant, cls, shares, start, end, checkpoint, restore,
                       preemptible, min_runtime, kind, deadline, stopping)


def snap(nodes: Iterable[NodeState], pending: Iterable[PendingTask], reservations: Iterable[Reservation] = (),
         tenants: Iterable[TenantState] = (), parents: dict[str, str] | None = None, now: float = NOW) -> Snapshot:
    """snap assembles a Snapshot at NOW."""
    return Snapshot(now, tuple(nodes), tuple(reservations), tuple(tenants), tuple(pending), parents or {})


@dataclass
class Case:
    """Case is one table-driven scheduling scenario with its expectations."""

    name: str
    snapshot: Snapshot
    want_placed: set[str] = field(default_factory=set)
    want_waiting: dict[str, ReasonCode] = field(default_factory=dict)
    want_preempted: set[str] = field(default_factory=set)
    want_nodes: dict[str, set[str]] = field(default_factory=dict)  # task -> exact nodes used
    config: SchedulerConfig | None = None


def run_case(case: Case) -> Plan:
    """run_case schedules the snapshot and checks every expectation of the case."""
    plan = schedule(case.snapshot, case.config)
    placed = {p.task_id for p in plan.placements}
    assert placed == case.want_placed, f"{case.name}: placed {placed}, reasons {plan.reasons}"
    for tid, code in case.want_waiting.items():
        assert tid in plan.reasons, f"{case.name}: {tid} has no reason"
        assert plan.reasons[tid].code == code, f"{case.name}: {tid} got {plan.reasons[tid]}"
    preempted = {p.attempt_id for p in plan.preemptions}
    assert preempted == case.want_preempted, f"{case.name}: preempted {preempted}"
    for tid, nodes in case.want_nodes.items():
        placement = next(p for p in plan.placements if p.task_id == tid)
        assert {s.node for s in placement.shares} == nodes, f"{case.name}: {tid} on {placement.shares}"
    return plan


__all__ = ["Case", "JobKind", "NOW", "TenantState", "Topology", "node", "run_case", "running", "snap", "task", "rv"]


def turns(**overrides: object) -> SchedulerConfig:
    """turns is a config with the "turns" tenant order and holds for big tasks only (the order before issue 21)."""
    return SchedulerConfig(**({"tenant_order": "turns", "hold_min_gpus": 8} | overrides))  # type: ignore[arg-type]
