"""For step 4 (reconcile), the bulk path: steady attempts and clean starts and ends, a few statements per chunk."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import Row, select
from sqlalchemy.orm import Session

from meta.cycle.outputs import commit_expected, expect_commits, forget_expected
from meta.cycle.reconcile.observe import Observation
from meta.cycle.reconcile.settings import LIVE, OutputHold, ReconcileResult, SuccessHook
from meta.cycle.reconcile.sightings import Sightings
from meta.cycle.reconcile.target import stimulus, target_of
from meta.model.errors import JOB_FAULTS, ConcurrentModification
from meta.model.states import LIVE_ATTEMPT_STATES, AttemptState, IllegalTransition
from meta.store.chunks import among
from meta.store.lifecycle import move_attempts
from meta.store.models import Attempt, Job

log = logging.getLogger("metasched.reconciler")
# moves of a clean start or a clean finish, made for many attempts at once
_CLEAN_MOVES = frozenset({AttemptState.RUNNING, AttemptState.SUCCEEDED})
GroupKey = tuple[AttemptState, AttemptState, str, "int | None"]


def live_rows(session: Session) -> list[Row]:
    """live_rows are every live attempt's state and recorded job, in one statement (what classify reads)."""
    return list(session.execute(
        select(Attempt.id, Attempt.state, Attempt.slurm_job_id, Attempt.stop_reason, Attempt.cancel_requested)
        .where(Attempt.state.in_(LIVE))
    ))  # fmt: skip


def classify(rows: Iterable[Row], observation: Observation) -> tuple[list[str], dict[GroupKey, dict[str, str]]]:
    """classify finds the common cases a chunk of ``live_rows`` can handle with a few statements.

    Steady: seen once, under the recorded Slurm id, in the state it is in — a period only
    renews its lease. Clean moves: the same, but started running or finished with exit 0 —
    moved in groups by (from, to, reason, exit code). Everything else (unseen, duplicated,
    not yet recorded, failed, preempted, cancelled) takes the one-at-a-time path. The rows are
    read once per period, not per chunk (one statement, not one ``IN`` of a thousand ids per
    chunk: issue 24); a row that changed since is caught where it is written — a group's move
    checks its from-state, a sighting renews only a live attempt.
    """
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
    reading: set[str] | None = None,
) -> bool:
    """move_together moves one group in bulk; False (nothing moved) sends it one by one.

    Succeeded attempts whose output the workers are still reading stay where they are and go
    into ``reading`` (the caller renews their sighting, as the one-by-one path would, and looks
    again next period): asking the success hook a second time in the same period only re-read
    the store.
    """
    from_state, target, reason, exit_code = key
    values: dict[str, object] = {**sightings.columns(now)}
    if exit_code is not None and target not in LIVE_ATTEMPT_STATES:
        # squeue reports 0:0 for a running job: an exit code exists only once the attempt ended
        values["exit_code"] = exit_code
    still_reading: set[str] = set()
    try:
        with session.begin_nested():
            if target == AttemptState.SUCCEEDED and on_success is not None:
                still_reading = _settle_outputs(session, stimuli, on_success)
                if not stimuli:
                    _add(reading, still_reading)
                    return True
            move_attempts(session, stimuli, from_state, target, reason=reason, actor="reconciler", values=values)
    except (ConcurrentModification, IllegalTransition, *JOB_FAULTS) as exc:
        # one attempt's bad data (e.g. in its success hook) must not hold the group: each is then
        # followed alone, where a poison attempt is quarantined
        log.info("bulk move of %d attempts to %s fell back to one by one: %s", len(stimuli), target.value, exc)
        return False
    _add(reading, still_reading)
    result.transitions += len(stimuli)
    sightings.stored(stimuli, now)
    return True


def _settle_outputs(session: Session, stimuli: dict[str, str], on_success: SuccessHook) -> set[str]:
    """_settle_outputs runs the success hook per attempt; unsettled ones leave ``stimuli``, those still being read are returned."""
    attempts = list(session.scalars(select(Attempt).where(among(session, Attempt.id, list(stimuli)))))
    # the hook reads each attempt's job: one query for the group puts them in the session's identity
    # map (which holds them only weakly: ``jobs`` keeps them there for the loop)
    job_ids = sorted({attempt.job_id for attempt in attempts})
    jobs = session.scalars(select(Job).where(among(session, Job.id, job_ids))).all()
    known = expect_commits(session, [attempt.task_id for attempt in attempts])  # the group's commits and tasks at once
    try:
        holds = _ask(session, attempts, on_success)
        commit_expected(session)
    finally:
        forget_expected(session)
    reading: set[str] = set()
    for attempt_id, hold in holds.items():
        if hold is None:
            continue
        del stimuli[attempt_id]  # output not settled: refused ones fail on the one-by-one path
        if hold.failure is None:
            reading.add(attempt_id)
    del jobs, known
    return reading


def _ask(session: Session, attempts: list[Attempt], on_success: SuccessHook) -> dict[str, OutputHold | None]:
    """_ask runs the hook for each attempt, twice for those whose folder it handed to the workers."""
    holds = {attempt.id: on_success(session, attempt) for attempt in attempts}
    # The first pass handed the folders to the workers; most scans (an empty or small folder) are
    # done by now, and asking once more commits them in this period rather than the next.
    for attempt in attempts:
        hold = holds[attempt.id]
        if hold is not None and hold.failure is None:
            holds[attempt.id] = on_success(session, attempt)
    return holds


def _add(into: set[str] | None, ids: set[str]) -> None:
    """_add adds ``ids`` to an optional collector."""
    if into is not None:
        into.update(ids)
