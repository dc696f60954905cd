"""Tenant administration: fair-share weights and per-GPU-type guarantees and limits.

Weights and limits come from Slurm (account Fairshare and GrpTRES, synced by the daemon:
``meta.store.tenant_shares``); an admin changes them with sacctmgr, and ``admin_set_tenant``
refuses them naming the command. Guarantees — which Slurm cannot express — stay metasched's,
set by admins and audited. Every view says where each setting comes from.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from meta.model.clusters import check_cluster_name
from meta.model.durations import utcnow
from meta.model.errors import Forbidden, InvalidRequest, NotFound
from meta.model.kinds import PriorityClass
from meta.store import audit
from meta.store.models import Tenant, TenantUsage
from meta.store.tenant_shares import SLURM, SUBMIT_SYNCED, sources_of
from meta.store.upsert import insert_ignore
from tenants.identity import Principal
from tenants.names import check_tenant_name

# used with fullmatch: a bare ``$`` would also match before a trailing newline
_QUOTA = re.compile(r"(?P<type>\*|[a-z0-9][a-z0-9_.-]*)=(?P<count>\d{1,7})")
MAX_QUOTA_GPUS = 1_000_000  # GPUs of one type in a quota: more than any cluster, far below what a store column holds
MAX_SUBMIT_COUNT = 10**9  # pending tasks or a burst: a whole number up to this
MAX_SUBMIT_RATE = 1e6  # tasks per second
MAX_WEIGHT = 1e6  # a fair-share weight (Slurm's Fairshare is a 32-bit count)
MAX_TENANT_CLUSTERS = 32  # clusters a tenant may be confined to: more than a site has
# words the CLI and msqueue use for "every cluster": never a cluster a tenant is confined to
_NOT_CLUSTER_NAMES = frozenset({"any", "all"})


@dataclass(frozen=True)
class TenantView:
    """TenantView is one tenant as an admin sees it."""

    name: str
    weight: float
    guaranteed: dict[str, int]
    limits: dict[str, int]
    decayed_gpu_seconds: float
    sources: dict[str, str]  # weight / guaranteed / limits -> "slurm" | "metasched"
    # pending-job limits and submit rate as set (absent: none / the service's default), with their sources
    submit_limits: dict[str, Any] = field(default_factory=dict)
    # priority classes above their job kind's that members may ask for (an admin's setting; the QOS of a
    # member's Slurm association allows a class of its name too)
    priority_classes: list[str] = field(default_factory=list)
    # the Slurm clusters its work may run on (an admin's setting, issue 26); None: any cluster
    clusters: list[str] | None = None
    # each cluster's own association limits where they differ by cluster (synced from Slurm, issue 26)
    cluster_limits: dict[str, dict[str, int]] = field(default_factory=dict)


class SlurmOwnedSetting(InvalidRequest):
    """SlurmOwnedSetting: a weight or GPU limit is Slurm's; the message names the sacctmgr command."""


def parse_quotas(items: tuple[str, ...]) -> dict[str, int]:
    """parse_quotas reads ``a100=16`` / ``*=32`` items into {gpu_type: GPUs}."""
    quotas: dict[str, int] = {}
    for item in items:
        match = _QUOTA.fullmatch(item.strip().lower())
        if not match or int(match.group("count")) > MAX_QUOTA_GPUS:
            raise InvalidRequest(f"bad quota {item[:64]!r}: use GPU_TYPE=COUNT with COUNT 0 to {MAX_QUOTA_GPUS:,}, "
                                 "e.g. a100=16 or *=32 (any type)")  # fmt: skip
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
    submit: dict[str, float | None] | None = None,
    priority_classes: list[str] | None = None,
    clusters: list[str] | None = None,
) -> TenantView:
    """set_tenant creates or updates a tenant; given quota maps and class lists replace the old ones, ``submit`` items merge.

    A ``submit`` item of None unsets it; ``priority_classes=[]`` allows no class beyond the kinds' own;
    ``clusters=[]`` lets the tenant run on any cluster again.
    """
    check_tenant_name(name)
    if weight is not None and not (math.isfinite(weight) and 0 < weight <= MAX_WEIGHT):
        raise InvalidRequest("a fair-share weight is a finite number, more than 0 and at most 1,000,000")
    for gpu_type, amount in (guaranteed or {}).items():
        limit = (limits or {}).get(gpu_type)
        if limit is not None and limit < amount:
            raise InvalidRequest(f"{gpu_type}: limit {limit} is below the guarantee {amount}")
    insert_ignore(session, Tenant, name=name, weight=1.0, guaranteed={}, limits={}, created_at=utcnow())
    tenant = session.get(Tenant, name, populate_existing=True)
    assert tenant is not None
    sources = dict(tenant.sources or {})
    if weight is not None:
        tenant.weight = weight
        sources.pop("weight", None)  # set here: metasched's until the next sync from Slurm
    if guaranteed is not None:
        tenant.guaranteed = guaranteed
        sources.pop("guaranteed", None)
    if limits is not None:
        tenant.limits = limits
        sources.pop("limits", None)
    if submit:
        merged = dict(tenant.submit_limits or {})
        for key, value in submit.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
            sources.pop(key, None)
        tenant.submit_limits = merged or None
    if priority_classes is not None:
        tenant.priority_classes = check_priority_classes(priority_classes) or None
    if clusters is not None:
        tenant.clusters = check_tenant_clusters(clusters) or None
    if sources != (tenant.sources or {}):
        tenant.sources = sources or None
    session.flush()
    view = _view(session, tenant)
    audit.record(
        session, actor, "tenant.set", name, tenant=name, weight=view.weight, guaranteed=view.guaranteed, limits=view.limits,
        **({"submit_limits": dict(tenant.submit_limits or {})} if submit else {}),
        **({"priority_classes": view.priority_classes} if priority_classes is not None else {}),
        **({"clusters": view.clusters} if clusters is not None else {}),
    )
    return view


def admin_set_tenant(
    session: Session,
    principal: Principal,
    name: str,
    *,
    guaranteed: dict[str, int] | None = None,
    weight: float | None = None,
    limits: dict[str, int] | None = None,
    submit: dict[str, float | None] | None = None,
    priority_classes: list[str] | None = None,
    clusters: list[str] | None = None,
) -> TenantView:
    """admin_set_tenant is ``tenant set`` for a caller: admins only; guarantees, classes, clusters, the submit limits Slurm does not set."""
    if not principal.may_admin():
        raise Forbidden("only an admin (Slurm AdminLevel Operator or Administrator, or root) may change tenants")
    check_tenant_name(name)
    if weight is not None and not (math.isfinite(weight) and 0 < weight <= MAX_WEIGHT):
        raise InvalidRequest("a fair-share weight is a finite number, more than 0 and at most 1,000,000")
    if weight is not None or limits is not None:
        raise SlurmOwnedSetting(slurm_command_hint(name, weight, limits))
    if clusters is not None:
        check_tenant_clusters(clusters)  # refused before anything is written
    current = session.get(Tenant, name)
    check_submit_limits(name, submit or {}, (current.sources or {}) if current is not None else {})
    for gpu_type, amount in (guaranteed or {}).items():
        limit = (current.limits or {}).get(gpu_type) if current is not None else None
        if limit is not None and limit < amount:
            raise InvalidRequest(f"{gpu_type}: the guarantee {amount} is above Slurm's limit {limit} (GrpTRES)")
    return set_tenant(
        session, name, actor=principal.name, guaranteed=guaranteed, submit=submit, priority_classes=priority_classes,
        clusters=clusters,
    )


def check_priority_classes(names: list[str]) -> list[str]:
    """check_priority_classes is the sorted, unique list of known class names (InvalidRequest for another name)."""
    known = {c.value for c in PriorityClass}
    odd = [name for name in names if name not in known]
    if odd:
        raise InvalidRequest(f"unknown priority class {str(odd[0])[:64]!r}: use {', '.join(sorted(known))}")
    return sorted(set(names))


def check_tenant_clusters(names: list[str]) -> list[str]:
    """check_tenant_clusters is the sorted, unique list of valid cluster names (InvalidRequest otherwise; []: any)."""
    if len(names) > MAX_TENANT_CLUSTERS:
        raise InvalidRequest(f"a tenant is confined to at most {MAX_TENANT_CLUSTERS} clusters, not {len(names)}")
    for name in names:
        if isinstance(name, str) and name.lower() in _NOT_CLUSTER_NAMES:
            raise InvalidRequest(f"{name!r} is not a cluster: to let the tenant run anywhere, clear the list "
                                 "(tenant set --clusters any; [] in the API)")  # fmt: skip
        try:
            check_cluster_name(name)
        except ValueError as exc:
            raise InvalidRequest(f"{str(exc)[:128]}") from None
    return sorted(set(names))


def slurm_command_hint(name: str, weight: float | None, limits: dict[str, int] | None) -> str:
    """slurm_command_hint is the one-line refusal naming the sacctmgr command that sets a weight or GPU limits."""
    settings = []
    if weight is not None:
        settings.append(f"fairshare={max(1, round(weight))}")  # Slurm's Fairshare is a whole number
    if limits is not None:
        tres = ",".join("gres/gpu=" + str(n) if t == "*" else f"gres/gpu:{t}={n}" for t, n in sorted(limits.items()))
        settings.append(f"grptres={tres or 'gres/gpu=-1'}")
    if weight is not None and limits is not None:
        what = "the fair-share weight and GPU limits of {name} are set in Slurm (the account's Fairshare and GrpTRES)"
    elif weight is not None:
        what = "the fair-share weight of {name} is set in Slurm (the account's Fairshare)"
    else:
        what = "the GPU limits of {name} are set in Slurm (the account's GrpTRES)"
    return f"{what.format(name=name)}: run sacctmgr modify account where name={name} set {' '.join(settings)}"


SUBMIT_SETTINGS = {"max_pending": "GrpSubmitJobs", "max_pending_per_user": "MaxSubmitJobs", "max_pending_tasks": "",
                   "rate": "", "burst": ""}  # fmt: skip


def check_submit_limits(name: str, submit: dict[str, float | None], sources: dict[str, str]) -> None:
    """check_submit_limits refuses unknown, non-finite or out-of-range submit settings and those Slurm's association sets."""
    for key, value in submit.items():
        if key not in SUBMIT_SETTINGS:
            raise InvalidRequest(f"unknown submit limit {key[:64]!r}: use {', '.join(SUBMIT_SETTINGS)}")
        check_submit_value(key, value)
        if key in SUBMIT_SYNCED and sources.get(key) == SLURM:
            slurm = SUBMIT_SETTINGS[key]
            raise SlurmOwnedSetting(f"{key} of {name} is set in Slurm (the account's {slurm}): run sacctmgr modify "
                                    f"account where name={name} set {slurm}={'-1' if value is None else int(value)}")


def check_submit_value(key: str, value: float | None) -> None:
    """check_submit_value refuses a submit setting that is not a finite number in its range (None: unset, allowed).

    NaN, Infinity and 1e400 (which JSON reads as Infinity) are refused here, before any ``int()``
    could raise on them (issue 22, S13).
    """
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidRequest(f"{key} must be a finite number, not {str(value)[:32]}")
    if key == "rate":
        if not 0 < value <= MAX_SUBMIT_RATE:
            raise InvalidRequest("a submit rate is more than 0 and at most 1,000,000 tasks per second")
        return
    low = 1 if key == "burst" else 0
    if value != int(value) or not low <= value <= MAX_SUBMIT_COUNT:
        raise InvalidRequest(f"{key} is a whole number of tasks ({low} to 1,000,000,000)")


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
        sources=sources_of(tenant),
        submit_limits=_submit_view(tenant),
        priority_classes=list(tenant.priority_classes or []),
        clusters=list(tenant.clusters) if tenant.clusters else None,
        cluster_limits=dict(tenant.cluster_limits or {}),
    )


def _submit_view(tenant: Tenant) -> dict[str, Any]:
    """_submit_view is a tenant's submit limits as set, with where each pending-job limit comes from."""
    stored = dict(tenant.submit_limits or {})
    sources = tenant.sources or {}
    where = {key: sources.get(key, "metasched") for key in SUBMIT_SYNCED if key in stored}
    return {**stored, "sources": where} if where else stored
