"""bench_loads: the Philly targets of issue 3 across load factors, not only at the one week as given.

Usage (from the repo root)::

    python benchmarks/bench_loads.py                       # loads 0.9, 0.95, 1, 1.05, 1.1
    python benchmarks/bench_loads.py --loads 1,1.2 --json

One simulated week is one sample of a chaotic system: a change that moves one burst moves the
mean queue delay by ±10%. Compressing or stretching arrivals (``--load``) gives neighbouring
samples of the same workload, so a policy is judged by how it does across them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_traces import philly_pair  # noqa: E402
from meta.sim.report import markdown  # noqa: E402

DEFAULT_LOADS = "0.9,0.95,1,1.05,1.1"


def measure(load: float, traces_dir: Path) -> dict[str, Any]:
    """measure runs slurm-like and metasched on the Philly setup at one load factor."""
    slurm, ours = philly_pair(traces_dir, load=load)
    print(f"  load ×{load:g}", file=sys.stderr)
    return {"load": load, "metasched": ours, "slurm": slurm}


def checks(r: dict[str, Any]) -> dict[str, bool]:
    """checks are the issue's Philly targets for one load."""
    a, b = r["metasched"], r["slurm"]
    return {
        "mean ≤ 0.5×": a["queue"]["mean"] <= 0.5 * b["queue"]["mean"],
        "p99 ≤": a["queue"]["p99"] <= b["queue"]["p99"],
        "util ≥ −1 pt": a["utilization"] >= b["utilization"] - 0.01,
        "Jain ≥": a["fairness"]["jain"] >= b["fairness"]["jain"] - 1e-9,
    }


def _row(r: dict[str, Any]) -> list[str]:
    """_row is one Markdown row."""
    a, b = r["metasched"], r["slurm"]
    met = checks(r)
    return [
        f"×{r['load']:g}", f"{b['queue']['mean']:,.0f}", f"{a['queue']['mean']:,.0f}",
        f"{a['queue']['mean'] / b['queue']['mean']:.2f}",
        f"{a['queue']['p99']:,.0f} / {b['queue']['p99']:,.0f}",
        f"{100 * a['utilization']:.1f} / {100 * b['utilization']:.1f}",
        f"{a['fairness']['jain']:.5f} / {b['fairness']['jain']:.5f}",
        ", ".join(name for name, ok in met.items() if not ok) or "all",
    ]


HEADERS = ["load", "slurm mean (s)", "metasched mean (s)", "ratio", "p99 ms / slurm", "util % ms / slurm",
           "Jain ms / slurm", "targets missed"]


def main(argv: list[str] | None = None) -> int:
    """main runs every load and prints the table, the average ratio and the misses (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces-dir", type=Path, default=REPO.parent / "shared" / "traces")
    parser.add_argument("--loads", default=DEFAULT_LOADS, help="comma-separated load factors")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not args.traces_dir.is_dir():
        print(f"bench_loads: traces dir not found: {args.traces_dir}", file=sys.stderr)
        return 2
    try:
        loads = [float(x) for x in args.loads.split(",") if x.strip()]
    except ValueError:
        print(f"bench_loads: --loads wants numbers like 0.9,1,1.1, not {args.loads!r}", file=sys.stderr)
        return 2
    rows = [measure(load, args.traces_dir) for load in loads]
    if args.json:
        print(json.dumps([r | {"checks": checks(r)} for r in rows], indent=2, sort_keys=True))
        return 0
    print(markdown(HEADERS, [_row(r) for r in rows]))
    ratios = [r["metasched"]["queue"]["mean"] / r["slurm"]["queue"]["mean"] for r in rows]
    print(f"\nmean-queue ratio over {len(rows)} loads: average {sum(ratios) / len(ratios):.2f}, "
          f"best {min(ratios):.2f}, worst {max(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
