"""What the web pages show, read from the store in a few grouped queries per page.

Visibility follows the API's rule: job-level details (ids, names, users) only for the caller's
tenants (``visible`` None: an admin, every tenant). Tenant names and per-tenant totals are shown to
every signed-in user, as ``sshare`` shows every account's share: "why am I waiting" needs them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from meta.model.durations import utcnow
from meta.model.states import LIVE_ATTEMPT_STATES, TaskState
from meta.policy.cluster_figures import ClusterFigures, cluster_figures
from meta.store.cluster_drains import Drain, drains
from meta.store.inventory import load_nodes
from meta.store.models import Attempt, CycleRecord, InventoryRecord, Job, Task, Tenant, TenantUsage

Visible = frozenset[str] | None
LIVE = sorted(state.value for state in LIVE_ATTEMPT_STATES)
MAX_HISTORY_ROWS = 50_000  # attempts or cycles read for one sparkline set: a bound on the page's cost
WAITING = (TaskState.PENDING.value,)
RUNNING = (TaskState.SCHEDULED.value, TaskState.RUNNING.value)


def sees(visible: Visible, tenant: str) -> bool:
    """sees tells whether the caller may see ``tenant``'s jobs."""
    return visible is None or tenant in visible


@dataclass(frozen=True)
class Holding:
    """Holding is GPUs one live attempt holds on one node; ``job`` and ``user`` are None when not the caller's to see."""

    tenant: str
    gpus: int
    job: str | None
    user: str | None


@dataclass
class NodeView:
    """NodeView is one node: its GPUs, switch, health and who holds what on it."""

    name: str
    gpu_type: str
    gpus: int
    switch: str
    spine: str
    state: str  # up, drained, down
    holdings: list[Holding] = field(default_factory=list)

    @property
    def held(self) -> int:
        """held is how many of the node's GPUs live attempts hold."""
        return sum(h.gpus for h in self.holdings)

    @property
    def free(self) -> int:
        """free is the node's GPUs nobody holds (0 on a drained or down node)."""
        return max(0, self.gpus - self.held) if self.state == "up" else 0


@dataclass(frozen=True)
class ClusterMap:
    """ClusterMap is every node grouped by GPU type then switch, with the last cycle's fragmentation report."""

    groups: dict[str, dict[str, list[NodeView]]]
    fragmentation: dict[str, Any]
    inventory_at: datetime | None
    cycle_at: datetime | None


def cluster_map(session: Session, visible: Visible) -> ClusterMap:
    """cluster_map is the stored inventory with each node's holdings from the live attempts."""
    record = session.get(InventoryRecord, 1)
    parents = dict(record.switch_parent or {}) if record else {}
    nodes = {n.name: NodeView(n.name, n.capacity.gpu_type or "-", n.capacity.gpus, n.switch or "-",
                              parents.get(n.switch or "", "-"),
                              "down" if not n.healthy else "drained" if n.drained else "up")
             for n in load_nodes(session) or []}  # fmt: skip
    rows = session.execute(
        select(Attempt.placement, Job.tenant, Job.short_id, Job.submitted_by)
        .join(Job, Job.id == Attempt.job_id)
        .where(Attempt.state.in_(LIVE))
    )
    for placement, tenant, short_id, user in rows:
        mine = sees(visible, tenant)
        for share in placement or []:
            node = nodes.get(share.get("node"))
            if node is not None and int(share.get("gpus") or 0):
                node.holdings.append(Holding(tenant, int(share["gpus"]), short_id if mine else None, user if mine else None))
    groups: dict[str, dict[str, list[NodeView]]] = defaultdict(lambda: defaultdict(list))
    for node in sorted(nodes.values(), key=lambda n: (n.gpu_type, n.switch, n.name)):
        groups[node.gpu_type][node.switch].append(node)
    cycle = session.scalars(select(CycleRecord).order_by(CycleRecord.id.desc()).limit(1)).first()
    return ClusterMap({t: dict(s) for t, s in groups.items()}, dict(cycle.fragmentation or {}) if cycle else {},
                      record.at if record else None, cycle.at if cycle else None)  # fmt: skip


@dataclass(frozen=True)
class ClusterTable:
    """ClusterTable is one row per Slurm cluster (none on a single-cluster site), each drain, and when the inventory was read."""

    rows: list[ClusterFigures]
    drains: dict[str, Drain]
    inventory_at: datetime | None


def cluster_table(session: Session) -> ClusterTable:
    """cluster_table is each cluster's figures from the stored inventory, the live attempts and the drains.

    Nodes are in Slurm's states (an admin's drain leaves them as they are; the row says drained),
    free GPUs are the schedulable nodes' GPUs no live attempt holds. Whether a cluster answers is
    not in the store: the daemon knows it (``metasched_slurm_cluster_up``), the page says so.
    """
    record = session.get(InventoryRecord, 1)
    held: dict[str, int] = defaultdict(int)
    attempts: list[tuple[str, ...]] = []
    for (placement,) in session.execute(select(Attempt.placement).where(Attempt.state.in_(LIVE))):
        shares = [share for share in placement or [] if share.get("node")]
        attempts.append(tuple(str(share["node"]) for share in shares))
        for share in shares:
            held[str(share["node"])] += int(share.get("gpus") or 0)
    drained = {d.cluster: d for d in drains(session)}
    nodes = load_nodes(session) or []
    rows = cluster_figures(nodes, held, attempts, drained)
    known = {row.cluster for row in rows}
    # a drain of a name no node carries is shown only where the site has clusters at all
    extra = [name for name in drained if name not in known] if rows else []
    if extra:
        rows = cluster_figures(nodes, held, attempts, drained, extra)
    return ClusterTable(rows, drained, record.at if record else None)


@dataclass(frozen=True)
class TenantRow:
    """TenantRow is one tenant's queue and share: waiting and running tasks, GPUs held, weight and usage."""

    name: str
    weight: float
    fair_share: float  # its weight over all weights
    usage_gpu_s: float  # decayed
    usage_share: float  # its usage over all usage
    waiting: int
    running: int
    held_gpus: int
    guaranteed: dict[str, int]
    limits: dict[str, int]
    mine: bool

    @property
    def ratio(self) -> float | None:
        """ratio is usage share over fair share (1: at its fair share), None without weight."""
        return self.usage_share / self.fair_share if self.fair_share > 0 else None


def tenant_rows(session: Session, visible: Visible) -> list[TenantRow]:
    """tenant_rows is every tenant's row (grouped counts: tasks by state, GPUs held)."""
    tenants = list(session.scalars(select(Tenant).order_by(Tenant.name)))
    usage = {u.tenant: u.decayed_gpu_seconds for u in session.scalars(select(TenantUsage))}
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    for tenant, state, count in session.execute(
        select(Job.tenant, Task.state, func.count()).join(Job, Job.id == Task.job_id)
        .where(Task.state.in_(WAITING + RUNNING)).group_by(Job.tenant, Task.state)
    ):  # fmt: skip
        counts[tenant][state] = count
    held = held_gpus(session)
    total_weight = sum(max(t.weight, 0.0) for t in tenants) or 1.0
    total_usage = sum(usage.values()) or 1.0
    return [
        TenantRow(t.name, t.weight, max(t.weight, 0.0) / total_weight, usage.get(t.name, 0.0),
                  usage.get(t.name, 0.0) / total_usage, sum(counts[t.name].get(s, 0) for s in WAITING),
                  sum(counts[t.name].get(s, 0) for s in RUNNING), held.get(t.name, 0), dict(t.guaranteed or {}),
                  dict(t.limits or {}), sees(visible, t.name) and visible is not None)
        for t in tenants
    ]  # fmt: skip


def _gpus(placement: Iterable[dict[str, Any]] | None) -> int:
    return sum(int(share.get("gpus") or 0) for share in placement or [])


def held_gpus(session: Session) -> dict[str, int]:
    """held_gpus is how many GPUs each tenant's live attempts hold."""
    held: dict[str, int] = defaultdict(int)
    for tenant, placement in session.execute(
        select(Job.tenant, Attempt.placement).join(Job, Job.id == Attempt.job_id).where(Attempt.state.in_(LIVE))
    ):
        held[tenant] += _gpus(placement)
    return dict(held)


@dataclass(frozen=True)
class History:
    """History is GPUs held per tenant (from attempts' start and end times) and pending tasks (from cycles) over a window."""

    start: datetime
    end: datetime
    gpus: dict[str, list[float]]  # tenant -> mean GPUs held in each bucket
    pending: list[float]  # mean pending tasks per bucket, every tenant (the cycle records)


def history(session: Session, hours: float = 24.0, buckets: int = 48) -> History:
    """history buckets the last ``hours`` of attempts (GPU-seconds held per tenant) and cycle records."""
    end = utcnow()
    start = end - timedelta(hours=hours)
    width = (end - start).total_seconds() / buckets
    gpus: dict[str, list[float]] = defaultdict(lambda: [0.0] * buckets)
    attempts = session.execute(
        select(Job.tenant, Attempt.placement, Attempt.started_at, Attempt.ended_at)
        .join(Job, Job.id == Attempt.job_id)
        .where(Attempt.started_at.is_not(None), (Attempt.ended_at.is_(None)) | (Attempt.ended_at >= start))
        .order_by(Attempt.started_at.desc()).limit(MAX_HISTORY_ROWS)
    )  # fmt: skip
    for tenant, placement, began, ended in attempts:
        count = _gpus(placement)
        lo = (max(began, start) - start).total_seconds()
        hi = ((ended or end) - start).total_seconds()
        for b in range(max(0, int(lo // width)), min(buckets, int(hi // width) + 1)):
            overlap = min(hi, (b + 1) * width) - max(lo, b * width)
            if overlap > 0:
                gpus[tenant][b] += count * overlap / width
    sums, seen = [0.0] * buckets, [0] * buckets
    for at, pending in session.execute(
        select(CycleRecord.at, CycleRecord.pending).where(CycleRecord.at >= start)
        .order_by(CycleRecord.id.desc()).limit(MAX_HISTORY_ROWS)
    ):  # fmt: skip
        b = min(buckets - 1, int((at - start).total_seconds() // width))
        sums[b] += pending
        seen[b] += 1
    return History(start, end, dict(gpus), [s / n if n else 0.0 for s, n in zip(sums, seen, strict=True)])


def waiting_ahead(session: Session, tenant: str, submitted_at: datetime) -> int:
    """waiting_ahead is how many of ``tenant``'s jobs with a waiting task were submitted before this one."""
    return int(session.scalar(
        select(func.count(func.distinct(Job.id))).join(Task, Task.job_id == Job.id)
        .where(Job.tenant == tenant, Job.submitted_at < submitted_at, Task.state.in_(WAITING))
    ) or 0)  # fmt: skip


def log_path(job: Job, attempt: dict[str, Any], log_dir: str | None, daemon_uid: int) -> str:
    """log_path is where an attempt's output goes: ``<submit dir>/slurm-<id>.out`` for a job run as its user, else the daemon's log folder."""
    if job.owner_uid is not None and job.owner_uid != daemon_uid and job.submit_dir:
        slurm_id = attempt.get("slurm_job_id") or "<slurm id>"
        return f"{job.submit_dir.rstrip('/')}/slurm-{slurm_id}.out"
    folder = (log_dir or "<serve --log-dir>").rstrip("/")
    return f"{folder}/{job.short_id}/{attempt['id']}.out"


def sbatch_log_patterns(status: dict[str, Any]) -> str | None:
    """sbatch_log_patterns is an msbatch job's ``-o`` pattern, made absolute from its --chdir or submit folder (None: none given).

    Only ``%j`` is filled in (per attempt, by the caller); ``metasched status`` expands every pattern.
    """
    sbatch = (status.get("spec") or {}).get("sbatch") or {}
    pattern = sbatch.get("output")
    if not pattern:
        return None
    base = sbatch.get("chdir") or status.get("submit_dir") or ""
    return pattern if pattern.startswith("/") or not base else f"{base.rstrip('/')}/{pattern}"
