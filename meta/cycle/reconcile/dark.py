"""For step 4 (reconcile), dark clusters: a cluster that stops answering is a bulkhead, not a loss.

An attempt on a cluster whose controller does not answer (``slurm_bridge.clusters``) is not
judged from the period's read: it may be running on, and Slurm's silence says nothing. Only
work whose replay is safe moves on, once the cluster has been dark longer than
``dark_grace_s``: an inference partition, whose output commit is fenced by its attempt's token
(the copy left on the dark cluster can never commit, so the outputs stay exactly once). Its
attempt is marked lost as ``cluster_dark`` (the scheduler's doing: no retry budget spent), the
task is placed again on a cluster that answers, and when the dark one comes back its copy is an
orphan the reconciler cancels. Training and evaluations wait for their cluster (a checkpoint on
it may be the only one).
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy.orm import Session

from meta.cycle.reconcile.settings import ReconcileResult, ReconcileSettings
from meta.model.clusters import cluster_of
from meta.model.kinds import FailureCategory, JobKind
from meta.model.states import AttemptState
from meta.store.lifecycle import attempt_event
from meta.store.models import Attempt, Job


def attempt_cluster(attempt: Attempt) -> str:
    """attempt_cluster is the cluster of the attempt's Slurm job (or, before it has one, of its nodes)."""
    return cluster_of(attempt.slurm_job_id or next(iter(attempt.nodes()), ""))


def on_dark_cluster(attempt: Attempt, dark: Mapping[str, float]) -> bool:
    """on_dark_cluster: the attempt is on a cluster that did not answer this period."""
    return bool(dark) and attempt_cluster(attempt) in dark


def replay_if_dark_too_long(
    session: Session, attempt: Attempt, dark: Mapping[str, float], settings: ReconcileSettings, result: ReconcileResult
) -> bool:
    """replay_if_dark_too_long marks a replayable attempt lost (cluster_dark) once its cluster is dark past the grace."""
    cluster = attempt_cluster(attempt)
    dark_s = dark.get(cluster, 0.0)
    if settings.dark_grace_s is None or dark_s < settings.dark_grace_s:
        return False
    job = session.get(Job, attempt.job_id)
    if job is None or job.kind != JobKind.INFERENCE.value:
        return False
    attempt_event(
        session,
        attempt.id,
        AttemptState.LOST,
        f"dark:{attempt.id}:{attempt.version}",
        reason=(f"cluster {cluster} unreachable for {dark_s:.0f}s: replayed on another cluster (a copy still "
                "running there is cancelled when it answers, and can never commit its output)"),
        actor="reconciler",
        fencing_token=attempt.fencing_token,
        failure_category=FailureCategory.CLUSTER_DARK,
    )
    result.transitions += 1
    result.lost.append(attempt.id)
    return True
