"""A noisy neighbour in the simulator (issue 16): 20,000 jobs from one tenant through the submit limits.

The flooding tenant (Fairshare 1 against 70/30, as ``research`` on the dev cluster) sends 20,000
one-GPU jobs at one instant; the API's limits (``meta.policy.admission``, here 500 pending jobs
and the default rate) admit them as its earlier ones end. The two other tenants' mean queue delay
and GPU share (simulated time: deterministic) stay within 10% of the run without the flood; the
slowest policy call's wall time is printed (benchmarks/bench_flood.py reports it). About a minute.
"""

from __future__ import annotations

from meta.config.period import DEFAULT_PERIOD_S
from meta.sim.flood import OTHERS, FloodScenario, run_flood, within


def test_a_20000_job_flood_leaves_the_others_queue_delay_and_share_within_10_percent() -> None:
    scenario = FloodScenario()
    baseline = run_flood(scenario, flood=False)
    flooded = run_flood(scenario, flood=True)
    print(f"\nbaseline {baseline.to_dict()}\nflooded  {flooded.to_dict()}")
    assert flooded.jobs == baseline.jobs and all(baseline.jobs[t] > 50 for t in OTHERS)
    assert all(within(flooded, baseline).values()), within(flooded, baseline)
    assert flooded.flood_done == scenario.flood_jobs  # every flooded job ran in the end
    assert flooded.refused.get("tenant_pending", 0) > 0  # the limit did the admitting
    cap = scenario.flood_limits.max_pending
    assert cap is not None and cap <= flooded.max_pending <= cap + 50  # the flood's 500 and a few of the others'
    assert flooded.flood_share > 0.1  # the flood ran on what the others left idle
    # the policy's wall time is a benchmark's figure (benchmarks/bench_flood.py), printed, not asserted: a
    # loaded CI host's pauses are not the policy's (measured 150 ms at most against the 2 s period)
    print(f"slowest policy call {flooded.policy_max_s * 1000:.0f} ms of the {DEFAULT_PERIOD_S:g} s period")
