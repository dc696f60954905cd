"""For step 4 (reconcile), unseen and lost: an attempt Slurm shows nothing of is relaunched, stopped, or lost after a grace."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy.orm import Session

from meta.cycle.reconcile.settings import ReconcileResult, ReconcileSettings
from meta.cycle.reconcile.sightings import Sightings
from meta.cycle.reconcile.target import committed_its_output
from meta.model.kinds import FailureCategory
from meta.model.states import AttemptState
from meta.store.lifecycle import attempt_event
from meta.store.models import Attempt


def unseen(
    session: Session,
    attempt: Attempt,
    now: datetime,
    result: ReconcileResult,
    *,
    settings: ReconcileSettings,
    sending: Collection[str],
    sightings: Sightings,
) -> None:
    """unseen handles an attempt Slurm shows nothing of: confirm absence, relaunch, or lose it."""
    state = AttemptState(attempt.state)
    if state == AttemptState.CREATED or attempt.id in sending:
        return  # not sent yet, or this replica's sbatch for it has not returned: no conclusion
    sent = attempt.launch_sent_at or attempt.created_at
    quiet_s = (now - sent).total_seconds()
    if attempt.slurm_job_id is None and state in (AttemptState.LAUNCHING, AttemptState.LAUNCH_UNKNOWN):
        if quiet_s < settings.unknown_window_s:
            return  # squeue shows a job at once, but sacct lags: wait the window out
        if state == AttemptState.LAUNCHING:
            # a crash between "launching" and the recorded Slurm id: same as an unknown outcome
            _move(
                session,
                attempt,
                result,
                AttemptState.LAUNCH_UNKNOWN,
                f"unknown:{attempt.id}:{attempt.version}",
                "launch interrupted before its Slurm id was recorded",
            )
        result.relaunch.append(attempt.id)
        return
    if (
        state == AttemptState.STOPPING
        and attempt.slurm_job_id is None
        and quiet_s >= settings.unknown_window_s
    ):
        # asked to stop, and Slurm never had it: nothing to cancel
        stopped = AttemptState.CANCELLED if attempt.stop_reason != "preempt" else AttemptState.PREEMPTED
        _move(
            session, attempt, result, stopped, f"stop-absent:{attempt.id}", "stopped before Slurm ever had it"
        )
        return
    last = sightings.last(attempt.id, attempt.last_seen_at or sent)
    if (now - last).total_seconds() < settings.lost_grace_s:
        return
    if committed_its_output(session, attempt):
        _move(
            session,
            attempt,
            result,
            AttemptState.SUCCEEDED,
            f"lost-committed:{attempt.id}:{attempt.version}",
            "Slurm lost sight of it after its output was committed",
        )
        return
    _move(
        session,
        attempt,
        result,
        AttemptState.LOST,
        f"lost:{attempt.id}:{attempt.version}",
        f"Slurm has no record of job {attempt.slurm_job_id} for {settings.lost_grace_s:.0f}s",
        failure_category=FailureCategory.LOST,
    )
    result.lost.append(attempt.id)


def _move(
    session: Session,
    attempt: Attempt,
    result: ReconcileResult,
    target: AttemptState,
    stimulus_id: str,
    reason: str,
    failure_category: FailureCategory | None = None,
) -> None:
    """_move records the reconciler's conclusion about an unseen attempt, fenced by its token."""
    attempt_event(
        session,
        attempt.id,
        target,
        stimulus_id,
        reason=reason,
        actor="reconciler",
        fencing_token=attempt.fencing_token,
        failure_category=failure_category,
    )
    result.transitions += 1
