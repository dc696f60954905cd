"""For step 4 (reconcile), the bulk path: steady attempts and clean starts and ends, a few statements per chunk."""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from meta.cycle.reconcile.observe import Observation
from meta.cycle.reconcile.settings import LIVE, ReconcileResult, SuccessHook
from meta.cycle.reconcile.sightings import Sightings
from meta.cycle.reconcile.target import stimulus, target_of
from meta.model.errors import JOB_FAULTS, ConcurrentModification
from meta.model.states import LIVE_ATTEMPT_STATES, AttemptState, IllegalTransition
from meta.store.lifecycle import move_attempts
from meta.store.models import Attempt

log = logging.getLogger("metasched.reconciler")
# moves of a clean start or a clean finish, made for many attempts at once
_CLEAN_MOVES = frozenset({AttemptState.RUNNING, AttemptState.SUCCEEDED})
GroupKey = tuple[AttemptState, AttemptState, str, "int | None"]


def classify(
    session: Session, attempt_ids: list[str], observation: Observation
) -> tuple[list[str], dict[GroupKey, dict[str, str]]]:
    """classify finds the common cases a chunk can handle with a few statements.

    Steady: seen once, under the recorded Slurm id, in the state it is in — a period only
    renews its lease. Clean moves: the same, but started running or finished with exit 0 —
    moved in groups by (from, to, reason, exit code). Everything else (unseen, duplicated,
    not yet recorded, failed, preempted, cancelled) takes the one-at-a-time path.
    """
    rows = session.execute(
        select(Attempt.id, Attempt.state, Attempt.slurm_job_id, Attempt.stop_reason, Attempt.cancel_requested)
        .where(Attempt.id.in_(attempt_ids), Attempt.state.in_(LIVE))
    )
    steady: list[str] = []
    groups: dict[GroupKey, dict[str, str]] = {}
    for row in rows:
        sightings = observation.sightings(row.id)
        if len(sightings) != 1 or sightings[0].slurm_job_id != row.slurm_job_id:
            continue  # unseen, duplicated or not yet recorded: the full path decides
        observed = sightings[0].observed
        target, _, reason = target_of(row, observed)
        if target is None or target.value == row.state:
            steady.append(row.id)
        elif target in _CLEAN_MOVES and observed.exit_code in (None, 0):
            key = (AttemptState(row.state), target, reason, observed.exit_code)
            groups.setdefault(key, {})[row.id] = stimulus(row.slurm_job_id, observed, target)
    return steady, groups


def move_together(
    session: Session,
    key: GroupKey,
    stimuli: dict[str, str],
    now: datetime,
    result: ReconcileResult,
    sightings: Sightings,
    on_success: SuccessHook | None,
) -> bool:
    """move_together moves one group in bulk; False (nothing moved) sends it one by one."""
    from_state, target, reason, exit_code = key
    values: dict[str, object] = {**sightings.columns(now)}
    if exit_code is not None and target not in LIVE_ATTEMPT_STATES:
        # squeue reports 0:0 for a running job: an exit code exists only once the attempt ended
        values["exit_code"] = exit_code
    try:
        with session.begin_nested():
            if target == AttemptState.SUCCEEDED and on_success is not None:
                for attempt in session.scalars(select(Attempt).where(Attempt.id.in_(list(stimuli)))):
                    if on_success(session, attempt) is not None:
                        del stimuli[attempt.id]  # output not settled: the one-by-one path holds or fails it
                if not stimuli:
                    return True
            move_attempts(session, stimuli, from_state, target, reason=reason, actor="reconciler", values=values)
    except (ConcurrentModification, IllegalTransition, *JOB_FAULTS) as exc:
        # one attempt's bad data (e.g. in its success hook) must not hold the group: each is then
        # followed alone, where a poison attempt is quarantined
        log.info("bulk move of %d attempts to %s fell back to one by one: %s", len(stimuli), target.value, exc)
        return False
    result.transitions += len(stimuli)
    sightings.stored(stimuli, now)
    return True
