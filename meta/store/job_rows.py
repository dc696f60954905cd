"""Writing jobs: a job is its row, its spec row and its task rows, written here only (submit and adoption alike).

A batch writes the rows of all its jobs with one statement per table (COPY on PostgreSQL), so
1,000 jobs cost about what one job costs times the bytes, not 1,000 round trips each. The caller
(the service's submit, the daemon's adoption) has already validated and authorized the jobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from meta.model.ids import new_short_job_id, new_uuids
from meta.model.spec import AnySpec, spec_to_json
from meta.model.states import TaskState
from meta.store.bulk_insert import insert_sharing
from meta.store.models import Job, JobSpecRow, Queue, Task, Tenant
from meta.store.upsert import insert_ignore


@dataclass(frozen=True)
class JobOwner:
    """JobOwner is who a job runs as and where: the submitting caller, or an adopted Slurm job's user."""

    user: str
    uid: int | None
    gid: int | None
    submit_dir: str | None


@dataclass(frozen=True)
class JobToWrite:
    """JobToWrite is one job's own values: its spec, the spec's hash, its idempotency key and hold (None: not held)."""

    spec: AnySpec
    fingerprint: str
    key: str | None = None
    hold: str | None = None


def write_jobs(
    session: Session, jobs: Sequence[JobToWrite], owner: JobOwner, now: datetime, *, reason: str = "submitted"
) -> list[Job]:
    """write_jobs inserts the jobs (with their tenant and queue if new), specs and pending tasks; the Job rows, in order.

    ``reason`` is the tasks' first reason (``submitted``, ``adopted from Slurm``). The returned rows
    are not attached to the session (the insert bypassed the ORM).
    """
    if not jobs:
        return []
    for tenant in sorted({w.spec.tenant for w in jobs}):
        insert_ignore(session, Tenant, name=tenant, weight=1.0, guaranteed={}, limits={}, created_at=now)
    for queue in sorted({w.spec.queue for w in jobs}):
        insert_ignore(session, Queue, name=queue, description="", created_at=now)
    ids = new_uuids(len(jobs))
    rows = [_job_row(job_id, w) for job_id, w in zip(ids, jobs, strict=True)]
    shared = {
        "submitted_by": owner.user, "owner_uid": owner.uid, "owner_gid": owner.gid, "submit_dir": owner.submit_dir,
        "submitted_at": now, "cancel_requested": False, "version": 1,
    }  # fmt: skip
    insert_sharing(session, Job.__table__, rows, shared)
    specs = [{"job_id": job_id, "spec_json": spec_to_json(w.spec), "spec_hash": w.fingerprint}
             for job_id, w in zip(ids, jobs, strict=True)]  # fmt: skip
    insert_sharing(session, JobSpecRow.__table__, specs, {})
    names = [w.spec.task_names() for w in jobs]
    # ids ascending with the index: the policy breaks ties by task id, so a job's tasks (an array's
    # elements) start in index order, as Slurm starts an array's
    task_ids = iter(sorted(new_uuids(sum(len(n) for n in names))))
    tasks = [{"id": next(task_ids), "job_id": job_id, "index": index, "name": name}
             for job_id, job_names in zip(ids, names, strict=True) for index, name in enumerate(job_names)]  # fmt: skip
    insert_sharing(session, Task.__table__, tasks, {
        "state": TaskState.PENDING.value, "version": 1, "fencing_counter": 0, "attempts_made": 0,
        "retry_base": 0, "reason": reason, "avoid_nodes": [], "updated_at": now,
    })  # fmt: skip
    return [Job(**row, **shared) for row in rows]


def _job_row(job_id: str, job: JobToWrite) -> dict[str, Any]:
    """_job_row is the columns of one job that differ from its batch's (the rest are shared)."""
    spec = job.spec
    return {
        "id": job_id,
        "short_id": new_short_job_id(),
        "tenant": spec.tenant,
        "queue": spec.queue,
        "name": spec.name,
        "kind": spec.kind.value,
        "priority_class": spec.effective_priority_class().value,
        "idempotency_key": job.key,
        "hold": job.hold,
    }
