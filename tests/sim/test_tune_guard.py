"""benchmarks/tune_policy.py: "no tenant worse" is a guard rail (admissibility), not part of the score."""

from __future__ import annotations

import json

import pytest

from benchmarks.tune_policy import BASELINE, LOADS, WEEKS, Run, choose, load_cache, scored, table


def _row(setting: str, week: str, load: float, mean: float, tenant_mean: float) -> dict:
    """_row is a cached run whose guard rails all pass except, perhaps, tenant a's mean."""
    tenants = {
        "a": {
            "jobs": 30,
            "mean_s": tenant_mean,
            "p95_s": tenant_mean,
            "max_s": tenant_mean,
            "share_ratio": 1.0,
        },
        "small": {"jobs": 3, "mean_s": 50_000.0, "p95_s": 0.0, "max_s": 0.0, "share_ratio": 1.0},
    }
    return {
        "key": Run(setting, week, load).key(),
        "setting": setting,
        "week": week,
        "load": load,
        "mean": mean,
        "p99": 1000.0,
        "useful_util": 0.8,
        "util": 0.8,
        "jain": 0.99,
        "lost_gpu_h": 0.0,
        "lost_frac": 0.0,
        "preemptions": 0,
        "jobs": 33,
        "cycles": 1,
        "cpu_s": 0.0,
        "tenants": tenants,
    }


def _results(settings: dict[str, tuple[float, float]]) -> dict:
    """_results is every week × load of slurm-like (mean 1,000 s, tenant a 1,000 s) and the settings."""
    rows = [_row(BASELINE, w, load, 1000.0, 1000.0) for w in WEEKS for load in LOADS]
    rows += [
        _row(s, w, load, mean, tenant)
        for s, (mean, tenant) in settings.items()
        for w in WEEKS
        for load in LOADS
    ]
    return {r["key"]: r for r in rows}


def test_a_tenant_over_1_1x_is_a_miss_and_a_faster_setting_loses():
    # "fast" halves the mean but tenant a waits 1.2× slurm-like's; "fair" is slower, a at 1.1×
    results = _results({"fast": (500.0, 1200.0), "fair": (700.0, 1100.0)})
    fast = scored(results, "fast", WEEKS[0], 1.0)
    assert fast["misses"] == ["tenant"]
    assert (fast["worst_tenant"], fast["worst_tenant_ratio"]) == ("a", pytest.approx(1.2))
    assert scored(results, "fair", WEEKS[0], 1.0)["misses"] == []
    assert choose(results, ["fast", "fair"], list(WEEKS[1:])) == "fair"
    text = table([fast])
    assert "worst tenant ×slurm" in text and "a 1.20" in text


def test_cached_rows_without_tenant_figures_are_simulated_again(tmp_path):
    cache = tmp_path / "c.jsonl"
    old = {"key": "x|w|1", "mean": 1.0}
    new = _row("x", "w", 1.0, 1.0, 1.0)
    cache.write_text(json.dumps(old) + "\n" + json.dumps(new | {"key": "y|w|1"}) + "\n")
    assert list(load_cache(cache)) == ["y|w|1"]
