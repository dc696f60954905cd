"""Tenants as the API shows them: members see their own tenants, admins see all and set guarantees.

Fair-share weights and GPU limits are Slurm's (docs/identity.md §6): ``tenant set --weight`` or
``--limit`` is refused with the ``sacctmgr`` command to run instead (``tenants.quotas``).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from sqlalchemy.orm import Session

from meta.model.errors import InvalidRequest
from tenants.identity import Principal
from tenants.quotas import admin_set_tenant, get_tenant, list_tenants, parse_quotas

MAX_QUOTA_ITEMS = 64  # GPU types per map: a cluster has a handful


def visible_tenants(session: Session, principal: Principal) -> list[dict[str, Any]]:
    """visible_tenants lists the tenants the caller may see, with weights, quotas and decayed usage."""
    return [asdict(view) for view in list_tenants(session) if principal.may_view_tenant(view.name)]


def show_tenant(session: Session, principal: Principal, name: str) -> dict[str, Any]:
    """show_tenant is one tenant the caller may see (NotFound otherwise: existence does not leak)."""
    principal.require_access(name, f"tenant {name}")
    return asdict(get_tenant(session, name))


def change_tenant(
    session: Session,
    principal: Principal,
    name: str,
    *,
    weight: float | None = None,
    guaranteed: list[str] | None = None,
    limits: list[str] | None = None,
    submit: dict[str, float | None] | None = None,
    priority_classes: list[str] | None = None,
    clusters: list[str] | None = None,
) -> dict[str, Any]:
    """change_tenant sets a tenant's guaranteed GPUs, submit limits, allowed classes and clusters (admins only).

    Quotas are ``TYPE=COUNT`` items; ``submit`` maps max_pending / max_pending_per_user / rate / burst
    to a value, or None to unset it; ``priority_classes`` replaces the classes members may ask for;
    ``clusters`` replaces the Slurm clusters the tenant's work may run on ([]: any).
    """
    view = admin_set_tenant(
        session, principal, name, guaranteed=_quotas(guaranteed), weight=weight, limits=_quotas(limits), submit=submit,
        priority_classes=priority_classes, clusters=clusters,
    )
    return asdict(view)


def _quotas(items: list[str] | None) -> dict[str, int] | None:
    """_quotas parses ``a100=16`` items (None or empty: leave the stored map as it is)."""
    if not items:
        return None
    if len(items) > MAX_QUOTA_ITEMS:
        raise InvalidRequest(f"at most {MAX_QUOTA_ITEMS} GPU types per quota map")
    return parse_quotas(tuple(items))
