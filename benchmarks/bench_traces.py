"""bench_traces: the three public traces × three policies on contended clusters.

Usage (from the repo root)::

    python benchmarks/bench_traces.py                  # Markdown table
    python benchmarks/bench_traces.py --json           # the same figures as JSON
    python benchmarks/bench_traces.py --only philly --policies slurm,metasched

Traces are read from ``../shared/traces`` relative to the repo root unless ``--traces-dir``
says otherwise. Each configuration is chosen to contend (see the traces README: judge
contention by the share of jobs that wait under FIFO) and the table says which cluster size
and load were used. The targets of the issue are checked at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from meta.sim.config import SimConfig  # noqa: E402
from meta.sim.report import markdown  # noqa: E402
from meta.sim.run import RunSpec, prepare, run  # noqa: E402
from meta.sim.tenant_delays import BASELINE, MAX_TENANT_RATIO, tenant_section  # noqa: E402


@dataclass(frozen=True)
class Setup:
    """Setup is one benchmarked configuration: trace file, cluster, contention knobs."""

    name: str
    trace: str  # relative to the traces dir
    cluster: str
    scale: float = 1.0
    load: float = 1.0
    why: str = ""


SETUPS = (
    Setup("philly", "philly/philly_2017-10-09_to_10-16.csv", "philly150",
          why="Philly week on 150 × 8-GPU nodes (1,200 GPUs; preset philly150, VC weights as tenant shares "
              "and guarantees): most jobs wait under FIFO (traces README)"),
    Setup("crux", "alibaba_crux2023/crux2023_jobs_days00-10.csv", "crux", scale=0.15,
          why="Crux topology scaled to 15% by whole ToRs (128 hosts, 1,024 GPUs): 36% of jobs wait > 0 under FIFO, "
              "gangs of ≥ 64 GPUs contend and the 744-GPU job still fits"),
    Setup("pai", "alibaba_pai2023/pai2023_openb_pods_creation_lt_day135.csv", "pai2023", scale=0.01,
          why="PAI node list scaled to 1% (12 nodes, 50 GPUs): the pod sample keeps only ~37 GPUs busy "
              "on average, so the full 6,212-GPU cluster never contends; ~73% of pods wait > 60 s under FIFO"),
)
POLICIES = ("fifo", "slurm", "metasched")
SIM = SimConfig(strict=False)  # the daemon's period model (2 s grid, idle cycles every 60 s)


def run_setup(setup: Setup, traces_dir: Path, policies: list[str], max_jobs: int | None) -> list[dict[str, Any]]:
    """run_setup simulates every policy on one configuration (trace prepared once)."""
    spec = RunSpec(trace=traces_dir / setup.trace, cluster=setup.cluster, policy=policies[0],
                   load=setup.load, scale=setup.scale, max_jobs=max_jobs, config=SIM)
    prepared = prepare(spec)
    reports = []
    for policy in policies:
        spec.policy = policy
        started = time.perf_counter()
        report = run(spec, prepared=prepared).report
        report["setup"] = setup.name
        report["why"] = setup.why
        report["metrics"]["wall_s"] = time.perf_counter() - started
        print(f"  {setup.name:7s} {report['policy']:10s} {report['metrics']['wall_s']:6.1f} s", file=sys.stderr)
        reports.append(report)
    baseline = next((r for r in reports if r["policy"] == BASELINE), None)
    for report in reports:  # per-tenant figures beside slurm-like's (issue 21)
        report["tenant_delays"] = tenant_section(report, baseline)
    return reports


def philly_pair(traces_dir: Path, sim: SimConfig = SIM, load: float = 1.0,
                policy_config: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """philly_pair runs slurm-like and metasched on the Philly setup (trace prepared once): their metrics."""
    setup = next(s for s in SETUPS if s.name == "philly")
    spec = RunSpec(trace=traces_dir / setup.trace, cluster=setup.cluster, policy="slurm", load=load, config=sim)
    prepared = prepare(spec)
    slurm = run(spec, prepared=prepared).report["metrics"]
    spec.policy, spec.policy_config = "metasched", policy_config
    return slurm, run(spec, prepared=prepared).report["metrics"]


def philly_one(traces_dir: Path, sim: SimConfig, policy: str, policy_config: Any = None) -> dict[str, Any]:
    """philly_one runs one policy on the Philly setup: its metrics."""
    setup = next(s for s in SETUPS if s.name == "philly")
    spec = RunSpec(trace=traces_dir / setup.trace, cluster=setup.cluster, policy=policy, config=sim,
                   policy_config=policy_config)
    return run(spec).report["metrics"]


def _row(r: dict[str, Any]) -> list[str]:
    """_row is one Markdown row of a report."""
    m = r["metrics"]
    q, big = m["queue"], m["big_jobs"]
    big_cell = f"{big['queue']['max']:,.0f} ({big['n']})" if big["n"] else "–"
    return [
        r["setup"], f"{r['cluster']['nodes']} / {r['cluster']['gpus']:,}", _knobs(r), r["policy"],
        f"{m['jobs']['completed_measured']:,}", f"{q['mean']:,.0f}", f"{q['p50']:,.0f}", f"{q['p99']:,.0f}",
        f"{q['max']:,.0f}", big_cell, f"{m['jct']['mean']:,.0f}", f"{m['physical_bound']:.2f}",
        f"{100 * m['utilization']:.1f} / {100 * m['useful_utilization']:.1f}",
        f"{m['fairness']['jain']:.4f}", f"{m['preemptions']} / {m['lost_gpu_hours']:,.0f}",
        f"{m['stranded_gpus']['mean']:.1f}", _worst_tenant(r), f"{m['wall_s']:.1f}",
    ]


def _worst_tenant(r: dict[str, Any]) -> str:
    """_worst_tenant is the worst-off tenant (≥ 20 jobs) and its floored mean ratio to slurm-like, or '–'."""
    worst = r.get("tenant_delays", {}).get("worst")
    return "–" if worst is None else f"{worst['tenant']} {worst['ratio']:.2f}×"


def _knobs(r: dict[str, Any]) -> str:
    """_knobs says how contention was made: load factor and cluster scale."""
    return f"load ×{r['load']:g}, scale ×{r['cluster']['scale']:g}"


HEADERS = [
    "trace", "nodes / GPUs", "contention", "policy", "jobs", "queue mean (s)", "p50", "p99", "max",
    "max queue ≥64 GPUs (n)", "JCT mean (s)", "JCT / run time", "util % busy / useful", "Jain",
    "preempt / lost GPU-h", "stranded GPUs", "worst tenant ×slurm", "wall (s)",
]


def _by(reports: list[dict[str, Any]], setup: str, policy: str) -> dict[str, Any] | None:
    """_by finds one report."""
    return next((r for r in reports if r["setup"] == setup and r["policy"] == policy), None)


def _ratio(a: float, b: float) -> str:
    """_ratio renders a / b as '0.62×' ('–' when b is 0)."""
    return f"{a / b:.2f}×" if b else "–"


def _capacity_gpu_h(m: dict[str, Any], gpus: int) -> float:
    """_capacity_gpu_h is the cluster's GPU-hours over the measured window."""
    return gpus * (m["window_s"][1] - m["window_s"][0]) / 3600.0


def targets(reports: list[dict[str, Any]]) -> list[tuple[str, bool, str]]:
    """targets checks issue 14's goals on the runs that exist: (goal, met, figures)."""
    out = []
    ms, sl = _by(reports, "philly", "metasched"), _by(reports, "philly", "slurmlike")
    if ms and sl:
        a, b = ms["metrics"], sl["metrics"]
        lost = a["lost_gpu_hours"] / max(_capacity_gpu_h(a, ms["cluster"]["gpus"]), 1e-9)
        out += [
            ("Philly week 1: mean queue ≤ 0.7 × slurm", a["queue"]["mean"] <= 0.7 * b["queue"]["mean"],
             f"{a['queue']['mean']:,.0f} vs {0.7 * b['queue']['mean']:,.0f} "
             f"({_ratio(a['queue']['mean'], b['queue']['mean'])})"),
            ("Philly week 1: p99 queue ≤ slurm", a["queue"]["p99"] <= b["queue"]["p99"],
             f"{a['queue']['p99']:,.0f} vs {b['queue']['p99']:,.0f}"),
            ("Philly week 1: useful utilization ≥ slurm − 0.5 pt",
             a["useful_utilization"] >= b["useful_utilization"] - 0.005,
             f"{100 * a['useful_utilization']:.2f}% vs {100 * b['useful_utilization']:.2f}%"),
            ("Philly week 1: Jain ≥ slurm − 0.001", a["fairness"]["jain"] >= b["fairness"]["jain"] - 0.001,
             f"{a['fairness']['jain']:.4f} vs {b['fairness']['jain']:.4f}"),
            ("Philly week 1: lost GPU-h ≤ 0.2% of capacity", lost <= 0.002,
             f"{a['lost_gpu_hours']:,.0f} GPU-h = {100 * lost:.3f}%"),
        ]
        worst = ms.get("tenant_delays", {}).get("worst")
        if worst is not None:
            out.append((f"Philly week 1: no tenant (≥ 20 jobs) > {MAX_TENANT_RATIO:g} × its slurm mean (60 s floor)",
                        worst["ratio"] <= MAX_TENANT_RATIO, f"worst {worst['tenant']} {worst['ratio']:.2f}×"))
    ms, sl = _by(reports, "crux", "metasched"), _by(reports, "crux", "slurmlike")
    if ms and sl:
        a, b = ms["metrics"], sl["metrics"]
        out += [
            ("Crux: max queue of ≥64-GPU jobs ≤ 2 × slurm",
             a["big_jobs"]["queue"]["max"] <= 2 * b["big_jobs"]["queue"]["max"],
             f"{a['big_jobs']['queue']['max']:,.0f} vs {2 * b['big_jobs']['queue']['max']:,.0f}"),
            ("Crux: mean queue ≤ 0.7 × slurm", a["queue"]["mean"] <= 0.7 * b["queue"]["mean"],
             f"{a['queue']['mean']:,.0f} vs {0.7 * b['queue']['mean']:,.0f} "
             f"({_ratio(a['queue']['mean'], b['queue']['mean'])})"),
        ]
    return out


def main(argv: list[str] | None = None) -> int:
    """main runs the benchmark and prints the Markdown table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces-dir", type=Path, default=REPO.parent / "shared" / "traces")
    parser.add_argument("--only", default=",".join(s.name for s in SETUPS), help="philly,crux,pai")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--max-jobs", type=int, default=None, help="only the first N jobs (smoke runs)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not args.traces_dir.is_dir():
        print(f"bench_traces: traces dir not found: {args.traces_dir}", file=sys.stderr)
        return 2
    wanted = set(args.only.split(","))
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    reports: list[dict[str, Any]] = []
    for setup in SETUPS:
        if setup.name in wanted:
            reports += run_setup(setup, args.traces_dir, policies, args.max_jobs)
    checks = targets(reports)
    if args.json:
        print(json.dumps({"runs": reports, "targets": [
            {"goal": g, "met": ok, "figures": f} for g, ok, f in checks]}, indent=2, sort_keys=True))
        return 0
    print(markdown(HEADERS, [_row(r) for r in reports]))
    print()
    for setup in SETUPS:
        if setup.name in wanted:
            print(f"- **{setup.name}**: {setup.why}")
    print("- Jain's index is 1.0 on Crux and PAI: they carry no tenants (every job is 'unknown')")
    print("- worst tenant ×slurm: the tenant with ≥ 20 jobs whose mean queue is the highest multiple of its "
          "slurm-like mean, both floored at 60 s (meta/sim/tenant_delays.py; issue 21's rule: ≤ 1.1)")
    print(f"- decisions on the daemon's {SIM.cycle_interval_s:g} s period, and every {SIM.idle_cycle_s:g} s while work waits; warm-up per preset (Philly 150x8: 24 h); "
          "runtime estimate = duration rounded up to a time-limit bucket, the same for every policy")
    print("- metasched: the shipped SchedulerConfig defaults (meta/policy/config.py, chosen by "
          "benchmarks/tune_policy.py); slurm = slurmlike (multifactor + EASY backfill); queue/JCT in seconds, "
          "util over the measured window (useful = busy − discarded work − checkpoint restores); "
          "lost GPU-h = discarded work + restores; preemptions and losses of measured jobs; "
          "JCT / run time = the physical bound (1 = nobody waited)")
    if checks:
        print()
        print(markdown(["target", "met", "metasched vs bound"], [[g, "yes" if ok else "**no**", f] for g, ok, f in checks]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
