"""docs/identity.md §4 as a table: every operation × {owner, member, other tenant, coordinator, operator}.

The rules are Principal methods; the Service applies them (submit, status, list, cancel, retry),
on SQLite and PostgreSQL. Another tenant's job is NotFound; a member who may see a job but not
change it is Forbidden.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from meta.model.errors import Forbidden, InvalidRequest, NotFound
from meta.model.spec import spec_from_dict
from meta.service.api import Service
from meta.store import audit
from meta.store.models import Job
from tenants.identity import ADMIN, InvalidAccount, Principal, member

# the dev cluster's users (deploy/devcluster, docs/identity.md §7)
ALICE = member("alice", 2001, ["tenant-a"])  # owns the job below
CAROL = member("carol", 2003, ["tenant-a", "tenant-b"])
BOB = member("bob", 2002, ["tenant-b"])
DAVE = member("dave", 2004, ["tenant-a"], coordinates=["tenant-a"])
OSCAR = member("oscar", 2005, ["research"], admin=True)  # AdminLevel=Operator
CALLERS = {"owner": ALICE, "member": CAROL, "other tenant": BOB, "coordinator": DAVE, "operator": OSCAR}
OWNER_UID = ALICE.uid

# operation -> the callers allowed (a job of tenant-a owned by alice)
RULES: dict[str, set[str]] = {
    "submit to tenant-a": {"owner", "member", "coordinator", "operator"},
    "view the job": {"owner", "member", "coordinator", "operator"},
    "cancel or retry the job": {"owner", "coordinator", "operator"},
    "read the job's stored environment": {"owner", "operator"},  # as Slurm's batch script (issue 22, S7)
    "see tenant-a in lists": {"owner", "member", "coordinator", "operator"},
    "tenant set": {"operator"},
    "list secret names of tenant-a": {"owner", "member", "coordinator", "operator"},
    "set or delete a secret of tenant-a": {"coordinator", "operator"},
    "read tenant-a's audit lines": {"owner", "member", "coordinator", "operator"},
    "drain, resume or list a cluster": {"operator"},  # meta/service/cluster_drains.py (issue 26)
}
ADMIN_ONLY = ("tenant set", "drain, resume or list a cluster")  # not a tenant's business: --tenant narrows nothing


def _allowed(principal: Principal, operation: str) -> bool:
    tenant = "tenant-a"
    audit_tenants = principal.audit_tenants()
    visible = principal.visible_tenants()
    return {
        "submit to tenant-a": lambda: principal.may_submit(tenant),
        "view the job": lambda: principal.may_view_job(tenant),
        "cancel or retry the job": lambda: principal.may_act_on_job(tenant, OWNER_UID),
        "read the job's stored environment": lambda: principal.may_read_job_env(tenant, OWNER_UID),
        "see tenant-a in lists": lambda: visible is None or tenant in visible,
        "tenant set": principal.may_admin,
        "list secret names of tenant-a": lambda: principal.may_view_secret_names(tenant),
        "set or delete a secret of tenant-a": lambda: principal.may_manage_secrets(tenant),
        "read tenant-a's audit lines": lambda: audit_tenants is None or tenant in audit_tenants,
        "drain, resume or list a cluster": lambda: principal.is_admin,
    }[operation]()


@pytest.mark.parametrize("operation", list(RULES))
@pytest.mark.parametrize("caller", list(CALLERS))
def test_the_rules_table(operation: str, caller: str) -> None:
    assert _allowed(CALLERS[caller], operation) is (caller in RULES[operation])


@pytest.mark.parametrize("operation", list(RULES))
def test_acting_for_another_tenant_narrows_never_widens(operation: str) -> None:
    # carol acting for tenant-b sees nothing of tenant-a; oscar acting for research neither
    assert not _allowed(CAROL.scoped("tenant-b"), operation) or operation in ADMIN_ONLY
    assert _allowed(OSCAR.scoped("research"), operation) is (operation in ADMIN_ONLY)
    assert _allowed(DAVE.scoped("tenant-a"), operation) is ("coordinator" in RULES[operation])


def test_a_job_without_an_owner_is_changed_by_coordinators_and_admins_only() -> None:
    assert not ALICE.may_act_on_job("tenant-a", None)
    assert DAVE.may_act_on_job("tenant-a", None) and OSCAR.may_act_on_job("tenant-a", None)


def test_the_older_forms_keep_their_meaning() -> None:
    scoped = Principal("alice", "tenant-a")  # direct-to-store CLI with --tenant, and older tests
    assert scoped.may_act_on_job("tenant-a", None) and scoped.may_manage_secrets("tenant-a")
    assert not scoped.may_view_job("tenant-b") and not scoped.is_admin
    assert ADMIN.is_admin and ADMIN.may_act_on_job("tenant-x", 7) and ADMIN.visible_tenants() is None
    assert Principal(name="root").is_admin


# --- the Service applies them -------------------------------------------------------------------


def _eval(tenant: str = "tenant-a"):
    return spec_from_dict(
        {"kind": "evaluation", "name": "e", "tenant": tenant, "resources": {"gpus": 1}, "command": "true"}
    )


def test_submit_records_the_owner_and_refuses_a_foreign_tenant_in_sbatchs_words(service: Service) -> None:
    job = service.submit(_eval(), principal=ALICE).job
    with service.db.session() as session:
        row = session.get(Job, job.id)
        assert row is not None and (row.owner_uid, row.owner_gid, row.submitted_by) == (2001, 2001, "alice")
    with pytest.raises(InvalidAccount, match="Invalid account or account/partition combination specified"):
        service.submit(_eval(), principal=BOB)
    with pytest.raises(InvalidRequest):
        service.submit(_eval("tenant-b"), principal=CAROL.scoped("tenant-a"))
    assert service.submit(_eval("research"), principal=OSCAR).created  # an admin submits anywhere
    known = replace(OSCAR, account_exists={"tenant-a", "tenant-b", "research"}.__contains__)
    with pytest.raises(InvalidAccount, match="Invalid account or account/partition combination specified"):
        service.submit(_eval("nosuch"), principal=known)  # ... that Slurm has (principal_for says which)
    assert service.list_jobs(tenant="nosuch") == []
    with service.db.session() as session:
        assert session.get(Job, service.list_jobs(tenant="research")[0].id).owner_uid == 2005


@pytest.mark.parametrize(("caller", "outcome"), [
    ("owner", None), ("member", Forbidden), ("other tenant", NotFound), ("coordinator", None), ("operator", None)
])
def test_cancel_and_retry_by_caller(service: Service, caller: str, outcome: type[Exception] | None) -> None:
    job = service.submit(_eval(), principal=ALICE).job
    principal = CALLERS[caller]
    if outcome is None:
        assert service.cancel(job.short_id, principal=principal).cancel_requested
        assert service.retry(job.short_id, principal=principal)
        return
    with pytest.raises(outcome):
        service.cancel(job.short_id, principal=principal)
    with pytest.raises(outcome):
        service.retry(f"{job.short_id}/0", principal=principal)
    assert not service.status(job.short_id).cancel_requested


def test_a_member_sees_a_job_it_may_not_cancel_and_the_message_says_who_may(service: Service) -> None:
    job = service.submit(_eval(), principal=ALICE).job
    assert service.status(job.short_id, principal=CAROL).summary.id == job.id
    with pytest.raises(Forbidden) as caught:
        service.cancel(job.short_id, principal=CAROL)
    assert str(caught.value) == (
        f"only the owner of job {job.short_id} (alice), a coordinator of tenant-a or an admin may cancel it"
    )


def test_another_tenants_job_does_not_exist_for_the_caller(service: Service) -> None:
    job = service.submit(_eval(), principal=ALICE).job
    for ref in (job.short_id, job.id):
        with pytest.raises(NotFound, match=f"job {ref} not found"):
            service.status(ref, principal=BOB)
    with pytest.raises(NotFound):
        service.status(job.short_id, principal=CAROL.scoped("tenant-b"))


def test_lists_hold_the_callers_tenants(service: Service) -> None:
    a = service.submit(_eval("tenant-a"), principal=ALICE).job
    b = service.submit(_eval("tenant-b"), principal=BOB).job
    r = service.submit(_eval("research"), principal=OSCAR).job

    def ids(principal: Principal, tenant: str | None = None) -> set[str]:
        return {j.id for j in service.list_jobs(principal=principal, tenant=tenant)}

    assert ids(ALICE) == {a.id} and ids(BOB) == {b.id} and ids(CAROL) == {a.id, b.id}
    assert ids(CAROL, "tenant-b") == {b.id} and ids(CAROL.scoped("tenant-a")) == {a.id}
    assert ids(ALICE, "tenant-b") == set()
    assert ids(OSCAR) == {a.id, b.id, r.id} and ids(OSCAR.scoped("research")) == {r.id}
    assert ids(member("erin", 2010, [])) == set()


def test_audit_lines_follow_the_callers_tenants(service: Service) -> None:
    a = service.submit(_eval("tenant-a"), principal=ALICE).job
    b = service.submit(_eval("tenant-b"), principal=BOB).job
    service.cancel(a.short_id, principal=ALICE)
    service.cancel(b.short_id, principal=BOB)
    with service.db.session() as session:
        def subjects(principal: Principal) -> set[str]:
            return {e.subject for e in audit.read(session, tenants=principal.audit_tenants())}

        assert subjects(ALICE) == {a.short_id} and subjects(CAROL) == {a.short_id, b.short_id}
        assert subjects(OSCAR) == {a.short_id, b.short_id} and subjects(member("erin", 2010, [])) == set()


@pytest.mark.parametrize("caller", list(CALLERS))
def test_a_jobs_environment_is_shown_to_its_owner_and_admins_only(service: Service, caller: str) -> None:
    spec = _eval().model_copy(update={"env": {"GITHUB_TOKEN": "ghp_s7secret", "MSBATCH_SUBMIT_DIR": "/tmp"}})
    job = service.submit(spec, principal=ALICE).job
    principal = CALLERS[caller]
    if caller == "other tenant":
        with pytest.raises(NotFound):
            service.status(job.short_id, principal=principal)
        return
    shown = [service.status(job.short_id, principal=principal).to_dict()["spec"]]
    if RULES["cancel or retry the job"] >= {caller}:  # what cancel answers is a status too
        shown.append(service.cancel(job.short_id, principal=principal).to_dict()["spec"])
    for spec_seen in shown:
        if caller in RULES["read the job's stored environment"]:
            assert spec_seen["env"]["GITHUB_TOKEN"] == "ghp_s7secret"
        else:
            assert "ghp_s7secret" not in repr(spec_seen) and "GITHUB_TOKEN" not in repr(spec_seen)
            assert spec_seen["env"] == {} and spec_seen["env_hidden"] == 2
