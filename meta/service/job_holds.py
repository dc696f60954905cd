"""Holding and releasing waiting jobs (``metasched hold`` / ``release``, Slurm's ``scontrol hold/release``).

Who may: the job's owner, a coordinator of its tenant and admins (as for cancel). An admin's hold
is ``JobHeldAdmin``, anyone else's ``JobHeldUser``; only an admin releases an admin's hold
(Slurm's ``Access/permission denied``). Only a job that still has waiting tasks can be held
(Slurm's ``Job is no longer pending execution``); holding a held job or releasing a job that is not
held changes nothing and is not an error. Each change is audited (``job.hold``, ``job.release``).
The daemon reads ``jobs.hold`` every cycle (``meta/cycle/snapshot/gates.py``).
"""

from __future__ import annotations

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from meta.model.errors import Conflict, Forbidden
from meta.model.states import TaskState
from meta.store import audit
from meta.store.models import Job, Task
from tenants.identity import Principal

USER, ADMIN = "user", "admin"
NOT_PENDING = "Job is no longer pending execution"
PERMISSION_DENIED = "Access/permission denied"


def _waiting(session: Session, job: Job) -> bool:
    """_waiting tells whether the job has a task the scheduler has not placed yet."""
    return not job.cancel_requested and bool(
        session.scalar(select(exists().where(Task.job_id == job.id, Task.state == TaskState.PENDING.value)))
    )


def hold_job(session: Session, job: Job, principal: Principal) -> None:
    """hold_job holds a waiting job: an admin's hold by an admin, a user's hold otherwise."""
    if not _waiting(session, job):
        raise Conflict(f"{NOT_PENDING} (job {job.short_id})")
    level = ADMIN if principal.is_admin else USER
    if job.hold == level or job.hold == ADMIN:
        return  # already held as firmly: nothing changes
    job.hold = level
    job.version += 1
    audit.record(session, principal.name, "job.hold", job.short_id, tenant=job.tenant, hold=level)


def release_job(session: Session, job: Job, principal: Principal) -> None:
    """release_job lets a held job be scheduled; an admin's hold yields to admins only."""
    if job.hold is None:
        return
    if job.hold == ADMIN and not principal.is_admin:
        raise Forbidden(f"{PERMISSION_DENIED} (job {job.short_id} is held by an administrator)")
    was = job.hold
    job.hold = None
    job.version += 1
    audit.record(session, principal.name, "job.release", job.short_id, tenant=job.tenant, hold=was)
