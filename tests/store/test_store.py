"""Store and service tests, each run on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import select, text

from meta.model.errors import ConcurrentModification, Conflict, InvalidRequest, NotFound, StaleFencingToken
from meta.model.kinds import FailureCategory
from meta.model.spec import spec_from_dict
from meta.model.states import AttemptState, IllegalTransition, JobState, TaskState
from meta.service.api import Service
from meta.store.lifecycle import attempt_event, create_attempt
from meta.store.models import Attempt, JobSpecRow, Task, Transition
from meta.store.transitions import transition_attempt
from tenants.identity import Principal


def training(name: str = "t", tenant: str = "tenant-a", **extra: object):
    """training builds a small valid training spec."""
    data = {
        "kind": "training",
        "name": name,
        "tenant": tenant,
        "workers": 2,
        "resources": {"cpus": 4, "memory": "16Gi", "gpus": 8, "gpu_type": "a100"},
        "command": "python train.py",
        "retry": {"max_attempts": 2, "backoff": 0, "on": ["node_failure", "lost"]},
    }
    data.update(extra)
    return spec_from_dict(data)


def inference(partitions: int = 3, tenant: str = "tenant-b"):
    """inference builds a small valid inference spec."""
    return spec_from_dict(
        {
            "kind": "inference",
            "name": "inf",
            "tenant": tenant,
            "partitions": partitions,
            "resources": {"gpus": 1, "gpu_type": "t4"},
            "output": "/tmp/out",
            "command": "run",
        }
    )


def only_task(service: Service, job_ref: str) -> Task:
    """only_task returns the first task row of a job."""
    status = service.status(job_ref)
    with service.db.session() as session:
        task = session.get(Task, status.tasks[0].id)
        assert task is not None
        return task


def test_submit_is_idempotent_per_key(service: Service) -> None:
    first = service.submit(training(), "key-1")
    again = service.submit(training(), "key-1")
    assert first.created and not again.created
    assert first.job.id == again.job.id
    assert len(service.list_jobs()) == 1


def test_same_key_other_spec_conflicts(service: Service) -> None:
    service.submit(training(), "key-1")
    with pytest.raises(Conflict, match="different spec"):
        service.submit(training(workers=4), "key-1")


def test_keys_are_scoped_per_tenant(service: Service) -> None:
    a = service.submit(training(tenant="tenant-a"), "shared")
    b = service.submit(training(tenant="tenant-b"), "shared")
    assert a.job.id != b.job.id


def test_inference_expands_into_one_task_per_partition(service: Service) -> None:
    job = service.submit(inference(partitions=5)).job
    status = service.status(job.short_id)
    assert [t.index for t in status.tasks] == [0, 1, 2, 3, 4]
    assert status.state == JobState.PENDING


def test_spec_row_is_write_once(service: Service) -> None:
    job = service.submit(training()).job
    with pytest.raises(Exception, match="write-once"):
        with service.db.engine.begin() as connection:
            connection.execute(
                text("UPDATE job_specs SET spec_json = '{}' WHERE job_id = :id"), {"id": job.id}
            )
    with pytest.raises(Exception, match="write-once"):
        with service.db.session() as session:
            row = session.get(JobSpecRow, job.id)
            assert row is not None
            row.spec_hash = "tampered"
    assert service.status(job.id).spec["workers"] == 2


def test_job_identity_is_write_once_but_cancel_flag_is_not(service: Service) -> None:
    job = service.submit(training()).job
    with pytest.raises(Exception, match="write-once"):
        with service.db.engine.begin() as connection:
            connection.execute(text("UPDATE jobs SET tenant = 'other' WHERE id = :id"), {"id": job.id})
    service.cancel(job.id)
    assert service.status(job.id).cancel_requested


def test_transition_log_is_append_only(service: Service) -> None:
    job = service.submit(training()).job
    service.cancel(job.id)
    with pytest.raises(Exception, match="write-once"):
        with service.db.engine.begin() as connection:
            connection.execute(text("DELETE FROM transitions"))


def test_cancel_is_idempotent_and_retry_requeues(service: Service) -> None:
    job = service.submit(inference(partitions=2)).job
    assert service.cancel(job.short_id).state == JobState.CANCELLED
    assert service.cancel(job.short_id).state == JobState.CANCELLED
    retried = service.retry(job.short_id)
    assert [t.state for t in retried] == ["pending", "pending"]
    assert service.status(job.short_id).state == JobState.PENDING
    with pytest.raises(InvalidRequest, match="only failed or cancelled"):
        service.retry(job.short_id)


def test_retry_one_task_by_index(service: Service) -> None:
    job = service.submit(inference(partitions=3)).job
    service.cancel(job.short_id)
    retried = service.retry(f"{job.short_id}/1")
    assert [t.index for t in retried] == [1]
    states = [t.state for t in service.status(job.short_id).tasks]
    assert states == ["cancelled", "pending", "cancelled"]


def test_cancel_marks_live_attempts_for_stopping(service: Service) -> None:
    job = service.submit(training()).job
    task = only_task(service, job.id)
    with service.db.session() as session:
        attempt = create_attempt(session, task.id, "cycle-1", placement=[{"node": "a100n1"}])
        attempt_event(session, attempt.id, AttemptState.LAUNCHING, "launch-1")
        attempt_event(session, attempt.id, AttemptState.RUNNING, "seen-running")
    status = service.cancel(job.id)
    assert status.state == JobState.CANCELLING
    assert status.tasks[0].attempts[0].state == AttemptState.STOPPING
    with service.db.session() as session:
        row = session.scalar(select(Attempt).where(Attempt.task_id == task.id))
        assert row is not None and row.cancel_requested
        attempt_event(session, row.id, AttemptState.CANCELLED, "slurm-says-cancelled")
    assert service.status(job.id).state == JobState.CANCELLED


def test_same_stimulus_twice_is_a_noop_with_same_result(service: Service) -> None:
    job = service.submit(training()).job
    task = only_task(service, job.id)
    with service.db.session() as session:
        attempt = create_attempt(session, task.id, "cycle-1")
        first = attempt_event(session, attempt.id, AttemptState.LAUNCHING, "launch-1")
        second = attempt_event(session, attempt.id, AttemptState.LAUNCHING, "launch-1")
        assert first.applied and not second.applied
        assert (first.from_state, first.to_state) == (second.from_state, second.to_state)
        count = len(list(session.scalars(select(Transition).where(Transition.stimulus_id == "launch-1"))))
        assert count == 1  # the attempt moved once; its task was already scheduled


def test_illegal_transition_raises_typed_error(service: Service) -> None:
    job = service.submit(training()).job
    task = only_task(service, job.id)
    with pytest.raises(IllegalTransition):
        with service.db.session() as session:
            attempt = create_attempt(session, task.id, "cycle-1")
            attempt_event(session, attempt.id, AttemptState.SUCCEEDED, "bogus")


def test_compare_and_swap_rejects_wrong_expected_state(service: Service) -> None:
    job = service.submit(training()).job
    task = only_task(service, job.id)
    with service.db.session() as session:
        attempt = create_attempt(session, task.id, "cycle-1")
        attempt_id = attempt.id
    with pytest.raises(ConcurrentModification):
        with service.db.session() as session:
            transition_attempt(
                session, attempt_id, AttemptState.RUNNING, "x", expected=AttemptState.LAUNCHING
            )


def test_stale_fencing_token_is_rejected(service: Service) -> None:
    job = service.submit(training()).job
    task = only_task(service, job.id)
    with service.db.session() as session:
        first = create_attempt(session, task.id, "cycle-1", placement=[{"node": "a100n1"}])
        attempt_event(session, first.id, AttemptState.LAUNCHING, "l1")
        attempt_event(
            session, first.id, AttemptState.LOST, "lost-1", failure_category=FailureCategory.LOST
        )
        second = create_attempt(session, task.id, "cycle-2")
        assert second.fencing_token == first.fencing_token + 1
        first_id, first_token, second_id = first.id, first.fencing_token, second.id
    with pytest.raises(StaleFencingToken):
        with service.db.session() as session:
            transition_attempt(session, second_id, AttemptState.LAUNCHING, "late", fencing_token=first_token)
    assert first_id != second_id


def test_one_live_attempt_per_task(service: Service) -> None:
    job = service.submit(training()).job
    task = only_task(service, job.id)
    with service.db.session() as session:
        create_attempt(session, task.id, "cycle-1")
    with pytest.raises(Conflict):
        with service.db.session() as session:
            create_attempt(session, task.id, "cycle-2")


def test_database_refuses_a_second_live_attempt_directly(service: Service) -> None:
    job = service.submit(training()).job
    task = only_task(service, job.id)
    with service.db.session() as session:
        create_attempt(session, task.id, "cycle-1")
    with pytest.raises(Exception, match="(?i)unique|duplicate"):
        with service.db.engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO attempts (id, task_id, job_id, number, state, version, fencing_token,"
                    " placement, reason, cancel_requested, created_at, updated_at) VALUES"
                    " ('00000000-0000-0000-0000-000000000001', :t, :j, 9, 'running', 1, 9, '[]', '',"
                    " false, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                ),
                {"t": task.id, "j": job.id},
            )


def test_failure_retries_by_policy_then_fails(service: Service) -> None:
    job = service.submit(training()).job  # max_attempts 2, retries node_failure
    task = only_task(service, job.id)
    with service.db.session() as session:
        a1 = create_attempt(session, task.id, "c1", placement=[{"node": "a100n1"}, {"node": "a100n2"}])
        attempt_event(session, a1.id, AttemptState.LAUNCHING, "l1")
        attempt_event(
            session, a1.id, AttemptState.FAILED, "f1", failure_category=FailureCategory.NODE_FAILURE
        )
        row = session.get(Task, task.id, populate_existing=True)
        assert row is not None and row.state == TaskState.PENDING
        assert row.avoid_nodes == ["a100n1", "a100n2"]
        a2 = create_attempt(session, task.id, "c2")
        attempt_event(session, a2.id, AttemptState.LAUNCHING, "l2")
        attempt_event(
            session,
            a2.id,
            AttemptState.FAILED,
            "f2",
            failure_category=FailureCategory.USER_ERROR,
            values={"exit_code": 3},
        )
    status = service.status(job.id)
    assert status.state == JobState.FAILED
    assert [a.exit_code for a in status.tasks[0].attempts] == [None, 3]
    assert [a.fencing_token for a in status.tasks[0].attempts] == [1, 2]


def test_preemption_does_not_spend_retry_budget(service: Service) -> None:
    job = service.submit(training()).job  # max_attempts 2
    task = only_task(service, job.id)
    with service.db.session() as session:
        for n in range(4):
            attempt = create_attempt(session, task.id, f"c{n}")
            attempt_event(session, attempt.id, AttemptState.LAUNCHING, f"l{n}")
            attempt_event(session, attempt.id, AttemptState.RUNNING, f"r{n}")
            attempt_event(session, attempt.id, AttemptState.PREEMPTED, f"p{n}")
    status = service.status(job.id)
    assert status.tasks[0].state == TaskState.PENDING
    assert len(status.tasks[0].attempts) == 4


def test_tenants_never_see_each_other(service: Service) -> None:
    mine = service.submit(training(tenant="tenant-a")).job
    theirs = Principal(name="bob", tenant="tenant-b")
    with pytest.raises(NotFound):
        service.status(mine.short_id, principal=theirs)
    with pytest.raises(NotFound):
        service.cancel(mine.short_id, principal=theirs)
    with pytest.raises(NotFound):
        service.retry(mine.short_id, principal=theirs)
    assert service.list_jobs(principal=theirs) == []
    assert service.list_jobs(principal=theirs, tenant="tenant-a") == []
    with pytest.raises(InvalidRequest):
        service.submit(training(tenant="tenant-a"), principal=theirs)
    assert not service.status(mine.short_id).cancel_requested


def test_list_filters_by_state_and_tenant(service: Service) -> None:
    a = service.submit(training(tenant="tenant-a")).job
    service.submit(training(tenant="tenant-b"))
    service.cancel(a.id)
    assert [j.id for j in service.list_jobs(state=JobState.CANCELLED)] == [a.id]
    assert [j.tenant for j in service.list_jobs(tenant="tenant-b")] == ["tenant-b"]
