"""Tenant administration: fair-share weights and per-GPU-type guarantees and limits."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from meta.model.durations import utcnow
from meta.model.errors import InvalidRequest, NotFound
from meta.store import audit
from meta.store.models import Tenant, TenantUsage
from meta.store.upsert import insert_ignore
from tenants.names import check_tenant_name

# used with fullmatch: a bare ``$`` would also match before a trailing newline
_QUOTA = re.compile(r"(?P<type>\*|[a-z0-9][a-z0-9_.-]*)=(?P<count>\d+)")


@dataclass(frozen=True)
class TenantView:
    """TenantView is one tenant as an admin sees it."""

    name: str
    weight: float
    guaranteed: dict[str, int]
    limits: dict[str, int]
    decayed_gpu_seconds: float


def parse_quotas(items: tuple[str, ...]) -> dict[str, int]:
    """parse_quotas reads ``a100=16`` / ``*=32`` items into {gpu_type: GPUs}."""
    quotas: dict[str, int] = {}
    for item in items:
        match = _QUOTA.fullmatch(item.strip().lower())
        if not match:
            raise InvalidRequest(f"bad quota {item!r}: use GPU_TYPE=COUNT, e.g. a100=16 or *=32 (any type)")
        quotas[match.group("type")] = int(match.group("count"))
    return quotas


def set_tenant(
    session: Session,
    name: str,
    *,
    actor: str = "admin",
    weight: float | None = None,
    guaranteed: dict[str, int] | None = None,
    limits: dict[str, int] | None = None,
) -> TenantView:
    """set_tenant creates or updates a tenant; given quota maps replace the old ones."""
    check_tenant_name(name)
    if weight is not None and weight <= 0:
        raise InvalidRequest("a fair-share weight must be positive")
    for gpu_type, amount in (guaranteed or {}).items():
        limit = (limits or {}).get(gpu_type)
        if limit is not None and limit < amount:
            raise InvalidRequest(f"{gpu_type}: limit {limit} is below the guarantee {amount}")
    insert_ignore(session, Tenant, name=name, weight=1.0, guaranteed={}, limits={}, created_at=utcnow())
    tenant = session.get(Tenant, name, populate_existing=True)
    assert tenant is not None
    if weight is not None:
        tenant.weight = weight
    if guaranteed is not None:
        tenant.guaranteed = guaranteed
    if limits is not None:
        tenant.limits = limits
    session.flush()
    view = _view(session, tenant)
    audit.record(
        session, actor, "tenant.set", name, tenant=name, weight=view.weight, guaranteed=view.guaranteed, limits=view.limits
    )
    return view


def list_tenants(session: Session) -> list[TenantView]:
    """list_tenants lists every tenant with its quotas and decayed usage."""
    return [_view(session, t) for t in session.scalars(select(Tenant).order_by(Tenant.name))]


def get_tenant(session: Session, name: str) -> TenantView:
    """get_tenant returns one tenant or raises NotFound."""
    tenant = session.get(Tenant, name)
    if tenant is None:
        raise NotFound(f"tenant {name} not found")
    return _view(session, tenant)


def _view(session: Session, tenant: Tenant) -> TenantView:
    usage = session.get(TenantUsage, tenant.name)
    return TenantView(
        name=tenant.name,
        weight=tenant.weight,
        guaranteed=dict(tenant.guaranteed or {}),
        limits=dict(tenant.limits or {}),
        decayed_gpu_seconds=usage.decayed_gpu_seconds if usage else 0.0,
    )
