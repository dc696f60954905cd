"""Submit-time check of ``--dependency``: every job it names exists and the caller may see it.

A job another tenant owns, or none at all, is refused with sbatch's words (``Job dependency
problem``) and nothing else, so the answer never tells whether a job the caller may not see
exists. Whether a dependency is satisfied is decided every cycle (``meta/cycle/snapshot/gates.py``).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from meta.model.errors import DependencyProblem
from meta.model.spec import AnySpec
from meta.store.models import Job
from tenants.identity import Principal


def check_dependencies(session: Session, specs: Iterable[AnySpec], principal: Principal) -> None:
    """check_dependencies refuses a dependency on a job that is unknown or invisible to ``principal``."""
    refs = sorted({ref for spec in specs if (dep := spec.parsed_dependency()) for ref in dep.jobs()})
    if not refs:
        return
    tenants: dict[str, str] = {}
    rows = session.execute(select(Job.id, Job.short_id, Job.tenant).where(or_(Job.short_id.in_(refs), Job.id.in_(refs))))
    for job_id, short_id, tenant in rows:
        tenants[job_id] = tenants[short_id] = tenant
    for ref in refs:
        if ref not in tenants or not principal.may_view_job(tenants[ref]):
            raise DependencyProblem()
