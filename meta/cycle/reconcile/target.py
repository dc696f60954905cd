"""For step 4 (reconcile): the attempt state a Slurm report implies, and the stimulus that names the move."""

from __future__ import annotations

from sqlalchemy import Row
from sqlalchemy.orm import Session

from meta.model.kinds import FailureCategory
from meta.model.states import AttemptState
from meta.store.models import Attempt, PartitionCommit
from slurm_bridge.states import Observed, Outcome

# ends that send a task back for another attempt (unless it has run out of retries)
RETRIED_ENDS = frozenset({AttemptState.LOST, AttemptState.PREEMPTED, AttemptState.FAILED})


def stimulus(slurm_job_id: str, observed: Observed, target: AttemptState) -> str:
    """stimulus names a move a Slurm report caused; the same report never moves an attempt twice."""
    return f"slurm:{slurm_job_id}:{observed.slurm_state}:{target.value}"


def committed_its_output(session: Session, attempt: Attempt) -> bool:
    """committed_its_output tells whether the attempt's partition output is committed, by this attempt."""
    commit = session.get(PartitionCommit, attempt.task_id)
    return commit is not None and commit.attempt_id == attempt.id


def target_of(attempt: Attempt | Row, observed: Observed) -> tuple[AttemptState | None, FailureCategory | None, str]:
    """target_of is the attempt state a Slurm observation implies (None: no move)."""
    state = AttemptState(attempt.state)
    outcome = observed.outcome
    where = f"Slurm {observed.slurm_state}"
    if outcome == Outcome.PENDING:
        return (
            (AttemptState.LAUNCHING, None, where)
            if state == AttemptState.LAUNCH_UNKNOWN
            else (None, None, "")
        )
    if outcome == Outcome.RUNNING:
        if state in (AttemptState.LAUNCHING, AttemptState.LAUNCH_UNKNOWN, AttemptState.CREATED):
            return AttemptState.RUNNING, None, where
        return None, None, ""
    if outcome == Outcome.UNKNOWN:
        return None, None, ""
    if attempt.stop_reason == "preempt" or outcome == Outcome.PREEMPTED:
        # asked to stop for a preemption: however it ended (it may checkpoint on USR1 and exit 0),
        # the task is not done — it goes back to pending and resumes from its checkpoint
        return AttemptState.PREEMPTED, FailureCategory.PREEMPTED, f"{where} after preemption"
    if outcome == Outcome.SUCCEEDED:
        return AttemptState.SUCCEEDED, None, f"{where} exit 0"
    if outcome == Outcome.CANCELLED:
        if attempt.cancel_requested:
            return AttemptState.CANCELLED, FailureCategory.CANCELLED, f"{where} (as requested)"
        # cancelled in Slurm behind metasched's back (an operator's scancel, a controller
        # purge): nobody asked metasched to cancel the task, so its attempt is lost and the
        # task is retried under its policy (``lost`` is retried by default) — it does not end
        return AttemptState.LOST, FailureCategory.LOST, f"{where} outside metasched"
    code = f" exit {observed.exit_code}" if observed.exit_code is not None else ""
    return AttemptState.FAILED, observed.category or FailureCategory.UNKNOWN, f"{where}{code}"
