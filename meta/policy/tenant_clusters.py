"""Where a tenant may run (issue 26): an admin's list of clusters narrows each of its tasks' -M list.

A task may run on the clusters its job names (``-M``, empty: any) that its tenant may use (empty:
any). A job whose -M list names none of its tenant's clusters can never run: that is an
unresolvable reason here, and a refusal at submit (``meta/service/feasibility.py``). Pure: the
daemon and the submit check hand in the tenant's list.
"""

from __future__ import annotations

from dataclasses import replace

from meta.policy.plan import PendingReason, ReasonCode
from meta.policy.snapshot import PendingTask


def allowed_clusters(job: frozenset[str], tenant: frozenset[str]) -> frozenset[str]:
    """allowed_clusters is where a task may run: the job's -M list within the tenant's clusters (empty: any).

    Empty as well when the two do not meet; ``outside_tenant`` tells that case apart first.
    """
    if not tenant:
        return job
    if not job:
        return tenant
    return job & tenant


def outside_tenant(task: PendingTask, tenant: frozenset[str]) -> PendingReason | None:
    """outside_tenant is why a task whose -M list names none of its tenant's clusters never runs (None: it may)."""
    if not tenant or not task.clusters or task.clusters & tenant:
        return None
    allowed = ",".join(sorted(tenant))
    return PendingReason(
        ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE,
        f"tenant {task.tenant} may run only on the clusters {allowed}; the job's --clusters names "
        f"{','.join(sorted(task.clusters))}",
        f"submit with --clusters {allowed} or without it, or ask an admin to let the tenant run there",
    )


def confine(task: PendingTask, tenant: frozenset[str]) -> PendingTask:
    """confine is the task with its -M list narrowed to its tenant's clusters (the task itself when any will do)."""
    clusters = allowed_clusters(task.clusters, tenant)
    return task if clusters == task.clusters else replace(task, clusters=clusters)
