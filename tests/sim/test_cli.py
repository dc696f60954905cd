"""CLI tests for ``metasched simulate`` with click's CliRunner."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cli.simulate_cmd import simulate

BASE = ["--cluster", "2x4", "--warmup-hours", "0", "--cycle-interval", "0"]


def _invoke(args):
    return CliRunner().invoke(simulate, args)


def test_table(tiny_trace):
    result = _invoke(["--trace", str(tiny_trace), *BASE, "--policy", "fifo"])
    assert result.exit_code == 0, result.output
    assert "queue delay mean" in result.output and "fifo" in result.output
    assert "note: no warm-up: every job is measured" in result.output


def test_json_has_the_same_figures(tiny_trace):
    result = _invoke(["--trace", str(tiny_trace), *BASE, "--compare", "fifo,slurm", "--json"])
    assert result.exit_code == 0, result.output
    runs = json.loads(result.output)["runs"]
    assert [r["policy"] for r in runs] == ["fifo", "slurmlike"]
    # Hand-checked in test_tiny_trace: FIFO queue delays 0, 0, 290, 380, 370.
    assert runs[0]["metrics"]["queue"]["mean"] == pytest.approx(208.0)
    assert runs[0]["cluster"]["gpus"] == 8


def test_plot_writes_a_png(tiny_trace, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "plot.png"
    result = _invoke(["--trace", str(tiny_trace), *BASE, "--compare", "fifo,slurm", "--plot", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--trace", "/nonexistent/trace.csv", "--cluster", "2x4"], "trace file not found"),
        (["--cluster", "no-such-cluster"], "unknown cluster"),
        (["--cluster", "2x4", "--policy", "lottery"], "unknown policy"),
        (["--cluster", "2x4", "--load", "0"], "must be positive"),
        (["--cluster", "2x4", "--policy-config", "/nonexistent/policy.yaml"], "cannot read"),
    ],
)
def test_bad_input_exits_2_without_traceback(tiny_trace, args, message):
    if "--trace" not in args:
        args = ["--trace", str(tiny_trace), *args]
    result = _invoke(args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_bad_trace_columns_exit_2(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("x,y\n1,2\n")
    result = _invoke(["--trace", str(bad), "--cluster", "2x4"])
    assert result.exit_code == 2 and "missing column" in result.output


def test_cluster_yaml_file(tiny_trace, tmp_path):
    spec = tmp_path / "c.yaml"
    spec.write_text(
        "name: mine\nnode_groups:\n  - {name: a, count: 2, gpus: 4, gpu_type: a100, cpus: 32, memory: 256G, switch_size: 2}\n"
    )
    result = _invoke(["--trace", str(tiny_trace), "--cluster", str(spec), "--warmup-hours", "0", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["runs"][0]["cluster"] == {"name": "mine", "nodes": 2, "gpus": 8, "scale": 1.0}


def test_invalid_cluster_yaml_exits_2(tiny_trace, tmp_path):
    spec = tmp_path / "c.yaml"
    spec.write_text("name: bad\nnode_groups:\n  - {name: a, count: -1}\n")
    result = _invoke(["--trace", str(tiny_trace), "--cluster", str(spec)])
    assert result.exit_code == 2 and "invalid cluster file" in result.output


def test_policy_config_file_sets_metasched_over_the_defaults(tiny_trace, tmp_path):
    # Time-limit estimates: every job's is the 30-min bucket. Tuned (one held start): C's gang is
    # held at A's *estimated* end, D and E (30 min each) would delay it, so all wait for C:
    # C 300–400, then D and E — the FIFO delays 0, 0, 290, 380, 370 (mean 208).
    # With no held starts (the file): D takes node 1 at 100–160, then E (tenant z, no usage)
    # 160–560, and C gets both nodes only at 560: delays 0, 0, 550, 80, 130 (mean 152).
    policy = tmp_path / "policy.yaml"
    policy.write_text("max_held_reservations: 0\n")
    args = ["--trace", str(tiny_trace), *BASE, "--compare", "fifo,metasched", "--json"]
    tuned = json.loads(_invoke(args).output)["runs"]
    result = _invoke([*args, "--policy-config", str(policy)])
    assert result.exit_code == 0, result.output
    fifo, ours = json.loads(result.output)["runs"]
    assert tuned[1]["metrics"]["queue"]["mean"] == pytest.approx(208.0)
    assert fifo["metrics"]["queue"]["mean"] == pytest.approx(208.0)  # baselines ignore the file
    assert ours["metrics"]["queue"]["mean"] == pytest.approx((550 + 80 + 130) / 5)


def test_a_misspelt_policy_setting_is_named(tiny_trace, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text("short_job_wieght: 3\n")
    result = _invoke(["--trace", str(tiny_trace), *BASE, "--policy-config", str(policy)])
    assert result.exit_code == 2
    assert "unknown setting 'short_job_wieght' (did you mean 'short_job_weight'?)" in result.output


def test_json_has_the_per_tenant_figures_beside_slurm_like(tiny_trace):
    args = ["--trace", str(tiny_trace), *BASE, "--compare", "fifo,slurm", "--json", "--tenant-min-jobs", "2"]
    result = _invoke(args)
    assert result.exit_code == 0, result.output
    fifo, slurm = json.loads(result.output)["runs"]
    section = fifo["tenant_delays"]
    assert set(section) == {"min_jobs", "floor_s", "baseline", "tenants", "worst"}
    assert (section["min_jobs"], section["floor_s"], section["baseline"]) == (2, 60.0, "slurmlike")
    # z has one job: below the threshold, left out; x and y have two each
    assert set(section["tenants"]) == {"x", "y"}
    assert set(section["tenants"]["y"]) == {"jobs", "mean_s", "p95_s", "max_s", "share_ratio", "ratio"}
    # FIFO delays of y's jobs C and D: 290 and 380 s
    assert section["tenants"]["y"]["mean_s"] == pytest.approx(335.0)
    assert section["tenants"]["y"]["max_s"] == pytest.approx(380.0)
    assert section["tenants"]["y"]["share_ratio"] == fifo["metrics"]["fairness"]["share_ratio"]["y"]
    expected = max(335.0, 60) / max(slurm["metrics"]["by_tenant"]["y"]["queue"]["mean"], 60)
    assert section["tenants"]["y"]["ratio"] == pytest.approx(expected)
    assert section["worst"]["tenant"] in {"x", "y"}
    assert slurm["tenant_delays"]["worst"]["ratio"] == pytest.approx(1.0)  # the baseline against itself


def test_without_slurm_like_there_is_no_ratio(tiny_trace):
    result = _invoke(["--trace", str(tiny_trace), *BASE, "--policy", "fifo", "--json"])
    assert result.exit_code == 0, result.output
    section = json.loads(result.output)["runs"][0]["tenant_delays"]
    # default threshold 20: no tenant of the tiny trace is judged
    assert section["baseline"] is None and section["worst"] is None and section["tenants"] == {}


def test_table_marks_the_worst_tenant(tiny_trace):
    result = _invoke(["--trace", str(tiny_trace), *BASE, "--compare", "fifo,slurm", "--tenant-min-jobs", "2"])
    assert result.exit_code == 0, result.output
    assert "worst tenant mean queue ×slurm-like" in result.output
    assert "◀ worst" in result.output and "tenants with ≥ 2 jobs" in result.output
    assert "y (2)" in result.output and "z (1)" not in result.output


def test_tenant_min_jobs_must_be_positive(tiny_trace):
    result = _invoke(["--trace", str(tiny_trace), *BASE, "--tenant-min-jobs", "0"])
    assert result.exit_code == 2 and "Traceback" not in result.output
