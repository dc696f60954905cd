"""Explain: one typed PendingReason per waiting task, in words a user understands, with a remedy."""

from __future__ import annotations

import time

from meta.policy.plan import PendingReason, ReasonCode
from meta.policy.shape import Shape
from meta.policy.snapshot import PendingTask


def when(t: float, now: float) -> str:
    """when renders a time as a wall-clock hour for epoch clocks, or as 'in N min' for simulated ones."""
    if t > 1e9:
        return time.strftime("%H:%M UTC", time.gmtime(t))
    minutes = max(0, round((t - now) / 60))
    return f"in {minutes} min" if minutes < 120 else f"in {minutes / 60:.1f} h"


def job_label(task: PendingTask) -> str:
    """job_label is the id users see for a task's job (its short id), never an internal UUID."""
    return task.job_name or task.job_id


def _gpus(shape: Shape, n: int) -> str:
    return f"{n} {shape.gpu_type + ' ' if shape.gpu_type else ''}GPU{'s' if n != 1 else ''}"


def no_capacity(shape: Shape, best_node: str | None, best_free: int, fit_workers: int,
                free_total: int = 0) -> PendingReason:
    """no_capacity explains a task that fits the cluster but not its free capacity right now.

    ``free_total`` is the free GPUs on the task's feasible nodes: when they would be enough but
    no node (set) has them where a worker needs them, the message says the capacity is fragmented.
    """
    if shape.workers == 1:
        if shape.gpus and best_free < shape.gpus <= free_total:
            return _fragmented(shape, best_node, best_free, free_total)
        if shape.gpus:
            where = f"; {best_free} are free on {best_node}" if best_node else "; none are free"
            message = f"no node with {_gpus(shape, shape.gpus)} free{where}"
        else:
            message = f"no node has {shape.describe_worker()} free"
        remedy = f"would start when {_gpus(shape, shape.gpus - best_free) if shape.gpus else 'capacity'} free up"
        return PendingReason(ReasonCode.NO_FEASIBLE_NODE, message, remedy)
    fitting = f"only {fit_workers} worker{'s' if fit_workers != 1 else ''} fit now" if fit_workers else "none fit now"
    message = (f"gang of {shape.workers} workers × {shape.describe_worker()} needs "
               f"{_gpus(shape, shape.total_gpus)} at once; {fitting}")
    if shape.gpus and free_total >= shape.total_gpus:
        # Enough GPUs are free, just not whole workers' worth on enough nodes: freeing GPUs
        # anywhere does not help, nodes with a worker's share free do.
        missing = shape.workers - fit_workers
        message += f" ({free_total} are free in all, fragmented across nodes)"
        nodes = (f"{missing}{' more' if fit_workers else ''} node{'s' if missing != 1 else ''} "
                 f"{'have' if missing != 1 else 'has'} {_gpus(shape, shape.gpus)} free")
        remedy = f"reduce workers to {fit_workers}, or wait until {nodes}" if fit_workers else f"would start when {nodes}"
        return PendingReason(ReasonCode.WAITING_FOR_GANG_CAPACITY, message, remedy)
    remedy = (f"reduce workers to {fit_workers} or wait for {_gpus(shape, (shape.workers - fit_workers) * shape.gpus)} "
              "to free up" if fit_workers else f"would start when {_gpus(shape, shape.total_gpus)} free up")
    return PendingReason(ReasonCode.WAITING_FOR_GANG_CAPACITY, message, remedy)


def _fragmented(shape: Shape, best_node: str | None, best_free: int, free_total: int) -> PendingReason:
    """_fragmented explains a one-worker task whose GPUs are free in total but not on one node."""
    most = f"at most {best_free} on {best_node}" if best_node else "none on a node it may use"
    return PendingReason(
        ReasonCode.NO_FEASIBLE_NODE,
        f"no node with {_gpus(shape, shape.gpus)} free: {free_total} are free in all, fragmented ({most})",
        f"would start when one node has {_gpus(shape, shape.gpus)} free"
        + (f" ({shape.gpus - best_free} more on {best_node})" if best_node else ""),
    )


def topology_unsatisfied(shape: Shape) -> PendingReason:
    """topology_unsatisfied explains a gang that fits the cluster but not under one switch now."""
    return PendingReason(
        ReasonCode.TOPOLOGY_UNSATISFIED,
        f"{shape.workers} workers × {shape.describe_worker()} fit now only across several switches",
        "use prefer-same-switch, or wait for one switch to free up",
    )


def blocked(shape: Shape, job: str, label: str | None = None) -> PendingReason:
    """blocked explains a task that would fit on nodes held for a head-of-line job (named by ``label``)."""
    return PendingReason(
        ReasonCode.BLOCKED_BY_RESERVATION,
        f"the free capacity is held for job {label or job}, which is first in line, and this task would delay it",
        "a shorter runtime estimate would let it backfill before the held start",
        blocking_job=job,
    )


def lower_fair_share(other: str, their: float, yours: float, tenant: str) -> PendingReason:
    """lower_fair_share explains that the capacity went to a tenant ahead in fair share."""
    return PendingReason(
        ReasonCode.LOWER_FAIR_SHARE,
        f"{other} is ahead in fair share (share {their:.2f} vs yours {yours:.2f}) and took the free capacity",
        f"would start when capacity frees up; {tenant}'s share drops as its usage decays",
        blocking_tenant=other,
    )


def lower_priority(other_class: str, other: str, job: str | None) -> PendingReason:
    """lower_priority explains that higher-priority work took the free capacity."""
    return PendingReason(
        ReasonCode.LOWER_PRIORITY,
        f"higher-priority {other_class} work of {other} took the free capacity",
        "would start when capacity frees up, or submit with a higher priority class",
        blocking_job=job,
        blocking_tenant=other,
    )


def quota(tenant: str, key: str, used: int, limit: int, need: int, room_now: bool) -> PendingReason:
    """quota explains a task its tenant's limit stops: it would fit the cluster once capacity allows.

    The scheduler says this only when the limit is the blocker (with the other tenants' work gone
    the task would fit beside its tenant's own); ``room_now`` tells whether it would fit right now.
    """
    kind = "GPUs" if key == "*" else f"{key} GPUs"
    over = f"{used + need - limit} {kind.removesuffix('s') if used + need - limit == 1 else kind}"
    raise_to = f"raising {tenant}'s {kind} limit to {used + need}"
    if room_now:
        remedy = f"{raise_to} would start it now; otherwise it starts when {tenant}'s running jobs free {over}"
    else:
        remedy = (f"would start when {tenant}'s running jobs free {over} and the cluster has room; "
                  f"{raise_to} would let it start as soon as the cluster has room")
    return PendingReason(
        ReasonCode.WAITING_FOR_QUOTA,
        f"{tenant} uses {used} of its {limit} {kind} limit; this task needs {need} more",
        remedy,
    )


def held(shape: Shape, start: float, now: float, nodes: list[str]) -> PendingReason:
    """held explains the head-of-line task whose nodes are reserved."""
    shown = ", ".join(nodes[:4]) + (f" and {len(nodes) - 4} more" if len(nodes) > 4 else "")
    return PendingReason(
        ReasonCode.HELD_FOR_GANG,
        f"first in line: {shown} {'is' if len(nodes) == 1 else 'are'} held for it",
        f"would start when {_gpus(shape, shape.total_gpus)} free up, est. {when(start, now)}",
    )


def kept_from_gangs(reason: PendingReason, nodes: list[str]) -> PendingReason:
    """kept_from_gangs extends a gang's reason when its start is unknown (running work has no end)."""
    return PendingReason(
        reason.code,
        f"{reason.message}; the running work it waits for has no expected end, so {len(nodes)} nodes "
        "are kept from other gangs for it",
        f"{reason.remedy} (no start estimate while running jobs lack runtime estimates)",
        blocking_job=reason.blocking_job,
        blocking_tenant=reason.blocking_tenant,
    )


def preempting(victims: int, lost: float, stopping: int = 0) -> PendingReason:
    """preempting explains a task for which victims are being evicted (or are already stopping)."""
    parts = []
    if victims:
        parts.append(f"preempting {victims} job{'s' if victims != 1 else ''} "
                     f"({lost / 3600:.1f} GPU-hours of lost work)")
    if stopping:
        parts.append(f"waiting for {stopping} preempted job{'s' if stopping != 1 else ''} to stop")
    return PendingReason(
        ReasonCode.PREEMPTING,
        " and ".join(parts) + " to make room; the freed nodes are held for it",
        "would start next cycle, once they have stopped",
    )
