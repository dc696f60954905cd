"""For step 4 (reconcile), seen: an attempt Slurm shows is recorded, its lease renewed, its job's state followed."""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy import update
from sqlalchemy.orm import Session

from meta.cycle.reconcile.attribution import WAIT, CancelAttribution, is_array, user_cancel
from meta.cycle.reconcile.cancellers import Canceller
from meta.cycle.reconcile.observe import Observation, Sighting
from meta.cycle.reconcile.settings import ReconcileResult, SuccessHook
from meta.cycle.reconcile.sightings import Sightings
from meta.cycle.reconcile.signal_kills import killed_by_our_signal, signal_kill_end
from meta.cycle.reconcile.target import RETRIED_ENDS, committed_its_output, stimulus, target_of
from meta.model.clusters import job_ref_order
from meta.model.kinds import FailureCategory
from meta.model.states import LIVE_ATTEMPT_STATES, AttemptState
from meta.store.lifecycle import attempt_event, cancel_job
from meta.store.models import Attempt, Job
from slurm_bridge.states import Outcome

log = logging.getLogger("metasched.reconciler")


def choose(
    attempt: Attempt, sightings: list[Sighting], result: ReconcileResult, scancel: Callable[[str], None]
) -> Sighting:
    """choose picks the attempt's own job; any other active job for the same attempt is a duplicate."""
    own = [s for s in sightings if s.slurm_job_id == attempt.slurm_job_id] or sorted(
        sightings, key=lambda s: job_ref_order(s.slurm_job_id)
    )
    chosen = own[0]
    for other in sightings:
        if other.slurm_job_id != chosen.slurm_job_id and not other.observed.terminal:
            log.error("duplicate Slurm job %s for attempt %s: cancelling", other.slurm_job_id, attempt.id)
            scancel(other.slurm_job_id)
            result.duplicates_cancelled.append(other.slurm_job_id)
    return chosen


def seen(
    session: Session,
    attempt: Attempt,
    sighting: Sighting,
    observation: Observation,
    result: ReconcileResult,
    *,
    sightings: Sightings,
    attribution: CancelAttribution,
    on_success: SuccessHook | None,
) -> None:
    """seen records the sighting, renews the lease and follows the job's state."""
    now = observation.at
    session.execute(
        update(Attempt)
        .where(Attempt.id == attempt.id, Attempt.fencing_token == attempt.fencing_token)
        .values(slurm_job_id=attempt.slurm_job_id or sighting.slurm_job_id, **sightings.columns(now))
    )
    sightings.stored_at[attempt.id] = now
    session.refresh(attempt)
    target, category, reason = target_of(attempt, sighting.observed)
    if target is None or target.value == attempt.state:
        return
    actor = "reconciler"
    if target == AttemptState.LOST and sighting.observed.outcome == Outcome.CANCELLED:
        who = attribution.canceller(session, attempt, sighting, observation)
        if who is WAIT:
            return
        if isinstance(who, Canceller):
            target, category, actor = AttemptState.CANCELLED, FailureCategory.CANCELLED, who.name
            reason = f"Slurm {sighting.observed.slurm_state} by {who.name} (scancel)"
            user_cancel(session, attempt, who, sighting.slurm_job_id)
    if target == AttemptState.FAILED and killed_by_our_signal(session, attempt, sighting.observed):
        target, category, reason = signal_kill_end(session, attempt, reason)
    if target in RETRIED_ENDS and committed_its_output(session, attempt):
        # the partition's one visible output is already this attempt's: the task's work is
        # done, and a retry could only be refused at its own commit
        target, category, reason = AttemptState.SUCCEEDED, None, f"{reason}, after its output was committed"
    values = {}
    if sighting.observed.exit_code is not None and target not in LIVE_ATTEMPT_STATES:
        values["exit_code"] = sighting.observed.exit_code
    if target == AttemptState.SUCCEEDED and on_success is not None:
        hold = on_success(session, attempt)
        if hold is not None and hold.failure is None:
            return  # its output is still being read off the period: looked at again next period
        if hold is not None:  # its output was refused (over a cap, a symlink): the partition fails
            target, category = AttemptState.FAILED, FailureCategory.USER_ERROR
            reason = f"{reason}, {hold.failure}"
    attempt_event(
        session,
        attempt.id,
        target,
        stimulus(sighting.slurm_job_id, sighting.observed, target),
        reason=reason,
        actor=actor,
        fencing_token=attempt.fencing_token,
        failure_category=category,
        values=values,
    )
    if target == AttemptState.CANCELLED and actor != "reconciler" and not is_array(session, attempt.job_id):
        job = session.get(Job, attempt.job_id)
        assert job is not None
        cancel_job(session, job, actor)  # the job's other tasks and attempts follow (an array's do not)
    result.transitions += 1
