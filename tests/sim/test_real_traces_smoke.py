"""Smoke runs of the first jobs of each shared trace under every policy (strict plan checks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from meta.sim.config import SimConfig
from meta.sim.run import RunSpec, run

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
CASES = [
    ("philly/philly_2017-10-09_to_10-16.csv", "philly150", 1.0),
    ("alibaba_crux2023/crux2023_jobs_days00-10.csv", "crux", 0.15),
    ("alibaba_pai2023/pai2023_openb_pods_creation_lt_day135.csv", "pai2023", 0.01),
]


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["fifo", "slurm", "metasched"])
@pytest.mark.parametrize(("trace", "cluster", "scale"), CASES)
def test_first_jobs_run_to_completion(trace, cluster, scale, policy):
    path = TRACES / trace
    if not path.is_file():
        pytest.skip(f"{path} not available: the shared traces folder is not beside this checkout")
    config = SimConfig(cycle_interval_s=60, strict=True)  # an invalid plan raises
    outcome = run(RunSpec(trace=path, cluster=cluster, policy=policy, scale=scale, max_jobs=300, config=config))
    jobs = outcome.report["metrics"]["jobs"]
    assert jobs["unfinished"] == 0 and jobs["total"] == 300
    assert all(j.queue_s >= 0 and (j.jct or 0) >= j.trace.duration_s for j in outcome.raw.jobs if j.end_time)
