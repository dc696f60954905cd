"""Storing submitted jobs: one job or a batch, in a few multi-row statements whatever the count.

A job is its row, its spec row and its task rows. A batch writes the rows of all its jobs with
one statement per table (COPY on PostgreSQL), so 1,000 jobs cost about what one job costs times
the bytes, not 1,000 round trips each. Idempotency keys are looked up in one query for the
whole batch: a key that names a stored job with the same spec answers that job (not created),
a different spec is a Conflict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from meta.model.errors import Conflict
from meta.model.ids import new_short_job_id, new_uuids
from meta.model.spec import AnySpec, spec_to_json
from meta.model.states import TaskState
from meta.service.dependency_check import check_dependencies
from meta.service.views import JobSummary, task_counts
from meta.store.bulk_insert import insert_sharing
from meta.store.chunks import chunked
from meta.store.models import Job, JobSpecRow, Queue, Task, Tenant
from meta.store.upsert import insert_ignore
from tenants.identity import Principal

_IN_CHUNK = 500  # (tenant, key) pairs per lookup: two parameters each, well under SQLite's bound


@dataclass(frozen=True)
class NewJob:
    """NewJob is one job to store: its spec, the spec's hash and its idempotency key (or None)."""

    spec: AnySpec
    fingerprint: str
    key: str | None = None


@dataclass(frozen=True)
class Stored:
    """Stored is the job a submit landed on and whether this call created it."""

    job: JobSummary
    created: bool


def store_jobs(
    session: Session, wanted: Sequence[NewJob], principal: Principal, submit_dir: str | None, now: datetime
) -> list[Stored]:
    """store_jobs stores every job not already stored under its key; results follow ``wanted``'s order."""
    existing = _existing(session, [w for w in wanted if w.key is not None])
    results: list[Stored | None] = [None] * len(wanted)
    fresh: list[tuple[int, NewJob]] = []
    for index, item in enumerate(wanted):
        found = existing.get((item.spec.tenant, item.key)) if item.key is not None else None
        if found is None:
            fresh.append((index, item))
            continue
        job, fingerprint, states = found
        if fingerprint != item.fingerprint:
            raise Conflict(f"idempotency key {item.key!r} was already used by job {job.short_id} with a different spec")
        results[index] = Stored(JobSummary.of_counts(job, states), created=False)
    for index, job in zip((i for i, _ in fresh), _insert(session, [w for _, w in fresh], principal, submit_dir, now), strict=True):
        results[index] = job
    return [r for r in results if r is not None]


def _existing(session: Session, keyed: Sequence[NewJob]) -> dict[tuple[str, str | None], tuple[Job, str, dict[str, int]]]:
    """_existing finds the stored jobs of these (tenant, key) pairs with their spec hash and task counts."""
    pairs = sorted({(w.spec.tenant, w.key) for w in keyed})
    found: dict[tuple[str, str | None], tuple[Job, str, dict[str, int]]] = {}
    for chunk in chunked(pairs, _IN_CHUNK):
        jobs = list(session.scalars(select(Job).where(tuple_(Job.tenant, Job.idempotency_key).in_(chunk))))
        counts = task_counts(session, [job.id for job in jobs])
        for job in jobs:
            found[(job.tenant, job.idempotency_key)] = (job, job.spec_row.spec_hash, counts[job.id])
    return found


def _insert(
    session: Session, wanted: Sequence[NewJob], principal: Principal, submit_dir: str | None, now: datetime
) -> list[Stored]:
    """_insert writes the jobs, their specs and their tasks with one statement per table."""
    if not wanted:
        return []
    check_dependencies(session, [w.spec for w in wanted], principal)
    for tenant in sorted({w.spec.tenant for w in wanted}):
        insert_ignore(session, Tenant, name=tenant, weight=1.0, guaranteed={}, limits={}, created_at=now)
    for queue in sorted({w.spec.queue for w in wanted}):
        insert_ignore(session, Queue, name=queue, description="", created_at=now)
    ids = new_uuids(len(wanted))
    jobs = [_job_row(job_id, w, principal, submit_dir, now) for job_id, w in zip(ids, wanted, strict=True)]
    insert_sharing(session, Job.__table__, jobs, {
        "submitted_by": principal.name, "owner_uid": principal.uid, "owner_gid": principal.gid,
        "submit_dir": submit_dir, "submitted_at": now, "cancel_requested": False, "version": 1,
    })  # fmt: skip
    specs = [{"job_id": job_id, "spec_json": spec_to_json(w.spec), "spec_hash": w.fingerprint}
             for job_id, w in zip(ids, wanted, strict=True)]  # fmt: skip
    insert_sharing(session, JobSpecRow.__table__, specs, {})
    names = [w.spec.task_names() for w in wanted]
    # ids ascending with the index: the policy breaks ties by task id, so a job's tasks (an array's
    # elements) start in index order, as Slurm starts an array's
    task_ids = iter(sorted(new_uuids(sum(len(n) for n in names))))
    tasks = [{"id": next(task_ids), "job_id": job_id, "index": index, "name": name}
             for job_id, job_names in zip(ids, names, strict=True) for index, name in enumerate(job_names)]  # fmt: skip
    insert_sharing(session, Task.__table__, tasks, {
        "state": TaskState.PENDING.value, "version": 1, "fencing_counter": 0, "attempts_made": 0,
        "retry_base": 0, "reason": "submitted", "avoid_nodes": [], "updated_at": now,
    })  # fmt: skip
    stored = [Job(**row, submitted_at=now, cancel_requested=False) for row in jobs]
    return [Stored(JobSummary.of_counts(job, {TaskState.PENDING.value: len(n)}), created=True)
            for job, n in zip(stored, names, strict=True)]  # fmt: skip


def _job_row(job_id: str, wanted: NewJob, principal: Principal, submit_dir: str | None, now: datetime) -> dict[str, Any]:
    """_job_row is the columns of one job that differ from its batch's (the rest are shared)."""
    spec = wanted.spec
    return {
        "id": job_id,
        "short_id": new_short_job_id(),
        "tenant": spec.tenant,
        "queue": spec.queue,
        "name": spec.name,
        "kind": spec.kind.value,
        "priority_class": spec.effective_priority_class().value,
        "idempotency_key": wanted.key,
        # submitted held (--hold): by an admin it is an admin's hold, as under Slurm
        "hold": ("admin" if principal.may_admin() else "user") if spec.hold else None,
    }
