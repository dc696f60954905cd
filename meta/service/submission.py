"""Submitting jobs: one job or a batch; the store writes the rows (``meta.store.job_rows``), this keeps the checks.

Idempotency keys are looked up in one query for the whole batch: a key that names a stored job
with the same spec answers that job (not created), a different spec is a Conflict. New jobs have
their dependencies checked for the caller, then are written in one statement per table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from meta.model.errors import Conflict
from meta.model.spec import AnySpec
from meta.model.states import TaskState
from meta.service.dependency_check import check_dependencies
from meta.service.views import JobSummary, task_counts
from meta.store.chunks import chunked
from meta.store.job_rows import JobOwner, JobToWrite, write_jobs
from meta.store.models import Job
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
    """_insert checks the jobs' dependencies, then has the store write them (meta.store.job_rows), owned by the caller."""
    if not wanted:
        return []
    check_dependencies(session, [w.spec for w in wanted], principal)
    # submitted held (--hold): by an admin it is an admin's hold, as under Slurm
    hold = "admin" if principal.may_admin() else "user"
    rows = [JobToWrite(w.spec, w.fingerprint, w.key, hold if w.spec.hold else None) for w in wanted]
    owner = JobOwner(principal.name, principal.uid, principal.gid, submit_dir)
    jobs = write_jobs(session, rows, owner, now)
    return [Stored(JobSummary.of_counts(job, {TaskState.PENDING.value: len(w.spec.task_names())}), created=True)
            for job, w in zip(jobs, wanted, strict=True)]  # fmt: skip
