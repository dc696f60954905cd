"""check_invariants: a clean store reports nothing; each invariant catches a state built to violate it."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from meta.cycle.invariants import check_i4_idempotency, check_invariants
from meta.model.durations import utcnow
from meta.model.kinds import FailureCategory
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.model.spec import spec_from_dict
from meta.model.states import AttemptState
from meta.service.api import Service
from meta.store.lifecycle import attempt_event, create_attempt
from meta.store.models import Attempt, Job, PartitionCommit, Task, TenantUsage
from tests.conftest import sqlite_database

NODES = [
    NodeState("t4n1", ResourceVector(cpus=32, memory="250G", gpus=4, gpu_type="t4")),
    NodeState("a100n1", ResourceVector(cpus=32, memory="250G", gpus=8, gpu_type="a100")),
    NodeState("cpu1", ResourceVector(cpus=8, memory="16G")),
]


def _eval(tenant: str = "tenant-a", gpus: int = 1, retries: int = 1) -> dict[str, object]:
    return {
        "kind": "evaluation",
        "name": "eval",
        "tenant": tenant,
        "resources": {"cpus": 2, "memory": "4G", "gpus": gpus, "gpu_type": "t4" if gpus else None},
        "retry": {"max_attempts": retries, "backoff": 0, "on": ["user_error"]},
        "command": "true",
    }


def _share(node: str = "t4n1", cpus: float = 2, gpus: int = 1, gpu_type: str | None = "t4") -> dict:
    return {"node": node, "cpus": cpus, "memory_mib": 4096, "gpus": gpus, "gpu_type": gpu_type}


@pytest.fixture
def service(tmp_path: Path) -> Service:
    return Service(sqlite_database(tmp_path / "invariants.sqlite"))


def _task(service: Service, spec: dict[str, object], key: str | None = None) -> str:
    job = service.submit(spec_from_dict(spec), key).job
    with service.db.session() as session:
        job_id = session.scalar(select(Job.id).where(Job.short_id == job.short_id))
        return session.scalar(select(Task.id).where(Task.job_id == job_id))


def _attempt(
    service: Service, task_id: str, placement: list[dict], state: AttemptState, slurm_id: str | None
):
    """_attempt creates a live attempt and drives it to ``state`` the way the daemon does."""
    with service.db.session() as session:
        attempt = create_attempt(
            session, task_id, f"place:{task_id}:{utcnow().timestamp()}", placement=placement
        )
        attempt_id = attempt.id
        if state != AttemptState.CREATED:
            attempt_event(session, attempt_id, AttemptState.LAUNCHING, f"launch:{attempt_id}")
        if slurm_id is not None:
            session.execute(
                update(Attempt)
                .where(Attempt.id == attempt_id)
                .values(slurm_job_id=slurm_id, last_seen_at=utcnow())
            )
        if state == AttemptState.RUNNING:
            attempt_event(session, attempt_id, AttemptState.RUNNING, f"run:{attempt_id}")
        elif state not in (AttemptState.CREATED, AttemptState.LAUNCHING):
            attempt_event(
                session, attempt_id, state, f"end:{attempt_id}", failure_category=FailureCategory.USER_ERROR
            )
    return attempt_id


def _check(service: Service, **kwargs: object) -> list[str]:
    with service.db.session() as session:
        return check_invariants(session, **kwargs)


def _clean_store(service: Service) -> tuple[str, str]:
    """_clean_store: a running, a retried and a finished task, and an idempotent submit made twice."""
    running_task = _task(service, _eval(), key="k1")
    assert _task(service, _eval(), key="k1") == running_task  # same key: same job
    running = _attempt(service, running_task, [_share()], AttemptState.RUNNING, "101")
    retried_task = _task(service, _eval("tenant-b", gpus=0, retries=3))
    _attempt(service, retried_task, [_share("cpu1", gpus=0, gpu_type=None)], AttemptState.FAILED, "102")
    _attempt(service, retried_task, [_share("cpu1", gpus=0, gpu_type=None)], AttemptState.LAUNCHING, None)
    done_task = _task(service, _eval("tenant-b"))
    done = _attempt(service, done_task, [_share()], AttemptState.SUCCEEDED, "103")
    with service.db.session() as session:
        session.add(
            PartitionCommit(
                task_id=done_task,
                job_id="j",
                attempt_id=done,
                fencing_token=1,
                manifest={},
                committed_at=utcnow(),
            )
        )
    return running, retried_task


def test_clean_state_reports_nothing(service: Service) -> None:
    running, _ = _clean_store(service)
    assert _check(service, slurm_active_names={f"ms-{running}", "other-job"}, nodes=NODES) == []


def test_i1_commit_by_another_tasks_attempt_or_token(service: Service) -> None:
    task_a = _task(service, _eval())
    task_b = _task(service, _eval())
    attempt_b = _attempt(service, task_b, [_share()], AttemptState.SUCCEEDED, "1")
    with service.db.session() as session:
        session.add(
            PartitionCommit(
                task_id=task_a,
                job_id="j",
                attempt_id=attempt_b,
                fencing_token=1,
                manifest={},
                committed_at=utcnow(),
            )
        )
        session.add(
            PartitionCommit(
                task_id=task_b,
                job_id="j",
                attempt_id=attempt_b,
                fencing_token=7,
                manifest={},
                committed_at=utcnow(),
            )
        )
    problems = _check(service)
    assert any(p.startswith(f"I1: task {task_a} has a commit by attempt {attempt_b}") for p in problems)
    assert any(p.startswith(f"I1: task {task_b} commit carries token 7") for p in problems)
    assert len(problems) == 2


def test_i2_orphan_slurm_job(service: Service) -> None:
    task = _task(service, _eval())
    ended = _attempt(service, task, [_share()], AttemptState.FAILED, "5")
    problems = _check(service, slurm_active_names={f"ms-{ended}", "ms-never-existed", "someone-elses"})
    assert sorted(problems) == [
        f"I2: Slurm job ms-{ended} is active but its attempt is not live",
        "I2: Slurm job ms-never-existed is active but its attempt is not live",
    ]


def test_i2_running_attempt_without_slurm_job_past_grace(service: Service) -> None:
    task = _task(service, _eval())
    running = _attempt(service, task, [_share()], AttemptState.RUNNING, "7")
    later = utcnow() + timedelta(seconds=300)
    # Slurm shows the job: fine at any time
    assert _check(service, slurm_active_names={f"ms-{running}"}, now=later, grace_s=60) == []
    # Slurm does not show it: fine within the grace, a violation after it
    assert _check(service, slurm_active_names=set(), grace_s=60) == []
    problems = _check(service, slurm_active_names=set(), now=later, grace_s=60)
    assert len(problems) == 1 and problems[0].startswith(
        f"I2: attempt {running} is running without a Slurm job"
    )
    # and without any Slurm facts, a running attempt with no Slurm id at all
    with service.db.session() as session:
        session.execute(update(Attempt).where(Attempt.id == running).values(slurm_job_id=None))
    assert len(_check(service, now=later, grace_s=60)) == 1


def test_i3_token_not_increasing(service: Service) -> None:
    task = _task(service, _eval(retries=3))
    first = _attempt(service, task, [_share()], AttemptState.FAILED, "1")
    second = _attempt(service, task, [_share()], AttemptState.RUNNING, "2")
    assert _check(service) == []
    with service.db.session() as session:
        session.execute(update(Attempt).where(Attempt.id == first).values(fencing_token=5))
    problems = _check(service)
    assert problems[0] == f"I3: task {task} attempt 2 has token 2 <= attempt 1's 5"
    assert problems[1] == f"I3: task {task} counter 2 is below its token 5"
    assert second


def test_i4_duplicate_key_is_two_jobs() -> None:
    rows = [("tenant-a", "k", "job-1"), ("tenant-a", "k", "job-2"), ("tenant-b", "k", "job-3")]
    assert check_i4_idempotency(rows) == ["I4: tenant tenant-a key 'k' is 2 jobs: ['job-1', 'job-2']"]
    assert check_i4_idempotency(rows[:1] + rows[2:]) == []


def test_i4_store_refuses_a_second_job_for_a_key(service: Service) -> None:
    _task(service, _eval(), key="once")
    with pytest.raises(IntegrityError), service.db.session() as session:
        job = session.scalar(select(Job).where(Job.idempotency_key == "once"))
        session.add(
            Job(
                id="dup",
                short_id="dup",
                tenant=job.tenant,
                queue=job.queue,
                name="x",
                kind=job.kind,
                priority_class=job.priority_class,
                idempotency_key="once",
                submitted_at=utcnow(),
            )
        )
        session.flush()
    assert _check(service) == []


def test_i5_over_capacity_wrong_type_unknown_node(service: Service) -> None:
    tasks = [_task(service, _eval(gpus=2)) for _ in range(3)]
    _attempt(service, tasks[0], [_share("t4n1", cpus=20, gpus=3)], AttemptState.RUNNING, "1")
    _attempt(
        service,
        tasks[1],
        [_share("t4n1", cpus=20, gpus=2), _share("a100n1", gpus=1)],
        AttemptState.LAUNCHING,
        "2",
    )
    assert _check(service, nodes=NODES)[:2] == [
        "I5: node a100n1 has 1 t4 GPUs reserved, it has a100",
        "I5: node t4n1 has 40 cpus reserved, allocatable 32",
    ]
    assert "I5: node t4n1 has 5 gpus reserved, allocatable 4" in _check(service, nodes=NODES)
    _attempt(service, tasks[2], [_share("gone", gpus=0)], AttemptState.CREATED, None)
    assert "I5: live attempts are placed on unknown node gone" in _check(service, nodes=NODES)


def test_i5_ended_attempts_free_their_capacity(service: Service) -> None:
    tasks = [_task(service, _eval(gpus=4)) for _ in range(2)]
    _attempt(service, tasks[0], [_share("t4n1", gpus=4)], AttemptState.SUCCEEDED, "1")
    _attempt(service, tasks[1], [_share("t4n1", gpus=4)], AttemptState.RUNNING, "2")
    assert _check(service, nodes=NODES) == []


def test_i6_usage_attributed_to_the_wrong_tenant(service: Service) -> None:
    task_a = _task(service, _eval("tenant-a", gpus=2))
    task_b = _task(service, _eval("tenant-b", gpus=0))
    attempt = _attempt(service, task_a, [_share(gpus=2)], AttemptState.RUNNING, "1")
    with service.db.session() as session:
        job_b = session.scalar(select(Task.job_id).where(Task.id == task_b))
        session.execute(update(Attempt).where(Attempt.id == attempt).values(job_id=job_b))
    assert sorted(_check(service)) == [
        "I6: tenant tenant-a holds 2 GPUs in live attempts, usage counts 0",
        "I6: tenant tenant-b holds 0 GPUs in live attempts, usage counts 2",
    ]


def test_i6_negative_usage(service: Service) -> None:
    _task(service, _eval())
    with service.db.session() as session:
        session.add(TenantUsage(tenant="tenant-a", decayed_gpu_seconds=-1.0, updated_at=utcnow()))
    assert _check(service) == ["I6: tenant tenant-a has negative usage -1"]
