"""Per-tenant queue delays and the worst tenant ratio against slurm-like (issue 21)."""

from __future__ import annotations

import pytest

from meta.sim.config import SimConfig
from meta.sim.metrics import summary
from meta.sim.run import RunSpec, run
from meta.sim.tenant_delays import (
    FLOOR_S,
    MIN_JOBS,
    TenantDelay,
    floored_ratio,
    tenant_delays,
    tenant_ratios,
    tenant_section,
    worst_tenant_ratio,
)
from tests.sim.conftest import write_trace


def _td(jobs: int, mean: float) -> TenantDelay:
    return TenantDelay(jobs=jobs, mean_s=mean, p95_s=mean, max_s=mean, share_ratio=None)


def _metrics(delays: dict[str, list[float]], shares: dict[str, float]) -> dict:
    """_metrics is the part of a run's metrics the per-tenant figures read."""
    return {
        "by_tenant": {t: {"queue": summary(xs), "jct": summary(xs)} for t, xs in delays.items()},
        "fairness": {"share_ratio": shares},
    }


def test_figures_of_each_tenant():
    # a: 21 jobs waiting 0, 100, …, 2,000 s → mean 1,000, p95 at position 19 of 20 = 1,900, max 2,000
    delays = {"a": [100.0 * i for i in range(21)], "b": [30.0, 90.0]}
    out = tenant_delays({"metrics": _metrics(delays, {"a": 0.8})})
    assert out["a"] == TenantDelay(jobs=21, mean_s=1000.0, p95_s=1900.0, max_s=2000.0, share_ratio=0.8)
    assert out["b"].jobs == 2 and out["b"].mean_s == pytest.approx(60.0)
    assert out["b"].share_ratio is None  # no demand in the window: no share ratio


def test_both_means_are_floored_at_60_s():
    assert floored_ratio(1.0, 20.0) == 1.0  # both under a minute: nobody is worse off
    assert floored_ratio(120.0, 1.0) == pytest.approx(2.0)  # 120 / 60, not 120×
    assert floored_ratio(3000.0, 300.0) == pytest.approx(10.0)
    assert floored_ratio(90.0, 10.0, floor_s=100.0) == 1.0


def test_worst_tenant_and_the_min_jobs_threshold():
    candidate = {"a": _td(25, 1200.0), "b": _td(40, 30.0), "c": _td(5, 10_000.0), "d": _td(30, 700.0)}
    baseline = {"a": _td(25, 600.0), "b": _td(40, 100.0), "c": _td(5, 100.0), "d": _td(30, 500.0)}
    ratios = tenant_ratios(candidate, baseline)
    # c has 5 jobs (< 20) in both runs: not judged, although it is 100× worse
    assert ratios == pytest.approx({"a": 2.0, "b": 60.0 / 100.0, "d": 1.4})
    assert worst_tenant_ratio(candidate, baseline) == ("a", pytest.approx(2.0))
    assert worst_tenant_ratio(candidate, baseline, min_jobs=5) == ("c", pytest.approx(100.0))


def test_a_tenant_counts_when_either_run_has_enough_jobs():
    # the candidate finished only 3 of its jobs; the baseline 30: still judged
    assert tenant_ratios({"a": _td(3, 600.0)}, {"a": _td(30, 120.0)}) == {"a": pytest.approx(5.0)}
    # absent from one run: no mean to divide
    assert tenant_ratios({"a": _td(30, 600.0)}, {"b": _td(30, 120.0)}) == {}
    assert worst_tenant_ratio({"a": _td(30, 600.0)}, {}) is None


def test_ties_go_to_the_first_name():
    assert worst_tenant_ratio(
        {"b": _td(20, 120.0), "a": _td(20, 120.0)}, {"b": _td(20, 60.0), "a": _td(20, 60.0)}
    ) == ("a", pytest.approx(2.0))


def test_section_lists_the_tenants_judged_and_the_worst():
    ours = {
        "metrics": _metrics({"a": [600.0] * 20, "small": [9000.0] * 3}, {"a": 0.9}),
        "policy": "metasched",
    }
    base = {"metrics": _metrics({"a": [200.0] * 20, "small": [0.0] * 3}, {"a": 1.0}), "policy": "slurmlike"}
    section = tenant_section(ours, base)
    assert (
        section["min_jobs"] == MIN_JOBS
        and section["floor_s"] == FLOOR_S
        and section["baseline"] == "slurmlike"
    )
    assert set(section["tenants"]) == {"a"}
    assert section["tenants"]["a"] == {
        "jobs": 20,
        "mean_s": 600.0,
        "p95_s": 600.0,
        "max_s": 600.0,
        "share_ratio": 0.9,
        "ratio": pytest.approx(3.0),
    }
    assert section["worst"] == {"tenant": "a", "ratio": pytest.approx(3.0)}
    alone = tenant_section(ours, None)
    assert alone["baseline"] is None and alone["worst"] is None and alone["tenants"]["a"]["ratio"] is None


def test_from_a_simulated_run(tmp_path):
    # one GPU, FIFO, 21 jobs of tenant a at t=0 (100 s each) and 2 of b at 5,000 s:
    # a waits 0, 100, …, 2,000 s; b's first job starts at once, its second waits 100 s
    rows = [(f"a{i:02d}", 0, 100, 1, "a") for i in range(21)] + [
        ("b1", 5000, 100, 1, "b"),
        ("b2", 5000, 100, 1, "b"),
    ]
    trace = write_trace(tmp_path / "t.csv", rows)
    spec = RunSpec(
        trace=trace,
        cluster="1x1",
        policy="fifo",
        config=SimConfig(warmup_hours=0, cycle_interval_s=0, idle_cycle_s=0, strict=False),
    )
    out = tenant_delays(run(spec).report)
    assert (out["a"].jobs, out["a"].mean_s, out["a"].p95_s, out["a"].max_s) == (21, 1000.0, 1900.0, 2000.0)
    assert (out["b"].jobs, out["b"].mean_s, out["b"].max_s) == (2, 50.0, 100.0)
    assert TenantDelay.from_dict(out["a"].to_dict()) == out["a"]


def test_the_table_marks_each_policy_worst_tenant_but_not_the_baseline():
    from meta.sim.report import tenant_table, worst_cell

    base = {"metrics": _metrics({"a": [200.0] * 20, "b": [100.0] * 30}, {}), "policy": "slurmlike"}
    ours = {"metrics": _metrics({"a": [600.0] * 20, "b": [150.0] * 30}, {}), "policy": "metasched"}
    for report in (base, ours):
        report["tenant_delays"] = tenant_section(report, base)
    text = tenant_table([base, ours], as_markdown=True)
    row_a = next(line for line in text.splitlines() if line.startswith("| a (20)"))
    row_b = next(line for line in text.splitlines() if line.startswith("| b (30)"))
    assert row_a.endswith("· - · **3.00×** |")  # a: 600 / 200, the worst of metasched
    assert "**" not in row_b and row_b.endswith("· - · 1.50× |")
    assert text.count("**") == 2  # nothing marked in slurm-like's own column
    assert (worst_cell(ours), worst_cell(base)) == ("a 3.00×", "(baseline)")
