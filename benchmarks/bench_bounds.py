"""bench_bounds: how far below slurm-like can the Philly mean queue delay go, and at what price?

Usage (from the repo root)::

    python benchmarks/bench_bounds.py            # Markdown table
    python benchmarks/bench_bounds.py --json

Each row runs metasched (or an oracle configuration of it) and the slurm-like baseline on the
Philly week (philly150) under the *same* simulator settings, and reports the ratio of mean
queue delays with the other targets of issue 3 beside it. The rows separate three questions:

* does runtime knowledge help? (every policy gets each job's true duration as its estimate);
* how good is the best non-preemptive order? (no tenants, no guarantees, smallest GPU-time
  first with true durations, no aging: an oracle no real scheduler has);
* how much preemption would the 0.5x bound need? (guarantees oversubscribed to 1.5x and 2.5x
  the cluster, so tenants reclaim — preempt — more than the issue's rules allow).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_traces import SIM, philly_one, philly_pair  # noqa: E402
from meta.sim.report import markdown  # noqa: E402
from meta.sim.tuning import metasched_config  # noqa: E402

PERFECT = {"estimate": "noise", "noise_factor": 1.0}
SJF_ORACLE = {"fair_share_horizon_s": 0.0, "short_job_weight": 1e3, "short_job_gpu_exponent": 1.0, "max_wait_s": 1e12}


@dataclass(frozen=True)
class Scenario:
    """Scenario is one row: simulator overrides (shared with the baseline) and metasched overrides."""

    name: str
    sim: dict[str, Any] = field(default_factory=dict)
    policy: dict[str, Any] = field(default_factory=dict)
    within_rules: bool = True


SCENARIOS = (
    Scenario("metasched as tuned (time-limit estimates)"),
    Scenario("metasched, true durations as estimates", sim=PERFECT),
    Scenario("metasched, tenants in strict share order (the defaults before issue 14's tuning)",
             policy={"fair_share_horizon_s": None, "guarantee_rounds_up_to_task": False,
                     "guaranteed_in_share_order": True, "max_wait_s": 14400.0}),
    Scenario("non-preemptive SJF oracle (true durations, no tenants)", sim=PERFECT | {"guarantee_fraction": 0.0},
             policy=SJF_ORACLE, within_rules=False),
    Scenario("metasched, guarantees oversubscribed 1.5x", sim={"guarantee_fraction": 1.5}, within_rules=False),
    Scenario("metasched, guarantees oversubscribed 2.5x", sim={"guarantee_fraction": 2.5}, within_rules=False),
)


_BASELINES: dict[str, dict[str, Any]] = {}  # repr of the SimConfig (it holds a dict) -> metrics


def measure(scenario: Scenario, traces_dir: Path) -> dict[str, Any]:
    """measure runs the baseline (once per simulator setting) and metasched for one scenario."""
    sim = replace(SIM, **scenario.sim)
    # slurm-like ignores guarantees (it never preempts): scenarios that differ only there share its run
    key = repr(replace(sim, guarantee_fraction=0.0))
    if key in _BASELINES:
        baseline = _BASELINES[key]
        ours = philly_one(traces_dir, sim, "metasched", metasched_config(**scenario.policy))
    else:
        baseline, ours = philly_pair(traces_dir, sim, policy_config=metasched_config(**scenario.policy))
        _BASELINES[key] = baseline
    print(f"  {scenario.name}", file=sys.stderr)
    return {"scenario": scenario.name, "within_rules": scenario.within_rules, "metasched": ours, "slurm": baseline}


def _row(r: dict[str, Any]) -> list[str]:
    """_row is one Markdown row."""
    a, b = r["metasched"], r["slurm"]
    return [
        r["scenario"], "yes" if r["within_rules"] else "no",
        f"{a['queue']['mean']:,.0f}", f"{b['queue']['mean']:,.0f}", f"{a['queue']['mean'] / b['queue']['mean']:.2f}",
        f"{a['queue']['p99']:,.0f} / {b['queue']['p99']:,.0f}",
        f"{100 * a['utilization']:.1f} / {100 * b['utilization']:.1f}",
        f"{a['fairness']['jain']:.5f} / {b['fairness']['jain']:.5f}",
        f"{a['preemptions']} / {a['lost_gpu_hours']:,.0f}",
    ]


HEADERS = ["scenario", "within the issue's rules", "metasched mean (s)", "slurm mean (s)", "ratio",
           "p99 ms / slurm", "util % ms / slurm", "Jain ms / slurm", "preempt / lost GPU-h"]


def main(argv: list[str] | None = None) -> int:
    """main runs every scenario and prints the table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces-dir", type=Path, default=REPO.parent / "shared" / "traces")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not args.traces_dir.is_dir():
        print(f"bench_bounds: traces dir not found: {args.traces_dir}", file=sys.stderr)
        return 2
    rows = [measure(s, args.traces_dir) for s in SCENARIOS]
    if args.json:
        print(json.dumps(rows, indent=2, sort_keys=True))
        return 0
    print(markdown(HEADERS, [_row(r) for r in rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
