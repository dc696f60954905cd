"""bench_replay: a slice of a real trace on the real dev cluster, plain Slurm against metasched.

The same jobs (shapes, durations, accounts, users, arrival times; see benchmarks/replay/slice.py)
run twice per round: once submitted with plain ``sbatch`` (Slurm's multifactor priority with
backfill and the accounts' fair-share as deploy/devcluster sets them, 70/30), once through
``msbatch`` to one ``metasched serve`` with its shipped defaults. Rounds alternate which side
goes first (Slurm's fair-share remembers the previous side's usage). Per side it reports jobs
finished/failed, queue delay from the planned arrival (mean/median/p95/p99), Slurm's own
submit→start, makespan, GPU utilisation, per-account mean queue delay, submit latency and lag,
and the daemon's CPU; then the ratio metasched/plain of the medians over rounds, and the
simulator's prediction of both sides for the same slice with its error against the real run.

A side whose submissions fell more than 5 s behind the trace is marked invalid. The run holds
the Slurm test lock (tests that run daemons wait), and needs root, the dev cluster and the
installed CLI (``./deploy/devcluster up``, ``./deploy/install-cli``).

Run: ``python benchmarks/bench_replay.py [--rounds 2] [--jobs 120] [--span 240] [--load 1.0] [--json]``.
``--pair`` runs both sides on emu and dev2 (``deploy/devcluster up --second``): plain ``sbatch -M
emu,dev2`` (Slurm starts each job on the cluster that would start it first, at submit) against one
``metasched serve --clusters emu,dev2=...``; the load is then on the pair's 80 GPUs, the report
adds jobs per cluster, and there is no simulated prediction (the simulator's preset is one cluster).
``--policy-config FILE`` runs the metasched side (and its prediction) with a policy file over the
shipped defaults. ``--db`` takes a PostgreSQL URL whose schema is emptied (a scratch database); the default is a
fresh SQLite file, metasched's embedded default.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.replay import predict  # noqa: E402
from benchmarks.replay.sides import (  # noqa: E402
    LOCK,
    ONE_CLUSTER,
    PAIR,
    PERIOD_S,
    Clusters,
    install_cli,
    run_metasched,
    run_plain,
    say,
)
from benchmarks.replay.slice import ReplayJob, SliceSpec, cut, offered_load  # noqa: E402
from benchmarks.store import open_store  # noqa: E402
from meta.sim.trace import TraceError  # noqa: E402

TRACE = (
    Path(__file__).resolve().parents[2] / "shared" / "traces" / "philly" / "philly_2017-10-09_to_10-16.csv"
)
# the figures compared metasched/plain (lower is better for all but utilisation)
RATIOS = (
    ("queue mean", ("queue_delay_s", "mean")),
    ("queue p50", ("queue_delay_s", "p50")),
    ("queue p95", ("queue_delay_s", "p95")),
    ("queue p99", ("queue_delay_s", "p99")),
    ("makespan", ("makespan_s",)),
    ("GPU utilization", ("gpu_utilization",)),
    ("submit p99", ("submit_latency_s", "p99")),
)


def main() -> None:
    """main runs the rounds and prints the report."""
    args = _arguments()
    try:
        jobs = cut(SliceSpec(args.trace, jobs=args.jobs, span_s=args.span, load=args.load, start_h=args.start_h,
                             capacity_gpus=_clusters(args).gpus))  # fmt: skip
    except (TraceError, ValueError) as exc:
        sys.exit(f"bench_replay: {exc} (--trace names a Philly week CSV)")
    folder = Path(tempfile.mkdtemp(prefix="metasched-replay-", dir="/tmp"))
    folder.chmod(0o777)  # the users' jobs start here (sbatch's default working directory)
    clusters = _clusters(args)
    say(f"{len(jobs)} jobs, offered load {offered_load(jobs, clusters.gpus, args.span):.2f} on {clusters.gpus} GPUs"
        f"{' of emu and dev2' if args.pair else ''}, folder {folder}")
    install_cli()
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        rounds = [_round(args, jobs, folder, number) for number in range(args.rounds)]
    report = _report(args, jobs, rounds)
    print(json.dumps(report, indent=2) if args.json else _table(report))


def _arguments() -> argparse.Namespace:
    """_arguments parses the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument(
        "--start-h", type=float, default=24.0, help="window start, hours after the trace's first job"
    )
    parser.add_argument("--jobs", type=int, default=120)
    parser.add_argument(
        "--span", type=float, default=240.0, help="seconds between the first and last arrival"
    )
    parser.add_argument("--load", type=float, default=1.0, help="offered load on the 40 GPUs (80 with --pair)")
    parser.add_argument(
        "--pair", action="store_true",
        help="both clusters (deploy/devcluster up --second): plain `sbatch -M emu,dev2` against one metasched "
        "over both (serve --clusters); --load is then on the pair's 80 GPUs",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--db", default=None, help="PostgreSQL scratch URL (default: a fresh SQLite file)")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds to wait for one side's jobs")
    parser.add_argument(
        "--policy-config", type=Path, default=None,
        help="YAML of policy settings for the metasched side (serve --policy-config) and its prediction",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true")
    return parser.parse_args()


def _round(args: argparse.Namespace, jobs: list[ReplayJob], folder: Path, number: int) -> dict:
    """_round runs both sides once, plain first on even rounds."""
    order = ("plain", "metasched") if number % 2 == 0 else ("metasched", "plain")
    return {side: _side(args, jobs, folder, side, number) for side in order}


def _side(args: argparse.Namespace, jobs: list[ReplayJob], folder: Path, side: str, number: int) -> dict:
    """_side submits the slice to one side, waits for it and returns its figures."""
    prefix = f"{side[0]}{number}x{int(time.time()) % 100000}"
    say(f"round {number + 1}: {side} ({prefix}) starts")
    if side == "plain":
        figures = run_plain(jobs, prefix, folder, timeout=args.timeout, clusters=_clusters(args))
    else:
        figures = run_metasched(jobs, prefix, folder / f"ms{number}", open_store(args.db), args.policy_config,
                                timeout=args.timeout, clusters=_clusters(args))  # fmt: skip
    say(f"round {number + 1}: {side} done: mean queue {figures['queue_delay_s']['mean']:.1f} s, "
        f"makespan {figures['makespan_s']:.0f} s, {figures['failed']} failed")
    return figures


def _clusters(args: argparse.Namespace) -> Clusters:
    """_clusters is where both sides run: the default cluster, or emu and dev2 with --pair."""
    return PAIR if args.pair else ONE_CLUSTER


def _report(args: argparse.Namespace, jobs: list[ReplayJob], rounds: list[dict]) -> dict:
    """_report gathers the rounds, the median ratios and the simulator's prediction."""
    sides = {side: [r[side] for r in rounds] for side in ("plain", "metasched")}
    medians = {side: _median_figures(runs) for side, runs in sides.items()}
    # the simulator's dev-cluster preset is one cluster: the pair is not predicted
    predicted = {} if args.pair else {
        "plain": predict.simulate(jobs, "slurmlike", PERIOD_S),
        "metasched": predict.simulate(jobs, "metasched", PERIOD_S, args.policy_config),
    }
    return {
        "slice": {
            "trace": str(args.trace),
            "jobs": len(jobs),
            "span_s": args.span,
            "load": args.load,
            "start_h": args.start_h,
            "policy_config": str(args.policy_config) if args.policy_config else "shipped defaults",
            "clusters": _clusters(args).plain or "the default cluster",
        },
        "rounds": rounds,
        "median": medians,
        "ratio": {label: _ratio(medians, path) for label, path in RATIOS},
        "simulated": predicted,
        "simulator_error": {side: _errors(predicted[side], medians[side]) for side in predicted},
        "valid": all(run["valid"] for runs in sides.values() for run in runs),
    }


def _pick(figures: dict, path: tuple[str, ...]) -> float:
    """_pick reads a nested figure."""
    for key in path:
        figures = figures[key]
    return float(figures)


def _median_figures(runs: list[dict]) -> dict:
    """_median_figures is the median over rounds of every figure the report compares."""
    paths = [path for _, path in RATIOS] + [("finished",), ("failed",), ("submit_lag_max_s",)]
    out: dict = {}
    for path in paths:
        node = out
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = statistics.median(_pick(run, path) for run in runs)
    tenants = sorted({t for run in runs for t in run["tenant_mean_delay_s"]})
    out["tenant_mean_delay_s"] = {
        t: statistics.median(run["tenant_mean_delay_s"].get(t, 0.0) for run in runs) for t in tenants
    }
    if len({c for run in runs for c in run.get("jobs_per_cluster", {})}) > 1:
        clusters = sorted({c for run in runs for c in run["jobs_per_cluster"]})
        out["jobs_per_cluster"] = {c: statistics.median(run["jobs_per_cluster"].get(c, 0) for run in runs) for c in clusters}
    if any("daemon_cpu_s" in run for run in runs):
        out["daemon_cpu_s"] = statistics.median(run.get("daemon_cpu_s", 0.0) for run in runs)
    return out


def _ratio(medians: dict, path: tuple[str, ...]) -> float | None:
    """_ratio is metasched's median over plain's (None when plain's is 0)."""
    plain = _pick(medians["plain"], path)
    return _pick(medians["metasched"], path) / plain if plain else None


def _errors(predicted: dict, real: dict) -> dict:
    """_errors is the simulator's relative error on the mean and p95 queue delay."""
    return {
        q: (predicted["queue_delay_s"][q] - real["queue_delay_s"][q]) / real["queue_delay_s"][q]
        if real["queue_delay_s"][q]
        else None
        for q in ("mean", "p95")
    }


def _table(report: dict) -> str:
    """_table renders the report as text."""
    lines = [f"slice: {report['slice']}", f"valid: {report['valid']}", ""]
    lines.append(f"{'figure (median of rounds)':<28}{'plain':>10}{'metasched':>11}{'ratio':>8}")
    for label, path in RATIOS:
        plain, ours = (_pick(report["median"][side], path) for side in ("plain", "metasched"))
        ratio = report["ratio"][label]
        lines.append(
            f"{label:<28}{plain:>10.2f}{ours:>11.2f}{(f'{ratio:.2f}' if ratio is not None else '-'):>8}"
        )
    for side in ("plain", "metasched"):
        med = report["median"][side]
        lines.append(
            f"{side}: finished {med['finished']:.0f}, failed {med['failed']:.0f}, "
            f"max submit lag {med['submit_lag_max_s']:.2f} s, per account {_fmt(med['tenant_mean_delay_s'])}"
            + (f", daemon CPU {med['daemon_cpu_s']:.1f} s" if "daemon_cpu_s" in med else "")
        )
    for side in ("plain", "metasched"):
        med = report["median"][side]
        if "jobs_per_cluster" in med:
            lines.append(f"{side}: jobs per cluster (median of rounds) {_fmt_counts(med['jobs_per_cluster'])}")
    for side in report["simulated"]:
        sim, err = report["simulated"][side]["queue_delay_s"], report["simulator_error"][side]
        lines.append(
            f"simulated {side}: mean {sim['mean']:.1f} s (error {_pct(err['mean'])}), "
            f"p95 {sim['p95']:.1f} s (error {_pct(err['p95'])})"
        )
    return "\n".join(lines)


def _fmt(values: dict[str, float]) -> str:
    """_fmt renders per-account seconds."""
    return ", ".join(f"{k} {v:.1f} s" for k, v in values.items())


def _fmt_counts(values: dict[str, float]) -> str:
    """_fmt_counts renders jobs per cluster."""
    return ", ".join(f"{k} {v:.0f}" for k, v in values.items())


def _pct(value: float | None) -> str:
    """_pct renders a relative error."""
    return "-" if value is None else f"{value:+.0%}"


if __name__ == "__main__":
    main()
