"""bench_clusters: one metasched over two Slurm clusters vs pinned, earliest-at-submit and racing (issue 26).

Usage (from the repo root)::

    python benchmarks/bench_clusters.py                        # Markdown tables, progress on stderr
    python benchmarks/bench_clusters.py --json /tmp/clusters.json
    python benchmarks/bench_clusters.py --weeks oct09 --modes metasched,racing --max-jobs 3000

The four shared Philly weeks (``../shared/traces/philly``) replay on philly150 split by node count
into two Slurm clusters of 75 × 8 GPUs (``philly150@2``) at load ×1, the setup ``bench_traces.py``
runs, under four modes (``meta/sim/multicluster.py``):

* ``metasched`` — the shipped metasched policy over both clusters, jobs unconfined;
* ``pinned`` — the same policy, each tenant confined to one cluster: named tenants balanced by
  their GPU-hours in the *other three* weeks (never the scored one), largest first onto the cluster
  with the least demand per GPU; the trace's ``unknown`` rows (no VC label: many users) per job by
  a stable hash;
* ``earliest`` — the same policy, each job confined at submit to the cluster where Slurm's will-run
  test starts it earliest, never moved (``sbatch -M c1,c2``);
* ``racing`` — federation: a Slurm-like scheduler per cluster, every job queued on both, the first
  start wins.

``--modes hashed`` adds a diagnostic: the same policy with every job confined to a cluster by a hash of
its id. ``--cluster philly150 --modes metasched,racing --outage ''`` runs the unsplit site for reference
(on one cluster racing is plain slurm-like; pinned and earliest need two clusters).

One outage scenario is added: week ``oct09`` with cluster c1 dark from hour 48 to 60 of the trace
(``--outage``), chosen before any run. The targets of issue 26 are checked per scenario: metasched's
mean queue ≤ 0.7× pinned's and ≤ 0.85× earliest's, its p99 ≤ each other mode's, and no tenant with
≥ 20 jobs above 1.1× its mean under racing (means floored at 60 s, ``meta/sim/tenant_delays.py``).
No setting here was tuned: the policy is the shipped default (or `--policy-config FILE` for the metasched modes), the routers have no knobs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from meta.config.policy_file import load_policy_config  # noqa: E402
from meta.sim.cluster import load_cluster  # noqa: E402
from meta.sim.config import SimConfig  # noqa: E402
from meta.sim.multicluster import (  # noqa: E402
    DIAGNOSTIC_MODES,
    MODES,
    cluster_capacity,
    clusters_by_tenant,
    mode_spec,
    tenant_demand,
)
from meta.sim.outages import Outage, parse_outage  # noqa: E402
from meta.sim.report import markdown  # noqa: E402
from meta.sim.run import RunSpec, prepare, run  # noqa: E402
from meta.sim.tenant_delays import MAX_TENANT_RATIO, tenant_delays, tenant_ratios  # noqa: E402
from meta.sim.trace import load_trace  # noqa: E402

WEEKS = {
    "oct09": "philly/philly_2017-10-09_to_10-16.csv",
    "oct16": "philly/philly_2017-10-16_to_10-23.csv",
    "oct23": "philly/philly_2017-10-23_to_10-30.csv",
    "oct30": "philly/philly_2017-10-30_to_11-06.csv",
}
CLUSTER = "philly150@2"  # 150 × 8 GPUs cut by node count into c1, c2 of 75 nodes each
OUTAGE_WEEK, OUTAGE = "oct09", "c1@48-60"
SIM = SimConfig(strict=False)  # the daemon's period model, as bench_traces.py
TARGET_PINNED, TARGET_EARLIEST = 0.7, 0.85
BASELINE = "racing"  # every tenant's mean is compared with its mean under racing


@dataclass(frozen=True)
class Job:
    """Job is one simulation: a scenario (week, outage) under one mode."""

    scenario: str
    week: str
    mode: str
    trace: str
    outages: tuple[Outage, ...]
    cluster: str
    load: float
    max_jobs: int | None
    demand: tuple[tuple[str, float], ...]  # tenant GPU-hours of the other weeks (pinned)
    policy_config: str | None = None  # a policy file for the metasched modes (racing stays Slurm-like)


def other_weeks_demand(traces_dir: Path, week: str) -> dict[str, float]:
    """other_weeks_demand is each named tenant's GPU-hours over the shared weeks other than ``week``."""
    jobs = []
    for name, path in WEEKS.items():
        if name != week and (traces_dir / path).is_file():
            jobs += load_trace(traces_dir / path)[0]
    return tenant_demand(jobs)


def simulate(job: Job) -> dict[str, Any]:
    """simulate runs one mode on one scenario: its report, lightened for JSON."""
    started = time.perf_counter()
    base = RunSpec(trace=job.trace, cluster=job.cluster, policy="metasched", load=job.load, max_jobs=job.max_jobs,
                   config=replace(SIM, outages=job.outages))
    prepared = prepare(base)
    spec = mode_spec(job.mode, base, cluster_capacity(prepared[2]), dict(job.demand))
    if job.policy_config and spec.policy == "metasched":
        spec = replace(spec, policy_config=load_policy_config(Path(job.policy_config)))
    outcome = run(spec, prepared=prepared)
    report = outcome.report
    report["metrics"]["stranded_gpus"].pop("series_h", None)
    report.update(scenario=job.scenario, week=job.week, mode=job.mode, wall_s=time.perf_counter() - started)
    report["jobs_by_cluster"] = {t: dict(sorted(c.items())) for t, c in sorted(clusters_by_tenant(
        j for j in outcome.raw.jobs if j.measured).items())}
    return report


def plan_jobs(args: argparse.Namespace) -> list[Job]:
    """plan_jobs lists every (scenario, mode) simulation the options ask for."""
    outages = (parse_outage(args.outage),) if args.outage else ()
    scenarios = [(week, week, ()) for week in args.weeks]
    if outages and args.outage_week:
        scenarios.append((f"{args.outage_week}+{args.outage}", args.outage_week, outages))
    jobs = []
    for scenario, week, outs in scenarios:
        demand = tuple(sorted(other_weeks_demand(args.traces_dir, week).items()))
        for mode in args.modes:
            jobs.append(Job(scenario, week, mode, str(args.traces_dir / WEEKS[week]), outs, args.cluster, args.load,
                            args.max_jobs, demand, str(args.policy_config) if args.policy_config else None))
    return jobs


def run_all(jobs: list[Job], workers: int) -> list[dict[str, Any]]:
    """run_all simulates every job (``workers`` processes), reporting each on stderr as it ends."""
    started = time.perf_counter()
    reports: list[dict[str, Any]] = []

    def done(report: dict[str, Any]) -> None:
        q = report["metrics"]["queue"]
        print(f"  [{len(reports) + 1}/{len(jobs)}] {report['scenario']:16s} {report['mode']:9s} "
              f"mean {q['mean']:8,.0f} s  p99 {q['p99']:9,.0f} s  {report['wall_s']:6.1f} s "
              f"(elapsed {time.perf_counter() - started:,.0f} s)", file=sys.stderr, flush=True)
        reports.append(report)

    where = jobs[0].cluster if jobs else CLUSTER
    print(f"bench_clusters: {len(jobs)} simulations on {where}, {workers} process(es)", file=sys.stderr, flush=True)
    if workers <= 1:
        for job in jobs:
            done(simulate(job))
    else:
        with ProcessPoolExecutor(workers) as pool:
            for report in pool.map(simulate, jobs):
                done(report)
    return reports


def _by(reports: list[dict[str, Any]], scenario: str, mode: str) -> dict[str, Any] | None:
    """_by finds one report."""
    return next((r for r in reports if r["scenario"] == scenario and r["mode"] == mode), None)


def worst_vs(report: dict[str, Any], baseline: dict[str, Any] | None) -> tuple[str, float, float, float] | None:
    """worst_vs is (tenant, ratio, its mean, its baseline mean) of the tenant worst off against the baseline."""
    if baseline is None or report is baseline:
        return None
    ours, base = tenant_delays(report), tenant_delays(baseline)
    ratios = tenant_ratios(ours, base)
    if not ratios:
        return None
    tenant = min(ratios, key=lambda name: (-ratios[name], name))
    return tenant, ratios[tenant], ours[tenant].mean_s, base[tenant].mean_s


def judge(reports: list[dict[str, Any]]) -> None:
    """judge adds each report's worst tenant against racing and each scenario's targets (``targets`` key)."""
    for report in reports:
        worst = worst_vs(report, _by(reports, report["scenario"], BASELINE))
        report["worst_vs_racing"] = None if worst is None else dict(zip(("tenant", "ratio", "mean_s", "racing_mean_s"),
                                                                        worst, strict=True))


def targets(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """targets checks issue 26's goals per scenario on the runs that exist."""
    out = []
    for scenario in dict.fromkeys(r["scenario"] for r in reports):
        ms = _by(reports, scenario, "metasched")
        if ms is None:
            continue
        q = ms["metrics"]["queue"]
        for mode, bound in (("pinned", TARGET_PINNED), ("earliest", TARGET_EARLIEST)):
            other = _by(reports, scenario, mode)
            if other:
                theirs = other["metrics"]["queue"]["mean"]
                out.append(_goal(scenario, f"mean queue ≤ {bound:g}× {mode}", q["mean"] <= bound * theirs,
                                 q["mean"] / theirs if theirs else None, f"{q['mean']:,.0f} vs {theirs:,.0f} s"))
        others = [r for r in reports if r["scenario"] == scenario and r["mode"] != "metasched"]
        if others:
            worst = max(others, key=lambda r: -r["metrics"]["queue"]["p99"])  # the lowest p99 is the bound
            bound = worst["metrics"]["queue"]["p99"]
            out.append(_goal(scenario, "p99 ≤ every other mode's", q["p99"] <= bound, q["p99"] / bound if bound else None,
                             f"{q['p99']:,.0f} vs {bound:,.0f} s ({worst['mode']})"))
        tenant = ms.get("worst_vs_racing")
        if tenant is not None:
            out.append(_goal(scenario, f"no tenant > {MAX_TENANT_RATIO:g}× its mean under racing",
                             tenant["ratio"] <= MAX_TENANT_RATIO, tenant["ratio"],
                             f"worst {tenant['tenant']}: {tenant['mean_s']:,.0f} vs {tenant['racing_mean_s']:,.0f} s"))
    return out


def _goal(scenario: str, goal: str, met: bool, ratio: float | None, figures: str) -> dict[str, Any]:
    """_goal is one checked target."""
    return {"scenario": scenario, "goal": goal, "met": met, "ratio": ratio, "figures": figures}


def _row(r: dict[str, Any]) -> list[str]:
    """_row is one Markdown row of a report."""
    m = r["metrics"]
    q = m["queue"]
    worst = r.get("worst_vs_racing")
    worst_cell = "–" if worst is None else (f"{worst['tenant']} {worst['mean_s']:,.0f} vs "
                                            f"{worst['racing_mean_s']:,.0f} ({worst['ratio']:.2f}×)")
    return [
        r["scenario"], r["mode"], f"{m['jobs']['completed_measured']:,}", f"{q['mean']:,.0f}", f"{q['p50']:,.0f}",
        f"{q['p99']:,.0f}", f"{q['max']:,.0f}", worst_cell,
        f"{100 * m['utilization']:.1f} / {100 * m['useful_utilization']:.1f}",
        f"{m['preemptions']} / {m['lost_gpu_hours']:,.0f}", f"{r['wall_s']:.0f}",
    ]


HEADERS = ["scenario", "mode", "jobs", "queue mean (s)", "p50", "p99", "max",
           "worst tenant vs racing: mean s (×)", "util % busy / useful", "preempt / lost GPU-h", "wall (s)"]


def summary(reports: list[dict[str, Any]], checks: list[dict[str, Any]], cluster: str = CLUSTER) -> str:
    """summary is the Markdown output: the runs, then the targets."""
    lines = [markdown(HEADERS, [_row(r) for r in reports]), ""]
    lines.append(markdown(["scenario", "target", "met", "ratio", "figures"], [
        [c["scenario"], c["goal"], "yes" if c["met"] else "**no**",
         "–" if c["ratio"] is None else f"{c['ratio']:.2f}", c["figures"]] for c in checks]))
    invalid = sum(r["metrics"]["invalid_placements"] for r in reports)
    site = "two Slurm clusters c1, c2 of 75 × 8 GPUs" if cluster == CLUSTER else "as named"
    lines += ["", f"- {cluster}: {site}; warm-up 24 h; decisions on the "
              f"{SIM.cycle_interval_s:g} s period, every {SIM.idle_cycle_s:g} s while work waits; "
              f"invalid placements over all runs: {invalid}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """main runs the benchmark and prints Markdown (and JSON with ``--json FILE``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[7:]))
    parser.add_argument("--traces-dir", type=Path, default=REPO.parent / "shared" / "traces")
    parser.add_argument("--weeks", default=",".join(WEEKS), help=f"comma-separated, of {', '.join(WEEKS)}")
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"comma-separated, of {', '.join(MODES + DIAGNOSTIC_MODES)}")
    parser.add_argument("--cluster", default=CLUSTER, help="the site (a meta.sim cluster ref; default: philly150 in 2)")
    parser.add_argument("--load", type=float, default=1.0, help="arrival compression (bench_traces: 1)")
    parser.add_argument("--outage", default=OUTAGE, help="cluster@START-END in trace hours ('' = no outage scenario)")
    parser.add_argument("--outage-week", default=OUTAGE_WEEK, help="the week the outage scenario replays ('' = none)")
    parser.add_argument("--max-jobs", type=int, default=None, help="only the first N jobs of each week (smoke runs)")
    parser.add_argument("--jobs", type=int, default=1, help="simulations in parallel (processes)")
    parser.add_argument("--policy-config", type=Path, default=None, metavar="FILE",
                        help="policy settings (YAML) for the metasched modes; racing stays Slurm-like")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="also write every report and target here")
    args = parser.parse_args(argv)
    args.weeks = [w.strip() for w in args.weeks.split(",") if w.strip()]
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [w for w in args.weeks if w not in WEEKS] + [m for m in args.modes if m not in MODES + DIAGNOSTIC_MODES]
    if unknown or (args.outage_week and args.outage_week not in WEEKS):
        parser.error(f"unknown week or mode: {', '.join(unknown or [args.outage_week])}")
    confined = [m for m in args.modes if m not in ("metasched", "racing")]
    if confined and len(load_cluster(args.cluster).cluster_names()) < 2:
        parser.error(f"{', '.join(confined)} need two Slurm clusters; {args.cluster} has one")
    if not args.traces_dir.is_dir():
        print(f"bench_clusters: traces dir not found: {args.traces_dir}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    reports = run_all(plan_jobs(args), args.jobs)
    judge(reports)
    checks = targets(reports)
    print(summary(reports, checks, args.cluster))
    total = time.perf_counter() - started
    print(f"\nbench_clusters: {len(reports)} simulations in {total:,.0f} s", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({"cluster": args.cluster, "load": args.load, "wall_s": total, "runs": reports,
                                         "targets": checks}, indent=1, sort_keys=True, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
