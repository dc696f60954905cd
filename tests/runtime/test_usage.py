"""Tenant usage: half-life decay, cost-weighted rates from live attempts, accrual over time (exact integral)."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from meta.cycle.usage import accrue, current_cost_rate
from meta.model.durations import utcnow
from meta.model.states import AttemptState
from meta.policy.config import SchedulerConfig
from meta.policy.usage_charge import decay
from meta.service.api import Service
from meta.store.models import TenantUsage
from tests.runtime.support import place, share, submit, training

CONFIG = SchedulerConfig(gpu_cost_weights={"a100": 2.0, "t4": 0.5}, default_gpu_cost_weight=1.0, usage_half_life_s=3600.0)


@pytest.mark.parametrize(
    ("value", "elapsed", "half_life", "want"),
    [
        (100.0, 3600.0, 3600.0, 50.0),
        (100.0, 7200.0, 3600.0, 25.0),
        (100.0, 0.0, 3600.0, 100.0),
        (100.0, -10.0, 3600.0, 100.0),  # a clock step backwards never grows usage
        (100.0, 1800.0, 3600.0, 100.0 / math.sqrt(2)),
        (100.0, 10.0, 0.0, 0.0),
    ],
)
def test_decay_halves_per_half_life(value: float, elapsed: float, half_life: float, want: float) -> None:
    assert decay(value, elapsed, half_life) == pytest.approx(want)


def test_rates_are_cost_weighted_gpus_of_live_attempts(service: Service) -> None:
    db = service.db
    _, (a1,) = submit(service, training("a1", tenant="acme"))
    place(db, a1, [share("node1", gpus=2), share("node2", gpus=2)], AttemptState.RUNNING)  # 4 × a100 × 2.0
    _, (a2,) = submit(service, training("a2", tenant="acme"))
    place(db, a2, [share("node3", gpus=2, gpu_type="t4")], AttemptState.LAUNCH_UNKNOWN)  # 2 × t4 × 0.5
    _, (b1,) = submit(service, training("b1", tenant="beta"))
    place(db, b1, [share("node4", gpus=3, gpu_type="v100")], AttemptState.STOPPING)  # 3 × default 1.0
    _, (b2,) = submit(service, training("b2", tenant="beta"))
    place(db, b2, [share("node4", gpus=5)], AttemptState.SUCCEEDED)  # ended: not counted
    with db.session() as session:
        rates = current_cost_rate(session, CONFIG)
    assert rates == {"acme": pytest.approx(9.0), "beta": pytest.approx(3.0)}


def _usage(service: Service) -> dict[str, tuple[float, object]]:
    with service.db.session() as session:
        rows = session.query(TenantUsage).all()
        return {r.tenant: (r.decayed_gpu_seconds, r.updated_at) for r in rows}


def _gain(rate: float, elapsed: float, half_life: float = 3600.0) -> float:
    """_gain is what holding ``rate`` for ``elapsed`` seconds adds, decayed to the interval's end."""
    return rate * (1 - 0.5 ** (elapsed / half_life)) * half_life / math.log(2)


def test_accrue_adds_the_decayed_integral_of_the_rate_and_decays_the_past(service: Service) -> None:
    db = service.db
    _, (t,) = submit(service, training(tenant="acme"))
    submit(service, training("idle", tenant="idle"))
    place(db, t, [share("node1", gpus=2)], AttemptState.RUNNING)  # rate 4.0
    start = utcnow().replace(microsecond=0)
    with db.session() as session:
        accrue(session, CONFIG, start)  # first sight: rows start at zero
    assert _usage(service)["acme"][0] == 0.0
    with db.session() as session:
        accrue(session, CONFIG, start + timedelta(seconds=100))
    assert _usage(service)["acme"][0] == pytest.approx(_gain(4.0, 100))  # ≈ 396: a little of it decayed
    assert _usage(service)["idle"][0] == 0.0
    with db.session() as session:
        accrue(session, CONFIG, start + timedelta(seconds=100 + 3600))
    assert _usage(service)["acme"][0] == pytest.approx(_gain(4.0, 100) / 2 + _gain(4.0, 3600))


def test_accrue_ignores_a_time_that_is_not_later(service: Service) -> None:
    db = service.db
    _, (t,) = submit(service, training(tenant="acme"))
    place(db, t, [share("node1", gpus=2)], AttemptState.RUNNING)
    start = utcnow().replace(microsecond=0)
    with db.session() as session:
        accrue(session, CONFIG, start)
    with db.session() as session:
        accrue(session, CONFIG, start + timedelta(seconds=50))
    with db.session() as session:
        accrue(session, CONFIG, start + timedelta(seconds=10))  # an older clock: nothing changes
    value, updated = _usage(service)["acme"]
    assert value == pytest.approx(_gain(4.0, 50))
    assert updated == start + timedelta(seconds=50)
