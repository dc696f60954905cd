"""The audit trail records overrides and decisions, is append-only, and is tenant-scoped."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from meta.model.spec import spec_from_dict
from meta.service.api import Service
from meta.store import audit
from tenants.identity import Principal
from tenants.quotas import set_tenant


def _eval(tenant: str):
    return spec_from_dict(
        {
            "kind": "evaluation",
            "name": "e",
            "tenant": tenant,
            "resources": {"gpus": 1},
            "command": "x",
            "env": {"API_TOKEN_HINT": "not-a-secret"},
            "secrets": ["WANDB_API_KEY"],
        }
    )


def test_cancel_retry_and_tenant_changes_are_audited(service: Service) -> None:
    job = service.submit(_eval("tenant-a")).job
    service.cancel(job.id, principal=Principal("alice", "tenant-a"))
    service.cancel(job.id, principal=Principal("alice", "tenant-a"))  # idempotent: audited once
    service.retry(job.id, principal=Principal("alice", "tenant-a"))
    with service.db.session() as session:
        set_tenant(session, "tenant-a", actor="root", weight=2.0, guaranteed={"a100": 8})
    with service.db.session() as session:
        events = audit.read(session)
    assert [(e.actor, e.action) for e in reversed(events)] == [
        ("alice", "job.cancel"),
        ("alice", "job.retry"),
        ("root", "tenant.set"),
    ]
    assert events[0].detail == {"weight": 2.0, "guaranteed": {"a100": 8}, "limits": {}}


def test_audit_is_tenant_scoped(service: Service) -> None:
    a = service.submit(_eval("tenant-a")).job
    b = service.submit(_eval("tenant-b")).job
    service.cancel(a.id)
    service.cancel(b.id)
    with service.db.session() as session:
        assert [e.subject for e in audit.read(session, tenant="tenant-b")] == [b.short_id]


def test_audit_rows_are_write_once(service: Service) -> None:
    job = service.submit(_eval("tenant-a")).job
    service.cancel(job.id)
    with pytest.raises(Exception, match="write-once"):
        with service.db.engine.begin() as connection:
            connection.execute(text("UPDATE audit_events SET actor = 'someone-else'"))
