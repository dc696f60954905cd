"""Submit-time feasibility: refuse what no node of the stored inventory could ever host."""

from __future__ import annotations

from meta.model.kinds import JobKind, Topology
from meta.model.spec import AnySpec, TrainingSpec
from meta.policy.feasibility import never_feasible
from meta.policy.snapshot import PendingTask
from meta.store.db import Database
from meta.store.inventory import load_nodes


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
    )


class InventoryFeasibility:
    """InventoryFeasibility rejects at submit what no node of the stored inventory could ever host."""

    def __init__(self, db: Database):
        self.db = db

    def __call__(self, spec: AnySpec) -> str | None:
        """__call__ returns why the spec can never run, or None when it can (or nothing is known)."""
        with self.db.session() as session:
            nodes = load_nodes(session)
        if not nodes:
            return None
        reason = never_feasible(spec_as_task(spec), nodes)
        if reason is None:
            return None
        remedy = f" ({reason.remedy})" if reason.remedy else ""
        return f"{reason.code.value}: {reason.message}{remedy}"
