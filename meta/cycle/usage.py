"""Cycle step 7, usage: tenant usage for fair share, cost-weighted GPU-seconds of live attempts, decayed by a half-life."""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from meta.model.states import LIVE_ATTEMPT_STATES
from meta.policy.config import SchedulerConfig
from meta.store.models import Attempt, Job, Tenant, TenantUsage

_LIVE = [state.value for state in LIVE_ATTEMPT_STATES]


def decay(value: float, elapsed_s: float, half_life_s: float) -> float:
    """decay halves ``value`` every ``half_life_s`` seconds."""
    if half_life_s <= 0:
        return 0.0
    return value * math.pow(0.5, max(elapsed_s, 0.0) / half_life_s)


def current_cost_rate(session: Session, config: SchedulerConfig) -> dict[str, float]:
    """current_cost_rate is each tenant's cost-weighted GPUs held right now (I6: sum of live attempts)."""
    rates: dict[str, float] = defaultdict(float)
    rows = session.execute(
        select(Job.tenant, Attempt.placement).join(Job, Job.id == Attempt.job_id).where(Attempt.state.in_(_LIVE))
    )
    for tenant, placement in rows:
        for share in placement:
            rates[tenant] += int(share.get("gpus", 0)) * config.gpu_cost(share.get("gpu_type"))
    return dict(rates)


def accrue(session: Session, config: SchedulerConfig, now: datetime) -> None:
    """accrue decays every tenant's usage to ``now`` and adds what their live attempts held since."""
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
        row.decayed_gpu_seconds = decay(row.decayed_gpu_seconds, elapsed, config.usage_half_life_s) + rates.get(
            tenant, 0.0
        ) * elapsed
        row.updated_at = now
