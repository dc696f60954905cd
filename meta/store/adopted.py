"""Storing an adopted plain sbatch job: its job, spec and task rows, owned by its Slurm user, and its adopted_jobs row.

The job's rows are written as a submit's are (``meta.store.job_rows``), owned by the Slurm job's
user instead of a caller, plus the link to the Slurm job that makes adoption happen once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from meta.model.spec import AnySpec, spec_hash
from meta.store.job_rows import JobOwner, JobToWrite, write_jobs
from meta.store.models import AdoptedJob, Job


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
    key = f"slurm-job:{slurm_job_id}:{int(slurm_submitted_at.timestamp())}"
    (written,) = write_jobs(session, [JobToWrite(spec, spec_hash(spec), key)],
                            JobOwner(owner.user, owner.uid, owner.gid, owner.work_dir), now, reason="adopted from Slurm")  # fmt: skip
    session.add(AdoptedJob(job_id=written.id, slurm_job_id=slurm_job_id, slurm_submitted_at=slurm_submitted_at,
                           partition=spec.partition or "", adopted_at=now))  # fmt: skip
    session.flush()
    job = session.get(Job, written.id)  # the stored row, attached to the session as before
    assert job is not None
    return job
