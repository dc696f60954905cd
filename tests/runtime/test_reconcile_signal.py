"""Reconciler: an attempt killed by the checkpoint signal metasched asked for is preempted, not the user's failure.

Slurm sends ``USR1`` before the time limit (``--signal=B:USR1@grace``) only to jobs that declared a
checkpoint; a program that does not trap it dies: exit 138 (srun, or a shell, 128+USR1) or the
batch shell killed by signal 10.
"""

from __future__ import annotations

import pytest

from meta.cycle.reconcile import SIGNAL_KILL_REASON, Reconciler, ReconcileSettings, observe
from meta.model.ids import new_uuid
from meta.model.states import AttemptState, TaskState
from meta.service.api import Service
from meta.store.lifecycle import attempt_event, create_attempt
from meta.store.models import Attempt
from slurm_bridge.fake import FakeSlurm
from tests.runtime.support import attempt, checkpointing, lead, share, submit, task, training

SETTINGS = ReconcileSettings(unknown_window_s=15.0, lost_grace_s=120.0, lease_s=300.0)
# (exit code, signal) as squeue reports them: srun's 128+USR1, or the batch shell killed by USR1
SIGNAL_ENDS = [(138, None), (0, 10)]


def _launch(service: Service, fake: FakeSlurm, task_id: str):
    """_launch places a running attempt of ``task_id`` whose Slurm job exists."""
    with service.db.session() as session:
        # a stimulus of its own per attempt (support.place reuses one per task: a replay)
        attempt_id = create_attempt(session, task_id, f"test:place:{new_uuid()}", placement=[share("node1")]).id
        for target in (AttemptState.LAUNCHING, AttemptState.RUNNING):
            attempt_event(session, attempt_id, target, f"test:{attempt_id}:{target.value}", actor="test")
    job = fake.add_job(f"ms-{attempt_id}", f"metasched:attempt={attempt_id}:token=1", "RUNNING", ("node1",))
    with service.db.session() as session:
        session.get(Attempt, attempt_id).slurm_job_id = str(job.job_id)
    return attempt_id, job


def _killed(
    service: Service, task_id: str, exit_code: int, signal: int | None, in_squeue: bool = True, fake: FakeSlurm | None = None
) -> Attempt:
    """_killed runs an attempt of the task, ends it in Slurm with (exit code, signal) and reconciles."""
    fake = fake or FakeSlurm()
    attempt_id, job = _launch(service, fake, task_id)
    fake.finish(job.job_id, "FAILED", exit_code, signal)
    job.in_squeue = in_squeue
    reconciler = Reconciler(service.db, fake, SETTINGS)
    reconciler.apply(observe(fake, reconciler.since(), site=reconciler.site), lead(service.db))
    return attempt(service.db, attempt_id)


@pytest.mark.parametrize(("exit_code", "signal"), SIGNAL_ENDS, ids=["exit-138", "signal-10"])
@pytest.mark.parametrize("in_squeue", [True, False], ids=["squeue", "sacct-only"])
def test_checkpointing_job_killed_by_the_signal_is_preempted_and_requeued(
    service: Service, exit_code: int, signal: int | None, in_squeue: bool
) -> None:
    job_id, (t,) = submit(service, checkpointing())
    row = _killed(service, t, exit_code, signal, in_squeue)
    assert row.state == AttemptState.PREEMPTED.value and row.failure_category == "preempted"
    assert task(service.db, t).state == TaskState.PENDING.value
    status = service.status(job_id)
    # `metasched status` shows the task's reason and the transitions with theirs
    assert SIGNAL_KILL_REASON in status.tasks[0].reason
    assert any(SIGNAL_KILL_REASON in line.reason for line in status.recent if line.to_state == "preempted")


@pytest.mark.parametrize(("exit_code", "signal"), SIGNAL_ENDS, ids=["exit-138", "signal-10"])
def test_the_same_death_of_a_job_metasched_never_signals_stays_the_users(
    service: Service, exit_code: int, signal: int | None
) -> None:
    _, (t,) = submit(service, training())  # no checkpoint section: metasched asked for no signal
    row = _killed(service, t, exit_code, signal)
    assert row.state == AttemptState.FAILED.value
    assert row.failure_category == ("user_error" if exit_code else "unknown")
    assert task(service.db, t).state == TaskState.FAILED.value


def test_another_exit_code_of_a_checkpointing_job_is_still_a_user_error(service: Service) -> None:
    _, (t,) = submit(service, checkpointing())
    row = _killed(service, t, 137, None)  # 128+KILL: not the checkpoint signal
    assert row.state == AttemptState.FAILED.value and row.failure_category == "user_error"


def test_a_program_that_never_traps_the_signal_is_not_requeued_for_ever(service: Service) -> None:
    _, (t,) = submit(service, checkpointing(retry={"max_attempts": 3}))
    fake = FakeSlurm()  # one cluster: each attempt gets its own Slurm job id
    first = _killed(service, t, 138, None, fake=fake)
    second = _killed(service, t, 0, 10, fake=fake)
    assert {first.state, second.state} == {AttemptState.PREEMPTED.value}
    assert task(service.db, t).state == TaskState.PENDING.value
    third = _killed(service, t, 138, None, fake=fake)
    # the retry policy's bound: still not the user's error, and the reason says why it stopped
    assert third.state == AttemptState.FAILED.value and third.failure_category == "unknown"
    row = task(service.db, t)
    assert row.state == TaskState.FAILED.value
    assert SIGNAL_KILL_REASON in row.reason and "3 attempts; not requeued again" in row.reason
