"""The audit trail: who decided or overrode what, and why — append-only, and never a secret.

The one exception is ``prune``: an admin's explicit, audited removal of rows older than a date
(migration 0015 lets a DELETE through only inside the transaction that holds a prune permit).

Details are built from ids, names, counts and reasons only; specs carry secret *names*, never
values, and nothing here copies environment values or database URLs.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from meta.model.durations import utcnow
from meta.store.models import AuditEvent, AuditPrunePermit

PRUNE_ACTION = "audit.prune"


@dataclass(frozen=True)
class AuditView:
    """AuditView is one audit line as shown to people and scripts."""

    at: str
    actor: str
    action: str
    tenant: str | None
    subject: str
    detail: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """to_dict renders the line for --json."""
        return asdict(self)


def record(
    session: Session, actor: str, action: str, subject: str, *, tenant: str | None = None, **detail: Any
) -> None:
    """record appends one audit line in the caller's transaction."""
    session.add(
        AuditEvent(at=utcnow(), actor=actor, action=action, tenant=tenant, subject=subject, detail=detail)
    )


def read(
    session: Session,
    *,
    tenant: str | None = None,
    since: datetime | None = None,
    limit: int = 200,
    tenants: Collection[str] | None = None,
) -> list[AuditView]:
    """read returns the newest audit lines, optionally for one tenant (or a set: ``Principal.audit_tenants()``) and after a time."""
    query = select(AuditEvent).order_by(AuditEvent.id.desc()).limit(limit)
    if tenant is not None:
        query = query.where(AuditEvent.tenant == tenant)
    if tenants is not None:
        if not tenants:
            return []  # a caller with no tenant reads no line
        query = query.where(AuditEvent.tenant.in_(sorted(tenants)))
    if since is not None:
        query = query.where(AuditEvent.at >= since)
    return [
        AuditView(e.at.isoformat(), e.actor, e.action, e.tenant, e.subject, dict(e.detail or {}))
        for e in session.scalars(query)
    ]


def prune(session: Session, actor: str, before: datetime, **detail: Any) -> int:
    """prune deletes the lines older than ``before`` and records who pruned how many (the caller checks the right)."""
    oldest = session.scalar(select(func.min(AuditEvent.at)).where(AuditEvent.at < before))
    permit = AuditPrunePermit(actor=actor)
    session.add(permit)
    session.flush()  # the permit row must exist when the triggers look for it
    deleted = session.execute(delete(AuditEvent).where(AuditEvent.at < before)).rowcount or 0
    session.delete(permit)
    session.flush()  # gone again before this transaction's own line, and before it commits
    record(session, actor, PRUNE_ACTION, "audit_events", before=before.isoformat(), deleted=deleted,
           oldest=oldest.isoformat() if oldest else None, **detail)  # fmt: skip
    return deleted
