"""Submit-time feasibility: refuse what no node of the stored inventory could ever host.

A tenant an admin confined to some clusters (issue 26) narrows the job's -M list first: a list
naming none of them is refused even before any inventory is known, and so is data required on a
cluster the tenant may not use (issue 26).
"""

from __future__ import annotations

from dataclasses import replace

from meta.model.kinds import JobKind, Topology
from meta.model.nodes import NodeState
from meta.model.sbatch_fields import placement_filters
from meta.model.spec import AnySpec, TrainingSpec
from meta.policy.data_locality import pin
from meta.policy.feasibility import never_feasible
from meta.policy.plan import PendingReason
from meta.policy.snapshot import PendingTask
from meta.policy.tenant_clusters import allowed_clusters, outside_tenant
from meta.store.db import Database
from meta.store.inventory import load_nodes, load_qos_names
from meta.store.models import Tenant


def spec_as_task(spec: AnySpec) -> PendingTask:
    """spec_as_task is the shape of one of the spec's tasks, for feasibility checks at submit."""
    return PendingTask(
        task_id="submit-check",
        job_id="submit-check",
        tenant=spec.tenant,
        kind=JobKind(spec.kind),
        priority_class=spec.effective_priority_class().value,
        submit_time=0.0,
        per_worker=spec.worker_resources(),
        workers=spec.workers_per_task(),
        runtime_estimate_s=spec.time_limit_s,
        topology=spec.topology if isinstance(spec, TrainingSpec) else Topology.NONE,
        partition=spec.partition,
        **placement_filters(spec.sbatch),
        data_cluster=spec.data.cluster if spec.data else "",
        data_required=bool(spec.data and spec.data.required),
    )


def unknown_names(spec: AnySpec, nodes: list[NodeState] | None, qos_names: set[str] | None) -> str | None:
    """unknown_names refuses a partition or QOS Slurm does not have, in sbatch's own words."""
    if spec.partition and nodes and spec.partition not in {p for node in nodes for p in node.partitions}:
        return f"partition: invalid partition specified: {spec.partition} (Invalid partition name specified)"
    if spec.qos and qos_names is not None and spec.qos not in qos_names:
        return f"qos: {spec.qos}: Invalid qos specification"
    return None


class InventoryFeasibility:
    """InventoryFeasibility rejects at submit what no node of the stored inventory could ever host."""

    def __init__(self, db: Database):
        self.db = db

    def __call__(self, spec: AnySpec) -> str | None:
        """__call__ returns why the spec can never run, or None when it can (or nothing is known)."""
        with self.db.session() as session:
            nodes = load_nodes(session)
            qos_names = load_qos_names(session)
            tenant = session.get(Tenant, spec.tenant)
            confined = frozenset(tenant.clusters or ()) if tenant is not None else frozenset()
        task = spec_as_task(spec)
        outside = outside_tenant(task, confined)
        if outside is not None:
            return reason_text(outside)
        # a required data cluster narrows the task further (the spec itself refused one outside its -M list)
        clusters, unpinnable = pin(task, allowed_clusters(task.clusters, confined))
        if unpinnable is not None:
            return reason_text(unpinnable)
        unknown = unknown_names(spec, nodes, qos_names)
        if unknown or not nodes:
            return unknown
        reason = never_feasible(replace(task, clusters=clusters), nodes)
        return reason_text(reason) if reason is not None else None


def reason_text(reason: PendingReason) -> str:
    """reason_text is a never-feasible reason as the one-line refusal a submit answers."""
    remedy = f" ({reason.remedy})" if reason.remedy else ""
    return f"{reason.code.value}: {reason.message}{remedy}"
