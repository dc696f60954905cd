"""For step 7 (snapshot), facts: the columns the leader's views read to describe a task or a live attempt.

Plain rows of these columns, not ORM objects: a new leader describes every waiting task and
every live attempt, and building 100,000 Task, Job and Attempt instances was most of its first
period. A job's row carries its spec's text, parsed once per job (``SpecCache.parsed``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.orm import Session

from meta.store.chunks import among, chunked
from meta.store.models import Attempt, Job, JobSpecRow, Task

JOB_FACTS = (Job.id, Job.tenant, Job.kind, Job.priority_class, Job.submitted_at, Job.short_id, JobSpecRow.spec_json)
TASK_FACTS = (Task.id, Task.job_id, Task.avoid_nodes, Task.attempts_made)
ATTEMPT_FACTS = (Attempt.id, Attempt.job_id, Attempt.task_id, Attempt.state, Attempt.placement, Attempt.started_at,
                 Attempt.created_at)  # fmt: skip


def read_jobs(session: Session, job_ids: Iterable[str], into: dict[str, Row[Any]]) -> None:
    """read_jobs adds the facts of the jobs ``into`` does not hold yet, read in ``IN`` lists (each job once)."""
    for chunk in chunked(sorted(set(job_ids).difference(into))):
        query = select(*JOB_FACTS).join(JobSpecRow, JobSpecRow.job_id == Job.id).where(among(session, Job.id, chunk))
        into.update((job.id, job) for job in session.execute(query))
