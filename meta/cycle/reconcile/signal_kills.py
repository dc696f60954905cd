"""For step 4 (reconcile): an attempt killed by the checkpoint signal metasched asked for is preempted, not failed."""

from __future__ import annotations

import logging

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from meta.model.kinds import FailureCategory
from meta.model.spec import TrainingSpec
from meta.model.states import AttemptState
from meta.store.lifecycle import job_spec
from meta.store.models import Attempt, Transition
from slurm_bridge.render import CHECKPOINT_SIGNAL
from slurm_bridge.states import Observed, killed_by

log = logging.getLogger("metasched.reconciler")

# the reason of an attempt killed by the checkpoint signal metasched asked for; also how such
# ends are counted (``signal_kills``)
SIGNAL_KILL_REASON = (
    f"killed by the checkpoint signal {CHECKPOINT_SIGNAL} that metasched asked Slurm to send; "
    "the program does not trap it"
)


def signal_kills(session: Session, task_id: str) -> int:
    """signal_kills counts the task's earlier attempts that the checkpoint signal killed."""
    return session.scalar(
        select(func.count())
        .select_from(Transition)
        .join(Attempt, Attempt.id == Transition.entity_id)
        .where(
            Attempt.task_id == task_id,
            Transition.entity == "attempt",
            Transition.to_state == AttemptState.PREEMPTED.value,
            Transition.reason.contains(SIGNAL_KILL_REASON, autoescape=True),
        )
    ) or 0


def signal_kill_end(session: Session, attempt: Attempt, where: str) -> tuple[AttemptState, FailureCategory, str]:
    """signal_kill_end is how an attempt the checkpoint signal killed ends: preempted, not the user's failure.

    A preemption is requeued without spending the task's retry budget, so a program that never
    traps the signal would be killed and requeued for ever: after ``max_attempts`` such ends
    (the retry policy's own bound) the task fails instead, still not as the user's error.
    """
    reason = f"{where}: {SIGNAL_KILL_REASON}"
    kills = signal_kills(session, attempt.task_id) + 1
    log.warning("attempt %s (Slurm job %s) %s", attempt.id, attempt.slurm_job_id, reason)
    if kills < job_spec(session, attempt.job_id).retry.max_attempts:
        return AttemptState.PREEMPTED, FailureCategory.PREEMPTED, reason
    return AttemptState.FAILED, FailureCategory.UNKNOWN, f"{reason} ({kills} attempts; not requeued again)"


def killed_by_our_signal(session: Session, attempt: Attempt, observed: Observed) -> bool:
    """killed_by_our_signal: the job died of the checkpoint signal, which metasched asked for.

    metasched asks for it only for jobs that declared a checkpoint (``--signal`` before the
    time limit, USR1 before a preemption), so for any other job the signal was not ours.
    """
    if not killed_by(observed, CHECKPOINT_SIGNAL):
        return False
    spec = job_spec(session, attempt.job_id)
    return isinstance(spec, TrainingSpec) and spec.checkpoint is not None
