"""Submit-time dependency checks and hold/release through the service: who may, what is refused, what is audited."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from meta.model.errors import Conflict, DependencyProblem, Forbidden, NotFound
from meta.model.spec import spec_from_dict
from meta.service.api import Service
from meta.store.models import AuditEvent, Job
from tenants.identity import member

ALICE = member("alice", 2001, ["tenant-a"])
CAROL = member("carol", 2003, ["tenant-a", "tenant-b"])  # a member, not the owner
DAVE = member("dave", 2004, ["tenant-a"], coordinates=["tenant-a"])
BOB = member("bob", 2002, ["tenant-b"])
OSCAR = member("oscar", 2005, ["research"], admin=True)


def spec(tenant: str = "tenant-a", **fields: object):  # noqa: ANN201 - a spec of any kind
    return spec_from_dict({"kind": "training", "name": "n", "tenant": tenant, "command": "true",
                           "resources": {"cpus": 1}, **fields})  # fmt: skip


def hold_of(service: Service, short_id: str) -> str | None:
    with service.db.session() as session:
        return session.scalar(select(Job.hold).where(Job.short_id == short_id))


def test_a_dependency_on_an_unknown_or_invisible_job_is_sbatchs_job_dependency_problem(service: Service) -> None:
    theirs = service.submit(spec("tenant-b"), principal=BOB).job.short_id
    mine = service.submit(spec(), principal=ALICE).job
    for ref in ("jzzzzzzzz", theirs):
        with pytest.raises(DependencyProblem, match="^Job dependency problem$"):
            service.submit(spec(dependency=f"afterok:{mine.short_id}:{ref}"), principal=ALICE)
    # a member sees the tenant's jobs: carol may chain on alice's job, by short id or full id
    chained = service.submit(spec(dependency=f"afterok:{mine.short_id},afterany:{mine.id}"), principal=CAROL)
    assert chained.created
    # bob's own job, for bob: fine
    assert service.submit(spec("tenant-b", dependency=f"after:{theirs}+1"), principal=BOB).created


def test_hold_at_submit_is_a_users_hold_and_an_admins_for_admins(service: Service) -> None:
    assert hold_of(service, service.submit(spec(hold=True), principal=ALICE).job.short_id) == "user"
    assert hold_of(service, service.submit(spec(hold=True), principal=OSCAR).job.short_id) == "admin"
    assert hold_of(service, service.submit(spec(), principal=ALICE).job.short_id) is None


def test_hold_and_release_follow_cancels_rights_and_admin_holds_yield_to_admins(service: Service) -> None:
    job = service.submit(spec(), principal=ALICE).job.short_id
    with pytest.raises(Forbidden, match="only the owner"):
        service.hold(job, principal=CAROL)
    with pytest.raises(NotFound):
        service.hold(job, principal=BOB)
    assert service.hold(job, principal=ALICE).summary.hold == "user"
    assert hold_of(service, job) == "user"
    service.hold(job, principal=ALICE)  # again: nothing changes
    service.release(job, principal=DAVE)  # a coordinator releases a user's hold
    assert hold_of(service, job) is None
    service.release(job, principal=DAVE)  # not held: nothing changes
    service.hold(job, principal=OSCAR)
    assert hold_of(service, job) == "admin"
    service.hold(job, principal=ALICE)  # a user's hold does not weaken an admin's
    assert hold_of(service, job) == "admin"
    with pytest.raises(Forbidden, match="Access/permission denied"):
        service.release(job, principal=ALICE)
    service.release(job, principal=OSCAR)
    assert hold_of(service, job) is None
    with service.db.session() as session:
        lines = [(e.actor, e.action, e.detail.get("hold"))
                 for e in session.scalars(select(AuditEvent).where(AuditEvent.subject == job).order_by(AuditEvent.id))]  # fmt: skip
    assert lines == [
        ("alice", "job.hold", "user"), ("dave", "job.release", "user"),
        ("oscar", "job.hold", "admin"), ("oscar", "job.release", "admin"),
    ]  # fmt: skip


def test_only_a_waiting_job_can_be_held(service: Service) -> None:
    job = service.submit(spec(), principal=ALICE).job.short_id
    service.cancel(job, principal=ALICE)
    with pytest.raises(Conflict, match="Job is no longer pending execution"):
        service.hold(job, principal=ALICE)
