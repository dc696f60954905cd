"""The pure usage charge: exact decayed integral of a constant cost-weighted rate, and cost rates."""

from __future__ import annotations

import math

import pytest

from meta.policy.config import SchedulerConfig
from meta.policy.usage_charge import charge, cost_rate, decay

HOUR = 3600.0


def test_zero_or_negative_half_life_keeps_no_memory() -> None:
    assert charge(1000.0, 8.0, 60.0, 0.0) == 0.0
    assert charge(1000.0, 8.0, 60.0, -1.0) == 0.0
    assert decay(1000.0, 60.0, 0.0) == 0.0


@pytest.mark.parametrize("elapsed", [0.0, -30.0])
def test_no_time_elapsed_changes_nothing(elapsed: float) -> None:
    assert charge(123.0, 8.0, elapsed, HOUR) == 123.0


def test_no_rate_only_decays() -> None:
    assert charge(100.0, 0.0, HOUR, HOUR) == pytest.approx(50.0)
    assert charge(100.0, 0.0, 2 * HOUR, HOUR) == pytest.approx(decay(100.0, 2 * HOUR, HOUR)) == pytest.approx(25.0)


def test_one_half_life_of_a_rate_is_half_its_limit() -> None:
    # ∫₀ʰ r·2^(−(h−s)/h) ds = r·h/ln2·(1 − ½)
    assert charge(0.0, 4.0, HOUR, HOUR) == pytest.approx(4.0 * HOUR / math.log(2) / 2)


def test_a_short_interval_charges_about_rate_times_elapsed() -> None:
    # 2 s against a week: the decay inside the interval is ~1e-6 of it (expm1 keeps it exact)
    week = 7 * 86400.0
    assert charge(0.0, 16.0, 2.0, week) == pytest.approx(32.0, rel=1e-5)
    assert charge(0.0, 16.0, 2.0, week) < 32.0


def test_a_long_gap_forgets_the_past_and_saturates() -> None:
    limit = 6.0 * HOUR / math.log(2)
    assert charge(1e12, 0.0, 200 * HOUR, HOUR) == pytest.approx(0.0, abs=1e-9)
    assert charge(1e12, 6.0, 200 * HOUR, HOUR) == pytest.approx(limit)


def test_a_constant_rate_converges_to_rate_times_half_life_over_ln2() -> None:
    value = 0.0
    for _ in range(20 * 60):  # 20 half-lives in 1-minute periods, as the daemon charges
        value = charge(value, 10.0, 60.0, HOUR)
    assert value == pytest.approx(10.0 * HOUR / math.log(2), rel=1e-6)


def test_splitting_an_interval_changes_nothing() -> None:
    # exactness: one call over 3 h equals 3 h of 2-s periods (a daemon) or of uneven pieces (a simulator)
    whole = charge(500.0, 7.5, 3 * HOUR, HOUR)
    by_period = 500.0
    for _ in range(int(3 * HOUR / 2)):
        by_period = charge(by_period, 7.5, 2.0, HOUR)
    uneven = 500.0
    for piece in (1.0, 599.0, 3000.0, 7200.0 - 1.0 - 599.0 - 3000.0 + 3600.0):
        uneven = charge(uneven, 7.5, piece, HOUR)
    assert by_period == pytest.approx(whole, rel=1e-9)
    assert uneven == pytest.approx(whole, rel=1e-12)


def test_cost_rate_weighs_each_gpu_type() -> None:
    config = SchedulerConfig()  # h100 3, a100 2, t4 0.5, anything else 1
    assert cost_rate([("h100", 8), ("a100", 4), ("t4", 2), (None, 1), ("v100", 2)], config) == 24 + 8 + 1 + 1 + 2
    assert cost_rate([], config) == 0.0
    flat = SchedulerConfig(gpu_cost_weights={}, default_gpu_cost_weight=1.0)
    assert cost_rate([("h100", 8), ("t4", 2)], flat) == 10
