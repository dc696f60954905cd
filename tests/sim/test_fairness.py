"""Fairness helpers: water-filling and Jain's index."""

from __future__ import annotations

import pytest

from meta.sim.fairness import jain, share_normalised, water_fill, window_demand


def test_water_fill_caps_at_demand_and_redistributes():
    # 100 units, equal weights: a wants 10 → gets 10; b and c split the other 90.
    fair = water_fill(100, {"a": 10, "b": 80, "c": 80}, {})
    assert fair == pytest.approx({"a": 10, "b": 45, "c": 45})


def test_water_fill_uses_weights():
    assert water_fill(90, {"a": 100, "b": 100}, {"a": 2, "b": 1}) == pytest.approx({"a": 60, "b": 30})


def test_jain_bounds():
    assert jain([1, 1, 1]) == 1.0
    assert jain([1, 0, 0, 0]) == pytest.approx(0.25)


def test_share_normalised_caps_surplus():
    xs = share_normalised({"a": 80, "b": 10}, {"a": 100, "b": 100}, {}, 100)
    assert xs == pytest.approx({"a": 1.0, "b": 0.2})


def test_window_demand_clips_to_window():
    demand = window_demand([("a", 0, 100, 2), ("a", 150, 100, 1)], (50, 200))
    assert demand == {"a": 50 * 2 + 50 * 1}
