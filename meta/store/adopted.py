"""Storing an adopted plain sbatch job: its job, spec and task rows, owned by its Slurm user, and its adopted_jobs row.

The same rows a submit writes (``meta.service.submission``), for one job whose owner is not the
caller but the Slurm job's user, plus the link to the Slurm job that makes adoption happen once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from meta.model.ids import new_short_job_id, new_uuid
from meta.model.spec import AnySpec, spec_hash, spec_to_json
from meta.model.states import TaskState
from meta.store.models import AdoptedJob, Job, JobSpecRow, Queue, Task, Tenant
from meta.store.upsert import insert_ignore


@dataclass(frozen=True)
class SlurmOwner:
    """SlurmOwner is who submitted the Slurm job (its UserId and GroupId) and where (its WorkDir)."""

    user: str
    uid: int
    gid: int
    work_dir: str | None


def store_adopted_job(
    session: Session,
    spec: AnySpec,
    owner: SlurmOwner,
    slurm_job_id: str,
    slurm_submitted_at: datetime,
    now: datetime,
) -> Job:
    """store_adopted_job writes the job (one pending task) and its adopted_jobs row; the unique key refuses a second adoption."""
    insert_ignore(session, Tenant, name=spec.tenant, weight=1.0, guaranteed={}, limits={}, created_at=now)
    insert_ignore(session, Queue, name=spec.queue, description="", created_at=now)
    job = Job(
        id=new_uuid(),
        short_id=new_short_job_id(),
        tenant=spec.tenant,
        queue=spec.queue,
        name=spec.name,
        kind=spec.kind.value,
        priority_class=spec.effective_priority_class().value,
        idempotency_key=f"slurm-job:{slurm_job_id}:{int(slurm_submitted_at.timestamp())}",
        submitted_by=owner.user,
        owner_uid=owner.uid,
        owner_gid=owner.gid,
        submit_dir=owner.work_dir,
        submitted_at=now,
        cancel_requested=False,
        version=1,
    )
    session.add(job)
    session.flush()
    session.add(JobSpecRow(job_id=job.id, spec_json=spec_to_json(spec), spec_hash=spec_hash(spec)))
    for index, name in enumerate(spec.task_names()):
        session.add(Task(id=new_uuid(), job_id=job.id, index=index, name=name, state=TaskState.PENDING.value,
                         version=1, fencing_counter=0, attempts_made=0, retry_base=0, reason="adopted from Slurm",
                         avoid_nodes=[], updated_at=now))  # fmt: skip
    session.add(AdoptedJob(job_id=job.id, slurm_job_id=slurm_job_id, slurm_submitted_at=slurm_submitted_at,
                           partition=spec.partition or "", adopted_at=now))  # fmt: skip
    session.flush()
    return job
