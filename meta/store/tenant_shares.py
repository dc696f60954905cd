"""Tenant settings that come from Slurm: account Fairshare as the weight, GrpTRES GPUs as the limits.

The daemon reads them with sacctmgr (``meta.cycle.inventory.shares``) and applies them here; each synced
setting is marked ``"slurm"`` in the tenant's ``sources`` so ``tenant show`` can say where it
comes from and ``tenant set`` can refuse to change it. A change is audited (actor ``slurm``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from meta.model.durations import utcnow
from meta.store import audit
from meta.store.models import Tenant
from meta.store.upsert import insert_ignore

SLURM = "slurm"
METASCHED = "metasched"
SYNCED = ("weight", "limits")  # the settings Slurm owns; guarantees stay metasched's
SETTINGS = ("weight", "guaranteed", "limits")
# submit limits Slurm owns when its association sets them (GrpSubmitJobs, MaxSubmitJobs); else metasched's
SUBMIT_SYNCED = ("max_pending", "max_pending_per_user")


@dataclass(frozen=True)
class SlurmShares:
    """SlurmShares is one account's settings as Slurm has them (weight None: Fairshare=parent or 0)."""

    account: str
    weight: float | None
    limits: dict[str, int]
    max_pending: int | None = None  # GrpSubmitJobs
    max_pending_per_user: int | None = None  # the account's MaxSubmitJobs
    user_max_pending: dict[str, int] = field(default_factory=dict)  # each user association's MaxSubmitJobs
    # on a site of several clusters: each cluster's own association limits (cluster -> key -> GPUs; issue 26)
    cluster_limits: dict[str, dict[str, int]] = field(default_factory=dict)


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
        before = None if created else {"weight": tenant.weight, "limits": dict(tenant.limits or {}),
                                       "submit_limits": dict(tenant.submit_limits or {}),
                                       "cluster_limits": dict(tenant.cluster_limits or {})}  # fmt: skip
        sources = dict(tenant.sources or {})
        if share.weight is not None:
            tenant.weight = share.weight
            sources["weight"] = SLURM
        else:
            sources.pop("weight", None)  # Slurm says nothing: the stored weight is metasched's again
        tenant.limits = dict(share.limits)
        sources["limits"] = SLURM
        submit = _submit_limits(tenant.submit_limits or {}, sources, share)
        if submit != (tenant.submit_limits or {}):
            tenant.submit_limits = submit or None
        if share.cluster_limits != (tenant.cluster_limits or {}):
            tenant.cluster_limits = dict(share.cluster_limits) or None
        after = {"weight": tenant.weight, "limits": dict(tenant.limits), "submit_limits": submit,
                 "cluster_limits": dict(share.cluster_limits)}  # fmt: skip
        if sources != (tenant.sources or {}):
            tenant.sources = sources
        if tenant.slurm_account != share.account:
            tenant.slurm_account = share.account
        if after != before:
            changed.append(share.account)
            extra = {key: after[key] for key in ("submit_limits", "cluster_limits") if after[key]}
            audit.record(session, SLURM, "tenant.sync", share.account, tenant=share.account,
                         weight=after["weight"], limits=after["limits"], **extra)
    session.flush()
    return changed


def _submit_limits(stored: dict[str, Any], sources: dict[str, str], share: SlurmShares) -> dict[str, Any]:
    """_submit_limits is the tenant's submit limits with Slurm's applied (``sources`` updated in place).

    A limit Slurm sets wins and is marked ``slurm``; one Slurm no longer sets falls back to none
    (metasched's own setting was replaced when Slurm's arrived). Per-user limits are Slurm's alone.
    """
    limits = dict(stored)
    for key, value in (("max_pending", share.max_pending), ("max_pending_per_user", share.max_pending_per_user)):
        if value is not None:
            limits[key] = value
            sources[key] = SLURM
        elif sources.get(key) == SLURM:
            limits.pop(key, None)
            sources.pop(key)
    if share.user_max_pending:
        limits["users"] = dict(sorted(share.user_max_pending.items()))
    else:
        limits.pop("users", None)
    return limits
