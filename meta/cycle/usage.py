"""Cycle step 10, usage: tenant usage for fair share, cost-weighted GPU-seconds of live attempts, decayed by a half-life."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from meta.model.states import LIVE_ATTEMPT_STATES
from meta.policy.config import SchedulerConfig
from meta.policy.snapshot import Reservation
from meta.policy.usage_charge import charge, cost_rate
from meta.store.models import Attempt, Job, Tenant, TenantUsage

_LIVE = [state.value for state in LIVE_ATTEMPT_STATES]


def current_cost_rate(session: Session, config: SchedulerConfig) -> dict[str, float]:
    """current_cost_rate is each tenant's cost-weighted GPUs held right now (I6: sum of live attempts)."""
    rates: dict[str, float] = defaultdict(float)
    rows = session.execute(
        select(Job.tenant, Attempt.placement).join(Job, Job.id == Attempt.job_id).where(Attempt.state.in_(_LIVE))
    )
    for tenant, placement in rows:
        rates[tenant] += cost_rate(((share.get("gpu_type"), int(share.get("gpus", 0))) for share in placement), config)
    return dict(rates)


def live_rates(reservations: Iterable[Reservation], config: SchedulerConfig) -> dict[str, float]:
    """live_rates is current_cost_rate from the snapshot's live attempts (the same rows, their placements parsed once)."""
    rates: dict[str, float] = defaultdict(float)
    for res in reservations:
        rates[res.tenant] += cost_rate(((share.resources.gpu_type, share.resources.gpus) for share in res.shares), config)
    return dict(rates)


def accrue(session: Session, config: SchedulerConfig, now: datetime, rates: Mapping[str, float] | None = None) -> None:
    """accrue decays every tenant's usage to ``now`` and adds what their live attempts held since.

    The live attempts are taken as held over the whole interval since the tenant's last update
    (one period); ``charge`` is the policy layer's exact integral, the one the simulator uses.
    ``rates`` are the tenants' current cost rates when the caller has them (the daemon: from the
    period's snapshot, ``live_rates``; re-reading every live attempt's placement cost ~0.1 s at
    10,000 running); else they are read.
    """
    if rates is None:
        rates = current_cost_rate(session, config)
    known = {row.tenant: row for row in session.scalars(select(TenantUsage).with_for_update())}
    for tenant in session.scalars(select(Tenant.name)):
        row = known.get(tenant)
        if row is None:
            session.add(TenantUsage(tenant=tenant, decayed_gpu_seconds=0.0, updated_at=now))
            continue
        elapsed = (now - row.updated_at).total_seconds()
        if elapsed <= 0:
            continue
        row.decayed_gpu_seconds = charge(
            row.decayed_gpu_seconds, rates.get(tenant, 0.0), elapsed, config.usage_half_life_s
        )
        row.updated_at = now
