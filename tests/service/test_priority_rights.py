"""Priority is a right at submit (issue 21): a member's higher class or deadline is refused and nothing is stored.

On both backends: the refusal (sbatch's words, HTTP 403) comes before anything is written; a QOS of
the class's name in the member's association, the admin's per-tenant list, or being an admin lets
the same job through; the admin's list is set, shown, audited and cleared with ``tenant set``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from meta.model.errors import Forbidden, InvalidRequest
from meta.policy.priority_rights import INVALID_QOS
from meta.service.api import Service
from meta.service.http_errors import describe
from meta.service.priority_check import PriorityNotAllowed
from meta.service.submit_gate import SubmitGate
from meta.store import audit
from meta.store.models import Job, Task, Tenant
from tenants.identity import ADMIN, Principal, member
from tenants.quotas import admin_set_tenant, get_tenant
from tests.runtime.support import checkpointing, evaluation, inference, training

ALICE = member("alice", 2001, ["tenant-a"])
OSCAR = member("oscar", 2005, ["research"], admin=True)
DEADLINE = (datetime.now(UTC) + timedelta(hours=6)).isoformat()


def _stored(service: Service) -> tuple[int, int]:
    with service.db.session() as session:
        return (session.scalar(select(func.count()).select_from(Job)) or 0,
                session.scalar(select(func.count()).select_from(Task)) or 0)  # fmt: skip


def _allow(service: Service, tenant: str, classes: list[str], who: Principal = ADMIN) -> list[str]:
    with service.db.session() as session:
        return admin_set_tenant(session, who, tenant, priority_classes=classes).priority_classes


def _deadline_job(tenant: str = "tenant-a") -> object:
    return inference("/tmp/pr-out", "urgent", tenant, deadline=DEADLINE)


def _boosted_job(tenant: str = "tenant-a") -> object:
    return inference("/tmp/pr-out", "boosted", tenant, priority_class="inference-deadline")


def test_a_members_higher_class_is_refused_in_sbatchs_words_and_nothing_is_stored(service: Service) -> None:
    with pytest.raises(PriorityNotAllowed) as caught:
        service.submit(_boosted_job(), principal=ALICE)
    message = str(caught.value)
    assert message.startswith(f"{INVALID_QOS}: priority class inference-deadline") and "\n" not in message
    assert describe(caught.value)[0] == 403 and describe(caught.value)[1]["error"] == "PriorityNotAllowed"
    with pytest.raises(PriorityNotAllowed):  # a training job named into the deadline class: the same
        service.submit(checkpointing("t", "tenant-a", priority_class="inference-deadline"), principal=ALICE)
    with pytest.raises(PriorityNotAllowed):  # an evaluation asking for training's class
        service.submit(evaluation("e", "tenant-a", priority_class="training"), principal=ALICE)
    assert _stored(service) == (0, 0)


def test_a_members_deadline_is_refused_and_a_batch_stores_none_of_its_jobs(service: Service) -> None:
    with pytest.raises(PriorityNotAllowed) as caught:
        service.submit(_deadline_job(), principal=ALICE)
    assert str(caught.value).startswith("a deadline is not allowed for alice in tenant-a")
    with pytest.raises(PriorityNotAllowed):
        service.submit_many([evaluation("fine", "tenant-a"), _deadline_job()], principal=ALICE)
    assert _stored(service) == (0, 0)


def test_a_refused_submit_spends_nothing_of_the_tenants_submit_limits(service: Service) -> None:
    service.gate = SubmitGate(service.db, rate=1e-9, burst=1)  # one submit, then none for ages
    with pytest.raises(PriorityNotAllowed):
        service.submit(_deadline_job(), principal=ALICE)
    assert service.submit(
        evaluation("after", "tenant-a"), principal=ALICE
    ).created  # the one token was still there


def test_the_kinds_own_class_or_lower_needs_no_right(service: Service) -> None:
    jobs = [
        training("t", "tenant-a", priority_class="inference"),
        inference("/tmp/pr-out", "i", "tenant-a", priority_class="inference"),
        evaluation("e", "tenant-a", priority_class="evaluation"),
        inference("/tmp/pr-out", "plain", "tenant-a"),
    ]
    assert all(r.created for r in service.submit_many(jobs, principal=ALICE))
    assert _stored(service)[0] == 4


def test_a_qos_of_the_class_name_in_the_association_lets_it_through(service: Service) -> None:
    with_qos = member("alice", 2001, ["tenant-a"], qos=["normal", "inference-deadline"])
    assert service.submit(_boosted_job(), principal=with_qos).created
    assert service.submit(_deadline_job(), principal=with_qos).created
    other = member("bob", 2002, ["tenant-b"], qos=["normal", "high"])  # other QOS are no priority rights
    with pytest.raises(PriorityNotAllowed):
        service.submit(_deadline_job("tenant-b"), principal=other)
    assert _stored(service)[0] == 2


def test_the_admins_setting_for_the_tenant_lets_its_members_through(service: Service) -> None:
    assert _allow(service, "tenant-a", ["inference-deadline", "inference-deadline"]) == ["inference-deadline"]
    assert service.submit(_deadline_job(), principal=ALICE).created
    assert service.submit(_boosted_job(), principal=ALICE).created
    bob = member("bob", 2002, ["tenant-b"])
    with pytest.raises(PriorityNotAllowed):  # the setting is per tenant
        service.submit(_deadline_job("tenant-b"), principal=bob)
    assert get_tenant_classes(service, "tenant-a") == ["inference-deadline"]
    assert _allow(service, "tenant-a", []) == []  # cleared: refused again
    with pytest.raises(PriorityNotAllowed):
        service.submit(_deadline_job(), principal=ALICE)
    with service.db.session() as session:
        lines = [e for e in audit.read(session, limit=10) if e.action == "tenant.set"]
    assert [line.detail.get("priority_classes") for line in lines][:2] == [[], ["inference-deadline"]]


def get_tenant_classes(service: Service, name: str) -> list[str]:
    """get_tenant_classes is the tenant's allowed classes as ``tenant show`` reports them."""
    with service.db.session() as session:
        return get_tenant(session, name).priority_classes


def test_only_an_admin_sets_the_classes_and_only_known_names(service: Service) -> None:
    with pytest.raises(Forbidden, match="only an admin"):
        _allow(service, "tenant-a", ["inference-deadline"], who=ALICE)
    with pytest.raises(InvalidRequest, match="unknown priority class 'urgent'"):
        _allow(service, "tenant-a", ["urgent"])
    with service.db.session() as session:
        assert session.get(Tenant, "tenant-a") is None  # nothing was written


def test_admins_may_ask_for_any_class_and_a_deadline(service: Service) -> None:
    for admin in (ADMIN, OSCAR):
        assert service.submit(_deadline_job(), principal=admin).created
        assert service.submit(_boosted_job(), principal=admin).created
    assert _stored(service)[0] == 4


def test_a_qos_the_association_does_not_list_is_refused_as_sbatch_does(service: Service) -> None:
    """sbatch --qos=X is refused at submit when the association lacks X; metasched refuses it there too."""
    with_normal = member("alice", 2001, ["tenant-a"], qos=["normal"])
    asked_high = evaluation("e", "tenant-a").model_copy(update={"qos": "high"})
    with pytest.raises(PriorityNotAllowed) as caught:
        service.submit(asked_high, principal=with_normal)
    assert str(caught.value) == f"{INVALID_QOS}: QOS high is not in the association of alice in tenant-a"
    assert service.submit(evaluation("n", "tenant-a").model_copy(update={"qos": "normal"}), principal=with_normal).created
    assert service.submit(asked_high, principal=OSCAR).created  # an admin's QOS is Slurm's to check
    assert _stored(service)[0] == 2
