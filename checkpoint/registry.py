"""Checkpoint registry: training jobs report checkpoints, fenced by their attempt's token.

The newest checkpoint of a task is where its next attempt resumes (``METASCHED_RESUME_FROM``)
and what prices its preemption (GPU-seconds since the last checkpoint plus restore cost).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from checkpoint.fencing import current_attempt
from meta.model.durations import utcnow
from meta.model.errors import InvalidRequest
from meta.store import audit
from meta.store.models import Attempt, Checkpoint, Job, Task


@dataclass(frozen=True)
class CheckpointView:
    """CheckpointView is one reported checkpoint."""

    task_id: str
    attempt_id: str
    step: int
    path: str
    size_bytes: int | None
    duration_s: float | None
    at: datetime


def report(
    session: Session,
    attempt_id: str,
    token: int,
    step: int,
    path: str,
    *,
    size_bytes: int | None = None,
    duration_s: float | None = None,
    now: datetime | None = None,
    actor: str = "job",
) -> CheckpointView:
    """report records (and audits) a checkpoint of the attempt's task; a stale attempt's report is rejected."""
    if step < 0:
        raise InvalidRequest("a checkpoint step must not be negative")
    if not path:
        raise InvalidRequest("a checkpoint needs a path")
    moment = now or utcnow()
    # a job may checkpoint while it is being stopped (that is what USR1 asks for), so the lease
    # is not required here; the token and "current attempt" checks are
    attempt = current_attempt(session, attempt_id, token, moment, need_lease=False)
    row = Checkpoint(
        task_id=attempt.task_id,
        attempt_id=attempt.id,
        fencing_token=token,
        step=step,
        path=path,
        size_bytes=size_bytes,
        duration_s=duration_s,
        at=moment,
    )
    session.add(row)
    session.flush()
    _audit_report(session, actor, attempt, row)
    return _view(row)


def _audit_report(session: Session, actor: str, attempt: Attempt, row: Checkpoint) -> None:
    """_audit_report records one checkpoint report: ids and the step only."""
    job = session.get(Job, attempt.job_id)
    task = session.get(Task, attempt.task_id)
    assert job is not None and task is not None
    audit.record(
        session,
        actor,
        "checkpoint.report",
        job.short_id,
        tenant=job.tenant,
        task=task.index,
        attempt=attempt.id,
        fencing_token=row.fencing_token,
        step=row.step,
    )


def latest(session: Session, task_id: str) -> CheckpointView | None:
    """latest is the task's checkpoint with the highest step (ties: the newest)."""
    row = session.scalar(
        select(Checkpoint)
        .where(Checkpoint.task_id == task_id)
        .order_by(Checkpoint.step.desc(), Checkpoint.at.desc())
        .limit(1)
    )
    return _view(row) if row else None


def history(session: Session, task_id: str) -> list[CheckpointView]:
    """history lists a task's checkpoints, oldest first."""
    rows = session.scalars(select(Checkpoint).where(Checkpoint.task_id == task_id).order_by(Checkpoint.at))
    return [_view(r) for r in rows]


def _view(row: Checkpoint) -> CheckpointView:
    return CheckpointView(row.task_id, row.attempt_id, row.step, row.path, row.size_bytes, row.duration_s, row.at)
