"""Tenant settings that come from Slurm: account Fairshare as the weight, GrpTRES GPUs as the limits.

The daemon reads them with sacctmgr (``meta.cycle.shares``) and applies them here; each synced
setting is marked ``"slurm"`` in the tenant's ``sources`` so ``tenant show`` can say where it
comes from and ``tenant set`` can refuse to change it. A change is audited (actor ``slurm``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from meta.model.durations import utcnow
from meta.store import audit
from meta.store.models import Tenant
from meta.store.upsert import insert_ignore

SLURM = "slurm"
METASCHED = "metasched"
SYNCED = ("weight", "limits")  # the settings Slurm owns; guarantees stay metasched's
SETTINGS = ("weight", "guaranteed", "limits")


@dataclass(frozen=True)
class SlurmShares:
    """SlurmShares is one account's settings as Slurm has them (weight None: Fairshare=parent or 0)."""

    account: str
    weight: float | None
    limits: dict[str, int]


def sources_of(tenant: Tenant) -> dict[str, str]:
    """sources_of says where each setting of a tenant comes from: ``slurm`` or ``metasched``."""
    stored = tenant.sources or {}
    return {setting: stored.get(setting, METASCHED) for setting in SETTINGS}


def apply_slurm_shares(session: Session, shares: list[SlurmShares]) -> list[str]:
    """apply_slurm_shares writes Slurm's weights and limits into the tenants table; returns the tenants changed."""
    changed: list[str] = []
    for share in shares:
        created = session.get(Tenant, share.account) is None
        insert_ignore(
            session, Tenant, name=share.account, weight=1.0, guaranteed={}, limits={}, created_at=utcnow()
        )
        tenant = session.get(Tenant, share.account, populate_existing=True)
        assert tenant is not None
        before = None if created else {"weight": tenant.weight, "limits": dict(tenant.limits or {})}
        sources = dict(tenant.sources or {})
        if share.weight is not None:
            tenant.weight = share.weight
            sources["weight"] = SLURM
        else:
            sources.pop("weight", None)  # Slurm says nothing: the stored weight is metasched's again
        tenant.limits = dict(share.limits)
        sources["limits"] = SLURM
        after = {"weight": tenant.weight, "limits": dict(tenant.limits)}
        if sources != (tenant.sources or {}):
            tenant.sources = sources
        if tenant.slurm_account != share.account:
            tenant.slurm_account = share.account
        if after != before:
            changed.append(share.account)
            audit.record(session, SLURM, "tenant.sync", share.account, tenant=share.account,
                         weight=after["weight"], limits=after["limits"])
    session.flush()
    return changed
