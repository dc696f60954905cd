"""Actuator: launch protocol (launching before sbatch, id recorded, rejected, unknown) and stops."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from checkpoint import attempt_secret
from meta.cycle.actuate.actuator import ActuationResult, Actuator
from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.lease import LEASE_NAME, NotLeader, try_acquire
from meta.cycle.snapshot.build import SpecCache
from meta.model.durations import utcnow
from meta.model.states import AttemptState, TaskState
from meta.service.api import Service
from meta.store.lifecycle import attempt_event
from meta.store.models import Attempt, Checkpoint, LeaderLease
from meta.store.site import ensure_site_id
from slurm_bridge.errors import SlurmTransient
from slurm_bridge.fake import REJECTED, TRANSIENT, UNKNOWN_AFTER, UNKNOWN_BEFORE, FakeSlurm
from tests.runtime.support import attempt, checkpointing, lead, place, share, submit, task, training


def _actuator(service: Service, fake: FakeSlurm, tmp_path: Path, grace_s: int = 60) -> Actuator:
    return Actuator(service.db, fake, SpecCache(), LaunchSettings(log_dir=str(tmp_path / "logs"), grace_s=grace_s))


def test_created_attempt_is_launched_and_its_slurm_id_recorded(service: Service, tmp_path: Path) -> None:
    db, fake = service.db, FakeSlurm()
    leadership = lead(db)
    _, (t,) = submit(service, training(workers=2))
    attempt_id = place(db, t, [share("node1"), share("node2")])
    result = ActuationResult()
    _actuator(service, fake, tmp_path).launch_created(leadership, result)
    assert result.launched == [attempt_id]
    job = fake.job_of(attempt_id)
    row = attempt(db, attempt_id)
    assert row.state == AttemptState.LAUNCHING.value
    assert row.slurm_job_id == str(job.job_id)
    assert row.launch_sent_at is not None and row.last_seen_at is not None
    # squeue shows it to everyone: the site and the attempt, no token
    assert job.comment == f"metasched:site={ensure_site_id(db)}:attempt={attempt_id}"
    secret = next(line for line in job.script.splitlines() if line.startswith("export METASCHED_ATTEMPT_SECRET="))
    assert row.secret_hash == attempt_secret.digest(secret.split("=", 1)[1])
    assert job.account == "acme" and job.components == [("node1", "node2")]
    assert task(db, t).state == TaskState.SCHEDULED.value
    assert (tmp_path / "logs").is_dir()


def test_launch_resumes_from_the_highest_step_checkpoint(service: Service, tmp_path: Path) -> None:
    db, fake = service.db, FakeSlurm()
    leadership = lead(db)
    _, (t,) = submit(service, checkpointing(ckpt_dir=str(tmp_path / "ckpt")))
    first = place(db, t, [share("node1")], AttemptState.RUNNING)
    with db.session() as session:
        for step in (20, 50, 30):
            session.add(Checkpoint(task_id=t, attempt_id=first, fencing_token=1, step=step, path=f"/ck/{step}", at=utcnow()))
        attempt_event(session, first, AttemptState.PREEMPTED, "test:preempted")
    assert task(db, t).state == TaskState.PENDING.value
    second = place(db, t, [share("node2")])
    _actuator(service, fake, tmp_path).launch_created(leadership, ActuationResult())
    assert "export METASCHED_RESUME_FROM=/ck/50" in fake.job_of(second).script


def test_rejected_launch_fails_the_attempt_and_the_task_retries(service: Service, tmp_path: Path) -> None:
    db, fake = service.db, FakeSlurm()
    leadership = lead(db)
    _, (t,) = submit(service, training())
    attempt_id = place(db, t)
    fake.fail_next_submits(REJECTED)
    result = ActuationResult()
    _actuator(service, fake, tmp_path).launch_created(leadership, result)
    assert result.rejected == [attempt_id] and result.launched == []
    row = attempt(db, attempt_id)
    assert row.state == AttemptState.FAILED.value and row.failure_category == "launch_failure"
    assert row.slurm_job_id is None and fake.jobs == {}
    retried = task(db, t)
    assert retried.state == TaskState.PENDING.value  # launch_failure is retried by default
    assert retried.not_before is not None and retried.not_before > utcnow()


def test_rejected_launch_fails_the_task_when_the_policy_does_not_retry(service: Service, tmp_path: Path) -> None:
    db, fake = service.db, FakeSlurm()
    leadership = lead(db)
    _, (t,) = submit(service, training(retry={"on": ["node_failure"]}))
    place(db, t)
    fake.fail_next_submits(REJECTED)
    _actuator(service, fake, tmp_path).launch_created(leadership, ActuationResult())
    assert task(db, t).state == TaskState.FAILED.value


@pytest.mark.parametrize("fault", [UNKNOWN_BEFORE, UNKNOWN_AFTER, TRANSIENT])
def test_unknown_outcome_is_recorded_and_not_resubmitted_in_the_same_pass(
    service: Service, tmp_path: Path, fault: str
) -> None:
    db, fake = service.db, FakeSlurm()
    leadership = lead(db)
    _, (t,) = submit(service, training())
    attempt_id = place(db, t)
    fake.fail_next_submits(fault)
    actuator = _actuator(service, fake, tmp_path)
    result = ActuationResult()
    actuator.launch_created(leadership, result)
    actuator.stop_requested(leadership, result)
    actuator.launch_created(leadership, result)
    assert result.unknown == [attempt_id] and result.launched == [] and result.rejected == []
    assert fake.calls["submit"] == 1
    row = attempt(db, attempt_id)
    assert row.state == AttemptState.LAUNCH_UNKNOWN.value and row.slurm_job_id is None
    assert len(fake.jobs_for(attempt_id)) == (1 if fault == UNKNOWN_AFTER else 0)
    assert task(db, t).state == TaskState.SCHEDULED.value  # capacity stays reserved


def test_a_stale_leader_does_not_launch(service: Service, tmp_path: Path) -> None:
    db, fake = service.db, FakeSlurm()
    old = lead(db, "old")
    with db.session() as session:
        session.execute(
            update(LeaderLease).where(LeaderLease.name == LEASE_NAME).values(expires_at=utcnow() - timedelta(seconds=1))
        )
    assert try_acquire(db, "new", 60) is not None
    _, (t,) = submit(service, training())
    attempt_id = place(db, t)
    with pytest.raises(NotLeader):
        _actuator(service, fake, tmp_path).launch_created(old, ActuationResult())
    assert fake.calls["submit"] == 0
    assert attempt(db, attempt_id).state == AttemptState.CREATED.value


def test_cancel_sends_scancel_once_then_throttles(service: Service, tmp_path: Path) -> None:
    db, fake = service.db, FakeSlurm()
    leadership = lead(db)
    _, (t,) = submit(service, training())
    attempt_id = place(db, t, state=AttemptState.RUNNING)
    actuator = _actuator(service, fake, tmp_path)
    job = fake.add_job(f"ms-{attempt_id}", f"metasched:attempt={attempt_id}:token=1")
    with db.session() as session:
        row = session.get(Attempt, attempt_id)
        row.slurm_job_id = str(job.job_id)
    service.cancel(task(db, t).job_id)
    assert attempt(db, attempt_id).state == AttemptState.STOPPING.value
    first, second = ActuationResult(), ActuationResult()
    actuator.stop_requested(leadership, first)
    actuator.stop_requested(leadership, second)
    assert first.cancelled == [attempt_id] and second.cancelled == []
    assert fake.cancels == [(str(job.job_id), None)]
    assert job.state == "CANCELLED"
    actuator.cancel_resend_s = 0.0  # the resend interval passed: scancel is idempotent, send again
    actuator.stop_requested(leadership, ActuationResult())
    assert fake.cancels == [(str(job.job_id), None)] * 2


def test_graceful_preempt_signals_usr1_first_and_cancels_only_after_grace(service: Service, tmp_path: Path) -> None:
    db, fake = service.db, FakeSlurm()
    leadership = lead(db)
    _, (t,) = submit(service, checkpointing())
    attempt_id = place(db, t, state=AttemptState.STOPPING, stop_reason="preempt", slurm_job_id="1000")
    fake.add_job(f"ms-{attempt_id}", f"metasched:attempt={attempt_id}:token=1")
    actuator = _actuator(service, fake, tmp_path, grace_s=60)
    first = ActuationResult()
    actuator.stop_requested(leadership, first)
    assert first.signalled == [attempt_id] and first.cancelled == []
    assert fake.cancels == [("1000", "USR1")]
    assert fake.jobs[1000].signals == ["USR1"] and fake.jobs[1000].state == "RUNNING"
    assert attempt(db, attempt_id).stop_signalled_at is not None
    again = ActuationResult()
    actuator.stop_requested(leadership, again)  # within the grace: neither a second USR1 nor scancel
    assert again.signalled == [] and again.cancelled == [] and len(fake.cancels) == 1
    with db.session() as session:
        session.get(Attempt, attempt_id).stop_signalled_at = utcnow() - timedelta(seconds=61)
    late = ActuationResult()
    actuator.stop_requested(leadership, late)
    assert late.cancelled == [attempt_id]
    assert fake.cancels[-1] == ("1000", None) and fake.jobs[1000].state == "CANCELLED"


def test_preempt_of_a_job_that_does_not_checkpoint_is_cancelled_at_once(service: Service, tmp_path: Path) -> None:
    db, fake = service.db, FakeSlurm()
    leadership = lead(db)
    _, (t,) = submit(service, training())
    attempt_id = place(db, t, state=AttemptState.STOPPING, stop_reason="preempt", slurm_job_id="1000")
    fake.add_job(f"ms-{attempt_id}")
    result = ActuationResult()
    _actuator(service, fake, tmp_path).stop_requested(leadership, result)
    assert result.signalled == [] and result.cancelled == [attempt_id]
    assert fake.cancels == [("1000", None)]


def test_stopping_attempt_without_a_slurm_id_is_left_to_the_reconciler(service: Service, tmp_path: Path) -> None:
    db, fake = service.db, FakeSlurm()
    leadership = lead(db)
    _, (t,) = submit(service, training())
    place(db, t, state=AttemptState.STOPPING)
    _actuator(service, fake, tmp_path).stop_requested(leadership, ActuationResult())
    assert fake.cancels == []


def test_a_failing_scancel_is_retried_next_pass(service: Service, tmp_path: Path) -> None:
    db, fake = service.db, FakeSlurm()
    leadership = lead(db)
    _, (t,) = submit(service, training())
    attempt_id = place(db, t, state=AttemptState.STOPPING, slurm_job_id="1000")
    fake.add_job(f"ms-{attempt_id}")
    actuator = _actuator(service, fake, tmp_path)
    fake.cancel_fault = SlurmTransient("slurmctld not responding")
    failed = ActuationResult()
    actuator.stop_requested(leadership, failed)
    assert failed.cancelled == [] and fake.jobs[1000].state == "RUNNING"
    fake.cancel_fault = None
    retried = ActuationResult()
    actuator.stop_requested(leadership, retried)  # not throttled: the first scancel never went out
    assert retried.cancelled == [attempt_id] and fake.jobs[1000].state == "CANCELLED"


def test_a_failed_checkpoint_signal_is_sent_again(service: Service, tmp_path: Path) -> None:
    db, fake = service.db, FakeSlurm()
    leadership = lead(db)
    _, (t,) = submit(service, checkpointing())
    attempt_id = place(db, t, state=AttemptState.STOPPING, stop_reason="preempt", slurm_job_id="1000")
    fake.add_job(f"ms-{attempt_id}")
    actuator = _actuator(service, fake, tmp_path, grace_s=60)
    fake.cancel_fault = SlurmTransient("slurmctld not responding")
    first = ActuationResult()
    actuator.stop_requested(leadership, first)
    assert first.signalled == []
    fake.cancel_fault = None
    second = ActuationResult()
    actuator.stop_requested(leadership, second)
    assert second.signalled == [attempt_id]
    assert fake.jobs[1000].signals == ["USR1"]
