"""Shared helpers for runtime unit tests: specs, submitted jobs, attempts in a chosen state, leadership."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select

from meta.cycle.daemon import Daemon, PeriodReport
from meta.cycle.lease import Leadership, try_acquire
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.model.spec import AnySpec, spec_from_dict
from meta.model.states import AttemptState
from meta.service.api import Service
from meta.store.db import Database
from meta.store.lifecycle import attempt_event, create_attempt
from meta.store.models import Attempt, Task

RES = {"cpus": 4, "memory": "16G", "gpus": 2, "gpu_type": "a100"}


def training(name: str = "train", tenant: str = "acme", **fields: Any) -> AnySpec:
    """training is a training spec (1 worker × 2 A100 unless overridden)."""
    data: dict[str, Any] = {
        "kind": "training",
        "name": name,
        "tenant": tenant,
        "command": "python train.py",
        "resources": dict(RES),
    }
    data.update(fields)
    return spec_from_dict(data)


def checkpointing(name: str = "ckpt", tenant: str = "acme", ckpt_dir: str = "/tmp/ms-ckpt", **fields: Any) -> AnySpec:
    """checkpointing is a preemptible training spec with a checkpoint section."""
    return training(name, tenant, checkpoint={"dir": ckpt_dir, "interval": "10m"}, preemptible=True, **fields)


def inference(output: str, name: str = "infer", tenant: str = "acme", **fields: Any) -> AnySpec:
    """inference is a batch inference spec over 2 partitions writing under ``output``."""
    data: dict[str, Any] = {
        "kind": "inference",
        "name": name,
        "tenant": tenant,
        "command": "python infer.py",
        "partitions": 2,
        "output": output,
        "resources": {"cpus": 2, "memory": "8G", "gpus": 1, "gpu_type": "a100"},
    }
    data.update(fields)
    return spec_from_dict(data)


def evaluation(name: str = "eval", tenant: str = "acme", **fields: Any) -> AnySpec:
    """evaluation is a one-task evaluation spec on 1 A100."""
    data: dict[str, Any] = {
        "kind": "evaluation",
        "name": name,
        "tenant": tenant,
        "command": "python eval.py",
        "resources": {"cpus": 2, "memory": "8G", "gpus": 1, "gpu_type": "a100"},
    }
    data.update(fields)
    return spec_from_dict(data)


def submit(service: Service, spec: AnySpec) -> tuple[str, list[str]]:
    """submit stores a job and returns its id and its task ids in index order."""
    job_id = service.submit(spec).job.id
    with service.db.session() as session:
        tasks = list(session.scalars(select(Task.id).where(Task.job_id == job_id).order_by(Task.index)))
    return job_id, tasks


def share(node: str, gpus: int = 2, gpu_type: str | None = "a100", cpus: float = 4, memory_mib: int = 16384) -> dict:
    """share is one worker's stored node share."""
    return {
        "node": node,
        "cpus": cpus,
        "memory_mib": memory_mib,
        "gpus": gpus,
        "gpu_type": gpu_type,
        "storage_gib": 0,
        "network": None,
    }


_PATH = {
    AttemptState.CREATED: [],
    AttemptState.LAUNCHING: [AttemptState.LAUNCHING],
    AttemptState.LAUNCH_UNKNOWN: [AttemptState.LAUNCHING, AttemptState.LAUNCH_UNKNOWN],
    AttemptState.RUNNING: [AttemptState.LAUNCHING, AttemptState.RUNNING],
    AttemptState.STOPPING: [AttemptState.LAUNCHING, AttemptState.RUNNING, AttemptState.STOPPING],
    AttemptState.SUCCEEDED: [AttemptState.LAUNCHING, AttemptState.RUNNING, AttemptState.SUCCEEDED],
}


def place(
    db: Database,
    task_id: str,
    shares: Sequence[dict] | None = None,
    state: AttemptState = AttemptState.CREATED,
    *,
    slurm_job_id: str | None = None,
    values: dict[str, Any] | None = None,
    stop_reason: str | None = None,
) -> str:
    """place creates an attempt for a pending task and walks it to ``state``; returns its id."""
    with db.session() as session:
        # one stimulus per placement: a task placed again (after a retry) is a new event, not a replay of the first
        stimulus = f"test:place:{task_id}:{uuid.uuid4().hex}"
        attempt = create_attempt(session, task_id, stimulus, placement=list(shares or [share("node1")]))
        attempt_id = attempt.id
        for i, target in enumerate(_PATH[state]):
            extra: dict[str, Any] = {}
            if target == AttemptState.STOPPING:
                extra["stop_reason"] = stop_reason or "cancel"
            attempt_event(session, attempt_id, target, f"test:{attempt_id}:{i}", actor="test", values=extra)
        changes = dict(values or {})
        if slurm_job_id is not None:
            changes["slurm_job_id"] = slurm_job_id
        if changes:
            row = session.get(Attempt, attempt_id, populate_existing=True)
            for key, value in changes.items():
                setattr(row, key, value)
    return attempt_id


def attempt(db: Database, attempt_id: str) -> Attempt:
    """attempt reads an attempt row (detached)."""
    with db.session() as session:
        row = session.get(Attempt, attempt_id)
        assert row is not None
        return row


def task(db: Database, task_id: str) -> Task:
    """task reads a task row (detached)."""
    with db.session() as session:
        row = session.get(Task, task_id)
        assert row is not None
        return row


def attempts_of(db: Database, task_id: str) -> list[Attempt]:
    """attempts_of lists a task's attempts by number."""
    with db.session() as session:
        return list(session.scalars(select(Attempt).where(Attempt.task_id == task_id).order_by(Attempt.number)))


def lead(db: Database, holder: str = "test-leader", lease_s: float = 60.0) -> Leadership:
    """lead takes the leader lease (it must be free)."""
    leadership = try_acquire(db, holder, lease_s)
    assert leadership is not None
    return leadership


def node_state(name: str, gpus: int = 8, gpu_type: str = "a100", *, drained: bool = False, healthy: bool = True) -> NodeState:
    """node_state is a scheduler NodeState of a GPU node (64 cpus, 512 GiB)."""
    capacity = ResourceVector(cpus=64, memory=512 * 1024, gpus=gpus, gpu_type=gpu_type)
    return NodeState(name, capacity, ("gpu",), None, healthy, drained)


def settled(daemon: Daemon, timeout_s: float = 30.0) -> PeriodReport:
    """settled runs one daemon period and waits for the launches it streamed behind it (their count in ``launched``).

    The period itself never waits for sbatch; tests that look at Slurm or at attempt states right
    after a period wait here, so what they see does not depend on thread timing.
    """
    report = daemon.period()
    assert daemon.settle_launches(timeout_s), "the launch pool did not finish in time"
    report.launched += len(daemon.launches.progress().launched)
    return report
