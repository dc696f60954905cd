"""Data locality and checkpoint stickiness (issue 26): the cluster a task's data or checkpoint is on.

A job may say where its data lives (``data: {cluster, required}``). Required, it is a hard filter
like ``-M``: the task's cluster set narrows to it. Preferred, it only breaks ties: the policy tries
the data cluster first and places there when it has room this cycle, and otherwise places the task
elsewhere rather than let it wait. A retry that resumes from a checkpoint written on cluster X runs
only on X (unless the job's checkpoint dir is shared by every cluster: the snapshot then leaves
``checkpoint_cluster`` empty); when X is drained or dark the retry waits and says so. Pure: the
daemon, the submit check and the simulator hand in the task (the simulator's tasks name none).
"""

from __future__ import annotations

from meta.policy.plan import PendingReason, ReasonCode
from meta.policy.snapshot import PendingTask


def pinned(task: PendingTask) -> dict[str, str]:
    """pinned is each cluster a task must run on -> why, in the words a reason uses ({}: none)."""
    out: dict[str, str] = {}
    if task.data_cluster and task.data_required:
        out[task.data_cluster] = f"its data must be read on {task.data_cluster} (data.required)"
    if task.checkpoint_cluster:
        why = f"it resumes from a checkpoint written on {task.checkpoint_cluster}, readable only there"
        out[task.checkpoint_cluster] = f"{out[task.checkpoint_cluster]} and {why}" if task.checkpoint_cluster in out else why
    return out


def pin(task: PendingTask, allowed: frozenset[str]) -> tuple[frozenset[str], PendingReason | None]:
    """pin narrows ``allowed`` (the -M list within the tenant's clusters; empty: any) to where the task must run.

    Returns the narrowed set, or an unresolvable reason when the pins leave no cluster: data
    required on one cluster and a checkpoint on another, or a pin outside the allowed clusters.
    """
    pins = pinned(task)
    if not pins:
        return allowed, None
    if len(pins) > 1:
        return allowed, PendingReason(
            ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE,
            f"no single cluster: {'; '.join(pins[c] for c in sorted(pins))}",
            "retry it by hand from the start (metasched retry), or submit it again without data.required",
        )
    (cluster, why), = pins.items()
    if allowed and cluster not in allowed:
        return allowed, PendingReason(
            ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE,
            f"{why}, but it may run only on the clusters {','.join(sorted(allowed))} "
            "(the job's --clusters and its tenant's clusters)",
            f"submit it with {cluster} in --clusters, or ask an admin to let the tenant run on {cluster}",
        )
    return frozenset({cluster}), None


def preferred(task: PendingTask, allowed: frozenset[str]) -> str | None:
    """preferred is the cluster to try first: the data cluster when only preferred and allowed (None: no preference).

    None as well when ``allowed`` is that one cluster already: there is nothing to prefer it over.
    """
    cluster = task.data_cluster
    if not cluster or task.data_required or task.checkpoint_cluster:
        return None  # a pin, when there is one, decides on its own
    if allowed and (cluster not in allowed or allowed == {cluster}):
        return None
    return cluster


def waits_for_pin(task: PendingTask, reason: PendingReason) -> PendingReason:
    """waits_for_pin is a pinned task's filter reason told with the pin: whose cluster it waits for, and why."""
    pins = pinned(task)
    if not pins:
        return reason
    (cluster, why), = pins.items()
    if reason.code is ReasonCode.NODE_UNHEALTHY:
        # the daemon drains a drained or dark cluster's nodes for the policy: that is what this means there
        tail = " rather than lose the checkpoint" if task.checkpoint_cluster else ""
        return PendingReason(
            ReasonCode.NODE_UNHEALTHY,
            f"{why}; {cluster} has no node up that could host it (drained by an admin, not answering, "
            f"or its nodes down): it waits for {cluster}{tail}",
            f"wait for {cluster} to return (an admin: metasched cluster resume {cluster})",
        )
    return PendingReason(reason.code, f"{why}; on {cluster}: {reason.message}", reason.remedy,
                         reason.blocking_job, reason.blocking_tenant)
