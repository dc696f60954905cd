"""The submit-time check that priority is a right (``meta.policy.priority_rights``), before anything is stored.

A job asking for its kind's own class or lower, without a deadline, is never looked at further.
Otherwise the caller's rights in the job's tenant are its admin flag, the QOS its Slurm association
there allows (``Principal.qos_in``, read from sacctmgr) and the classes an admin allowed the tenant
(``tenants.priority_classes``, one read per submit only when a job needs them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import select

from meta.model.errors import Forbidden
from meta.model.spec import AnySpec, InferenceSpec
from meta.policy.config import DEFAULT_PRIORITY_CLASSES
from meta.policy.priority_rights import (
    PriorityRefusal,
    PriorityRequest,
    PriorityRights,
    needed_class,
    priority_refusal,
    qos_refusal,
)
from meta.store.db import Database
from meta.store.models import Tenant
from tenants.identity import Principal


class PriorityNotAllowed(Forbidden):
    """PriorityNotAllowed: a priority class or deadline the caller holds no right to (HTTP 403, msbatch exit 1)."""

    def __init__(self, refusal: PriorityRefusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


def request_of(spec: AnySpec) -> PriorityRequest:
    """request_of is what a spec asks for: its kind, the class it names and whether it has a deadline."""
    deadline = isinstance(spec, InferenceSpec) and spec.deadline is not None
    named = spec.priority_class.value if spec.priority_class is not None else None
    return PriorityRequest(kind=spec.kind, priority_class=named, has_deadline=deadline)


def check_priority(
    db: Database,
    principal: Principal,
    specs: Sequence[AnySpec],
    ranks: Mapping[str, int] = DEFAULT_PRIORITY_CLASSES,
) -> None:
    """check_priority raises PriorityNotAllowed for the first spec (in order) asking for a class, deadline or QOS without the right."""
    if not principal.is_admin:
        for spec in specs:
            rights = PriorityRights(qos=principal.qos_in(spec.tenant))
            refusal = qos_refusal(spec.qos, rights, user=principal.name, tenant=spec.tenant)
            if refusal is not None:
                raise PriorityNotAllowed(refusal)
    asking = [(spec, request_of(spec)) for spec in specs]
    asking = [(spec, request) for spec, request in asking if needed_class(request, ranks) is not None]
    if not asking or principal.is_admin:
        return
    allowed = _allowed_classes(db, {spec.tenant for spec, _ in asking})
    for spec, request in asking:
        rights = PriorityRights(
            admin=False,
            qos=principal.qos_in(spec.tenant),
            allowed_classes=allowed.get(spec.tenant, frozenset()),
        )
        refusal = priority_refusal(request, rights, user=principal.name, tenant=spec.tenant, ranks=ranks)
        if refusal is not None:
            raise PriorityNotAllowed(refusal)


def _allowed_classes(db: Database, tenants: set[str]) -> dict[str, frozenset[str]]:
    """_allowed_classes is the classes an admin allowed each of ``tenants`` (absent: none)."""
    with db.session() as session:
        rows = session.execute(
            select(Tenant.name, Tenant.priority_classes).where(Tenant.name.in_(sorted(tenants)))
        )
        return {name: frozenset(classes or ()) for name, classes in rows}
