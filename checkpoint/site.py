"""Where a task's checkpoint can be read (issue 26): the Slurm cluster of the attempt that wrote it.

A checkpoint dir is local to a cluster unless the job says it is on storage every cluster mounts
(``checkpoint.shared``), so a retry that resumes from it must run where it was written. The cluster
is the one of the writing attempt's nodes (or of its qualified Slurm job id); on a single-cluster
site it is "" and nothing is pinned.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from checkpoint.registry import latest
from meta.model.clusters import cluster_of
from meta.model.spec import AnySpec, TrainingSpec
from meta.store.models import Attempt, Task


def written_on(session: Session, task_id: str) -> str:
    """written_on is the cluster the task's newest checkpoint (the one a retry resumes from) was written on ("": none)."""
    view = latest(session, task_id)
    if view is None:
        return ""
    attempt = session.get(Attempt, view.attempt_id)
    if attempt is None:
        return ""
    # its nodes name the cluster; an attempt placed without qualified nodes still has its Slurm job's
    for name in (*attempt.nodes()[:1], attempt.slurm_job_id or ""):
        cluster = cluster_of(name)
        if cluster:
            return cluster
    return ""


def resume_cluster(session: Session, task: Task, spec: AnySpec) -> str:
    """resume_cluster is where the task's next attempt can read its checkpoint: the cluster that wrote it ("": anywhere).

    Only a training task that ran before and whose checkpoint dir is not shared by every cluster
    (``checkpoint.shared``) is pinned, so the query runs only for those.
    """
    checkpoint = spec.checkpoint if isinstance(spec, TrainingSpec) else None
    if checkpoint is None or checkpoint.shared or not task.attempts_made:
        return ""
    return written_on(session, task.id)
