"""bench_flood: a noisy neighbour in simulation — 20,000 jobs from one tenant vs the run without them.

Usage (from the repo root)::

    python benchmarks/bench_flood.py [--flood-jobs 20000] [--cap 500] [--json]

``meta/sim/flood.py``'s scenario (32 × 8 GPUs, tenants 70/30 at 0.6 of their guarantees and a
Fairshare-1 flooding tenant) through the API's submit limits (``meta.policy.admission``), with
the shipped policy. Prints, per other tenant, mean queue delay and GPU share with and without the
flood, and the policy's time per call. About a minute.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from meta.policy.admission import SubmitLimits  # noqa: E402
from meta.sim.flood import OTHERS, FloodScenario, run_flood, within  # noqa: E402


def main() -> None:
    """main runs the baseline and the flood and prints the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flood-jobs", type=int, default=20_000)
    parser.add_argument("--cap", type=int, default=500, help="the flooding tenant's pending-job limit")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    scenario = replace(FloodScenario(), flood_jobs=args.flood_jobs, flood_limits=SubmitLimits(max_pending=args.cap))
    baseline = run_flood(scenario, flood=False)
    flooded = run_flood(scenario, flood=True)
    if args.json:
        print(json.dumps({"baseline": baseline.to_dict(), "flood": flooded.to_dict(),
                          "within_10pct": within(flooded, baseline)}, indent=2))  # fmt: skip
        return
    print("| tenant | queue mean (s) no flood / flood | GPU share no flood / flood | within 10% |")
    print("|---|---|---|---|")
    verdict = within(flooded, baseline)
    for tenant in OTHERS:
        ok = verdict[f"{tenant} queue"] and verdict[f"{tenant} share"]
        print(f"| {tenant} | {baseline.queue_mean_s[tenant]:.2f} / {flooded.queue_mean_s[tenant]:.2f} | "
              f"{baseline.gpu_share[tenant]:.4f} / {flooded.gpu_share[tenant]:.4f} | {'yes' if ok else 'no'} |")  # fmt: skip
    print(f"\nflood: {flooded.flood_done:,} of {scenario.flood_jobs:,} jobs ran, GPU share {flooded.flood_share:.4f}, "
          f"refusals {flooded.refused}, most pending at once {flooded.max_pending}")  # fmt: skip
    print(f"policy calls: no flood {baseline.policy_calls} (mean {baseline.policy_mean_s * 1000:.1f} ms, "
          f"max {baseline.policy_max_s * 1000:.0f} ms); flood {flooded.policy_calls} "
          f"(mean {flooded.policy_mean_s * 1000:.1f} ms, max {flooded.policy_max_s * 1000:.0f} ms); "
          f"wall {flooded.wall_s:.0f} s")  # fmt: skip


if __name__ == "__main__":
    main()
