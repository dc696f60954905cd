"""The audit trail records overrides and decisions, is append-only, and is tenant-scoped."""

from __future__ import annotations

import os
import pwd
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from cli.main import cli
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


def _cli(service: Service, *args: str, value: str | None = None, **env: str):
    """_cli runs the metasched CLI against the test store."""
    environment = {"METASCHED_DB": service.db.url, "METASCHED_TENANT": None, **env}
    return CliRunner().invoke(cli, list(args), input=value, env=environment, prog_name="metasched")


def test_the_actor_is_the_effective_user_whatever_logname_says(service: Service) -> None:
    job = service.submit(_eval("tenant-a")).job
    assert _cli(service, "cancel", job.short_id, LOGNAME="mallory", USER="mallory").exit_code == 0
    with service.db.session() as session:
        (event,) = audit.read(session)
    assert (event.actor, event.action) == (pwd.getpwuid(os.geteuid()).pw_name, "job.cancel")


def test_secret_changes_are_audited_and_the_value_appears_in_no_audit_row(service: Service, tmp_path: Path) -> None:
    value = "pa55-" + uuid.uuid4().hex  # unique: found only if it leaked
    root = str(tmp_path / "secrets")
    assert _cli(service, "secret", "set", "tenant-a", "WANDB_API_KEY", "--root", root, value=value).exit_code == 0
    assert _cli(service, "secret", "delete", "tenant-a", "WANDB_API_KEY", "--root", root).exit_code == 0
    with service.db.session() as session:
        events = audit.read(session)
    assert [(e.action, e.tenant, e.subject, e.detail) for e in reversed(events)] == [
        ("secret.set", "tenant-a", "tenant-a/WANDB_API_KEY", {"name": "WANDB_API_KEY"}),
        ("secret.delete", "tenant-a", "tenant-a/WANDB_API_KEY", {"name": "WANDB_API_KEY"}),
    ]
    with service.db.engine.connect() as connection:
        rows = connection.execute(text("SELECT * FROM audit_events")).fetchall()
    assert value not in repr(rows)
    assert service.db.url not in repr(rows) and "metasched:metasched@" not in repr(rows)
    shown = _cli(service, "audit", "--json")
    assert shown.exit_code == 0 and value not in shown.output
