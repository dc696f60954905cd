"""bench_what_if: a ``plan what-if`` prediction checked on the real dev cluster (issue 23).

Two checks, each a pair of real runs of the same slice through ``metasched serve`` (see
bench_replay.py for the slice and the sides):

* **nodes**: run the slice with ``--drain`` nodes drained (a smaller cluster), predict from that
  run's store with ``plan what-if --add-nodes`` what the full cluster would give, then run the
  slice on the full cluster. The store's inventory saw the drained nodes as not schedulable, so
  the plan's site is the cluster the first run had (``--cluster available``).
* **share**: from the full-cluster run's store, predict ``plan what-if --share A=x --share B=y``,
  set those Fairshare values on the accounts in Slurm (the daemon syncs them into tenant
  weights), run the slice again, and put the shares back.

For each, the predicted change in mean queue delay (scenario − today, both simulated) is put
beside the measured one (second run − first run, queue delay from the planned arrival as
bench_replay measures it, overall and per account): target, the same sign and within 30% of the
predicted size. Drained nodes are resumed and shares restored even when a run fails.

Run: ``python benchmarks/bench_what_if.py [--jobs 120] [--span 240] [--load 1.0] [--drain h100n2]
[--share tenant-a=30 --share tenant-b=70] [--json]`` (root, the dev cluster up, ~30 minutes).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.replay.sides import CAPACITY_GPUS, LOCK, REPO, install_cli, run_metasched, say  # noqa: E402
from benchmarks.replay.slice import ReplayJob, SliceSpec, cut  # noqa: E402
from benchmarks.store import open_store  # noqa: E402

TRACE = (
    Path(__file__).resolve().parents[2] / "shared" / "traces" / "philly" / "philly_2017-10-09_to_10-16.csv"
)
TOLERANCE = 0.30
NODE_GPUS = {"a100": 8, "h100": 8, "t4": 4}  # the dev cluster's nodes (deploy/slurm/slurm.conf)
SHARES = {"tenant-a": 70, "tenant-b": 30}  # deploy/devcluster's Fairshare


def main() -> None:
    """main runs the two checks and prints prediction beside measurement."""
    args = _arguments()
    jobs = cut(SliceSpec(args.trace, jobs=args.jobs, span_s=args.span, load=args.load, start_h=args.start_h))
    folder = Path(tempfile.mkdtemp(prefix="metasched-what-if-", dir="/tmp"))
    folder.chmod(0o777)  # the users' jobs start here
    say(f"{len(jobs)} jobs, folder {folder}")
    install_cli()
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        report = {"slice": {"jobs": len(jobs), "span_s": args.span, "load": args.load, "start_h": args.start_h},
                  "checks": _checks(args, jobs, folder)}  # fmt: skip
    print(json.dumps(report, indent=2) if args.json else _table(report))


def _checks(args: argparse.Namespace, jobs: list[ReplayJob], folder: Path) -> list[dict]:
    """_checks runs the node check, then the share check from the full-cluster run."""
    small = _run(jobs, folder, "small", drain=args.drain)
    gpus = _gpus_left(args.drain)
    add = [f"{kind}:{NODE_GPUS[kind]}x{count}" for kind, count in _drained_by_kind(args.drain).items()]
    predicted = _what_if(small, ["--cluster", "available", *[a for spec in add for a in ("--add-nodes", spec)]])
    full = _run(jobs, folder, "full")
    checks = [_check(f"nodes: {gpus} GPUs -> {CAPACITY_GPUS} ({', '.join(add)})", small, full, predicted)]
    if args.share:
        shares = dict(pair.split("=", 1) for pair in args.share)
        predicted = _what_if(full, [a for pair in args.share for a in ("--share", pair)])
        with _fairshare({name: int(value) for name, value in shares.items()}):
            reshared = _run(jobs, folder, "share")
        checks.append(_check(f"share: {', '.join(args.share)}", full, reshared, predicted))
    return checks


def _drained_by_kind(nodes: list[str]) -> dict[str, int]:
    """_drained_by_kind counts the drained nodes per GPU type (a100n1 -> a100)."""
    counts: dict[str, int] = {}
    for node in nodes:
        kind = node.rstrip("0123456789")[:-1]
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def _gpus_left(drained: list[str] | tuple[str, ...]) -> int:
    """_gpus_left is the dev cluster's GPUs without the drained nodes."""
    return CAPACITY_GPUS - sum(NODE_GPUS[kind] * count for kind, count in _drained_by_kind(list(drained)).items())


def _run(jobs: list[ReplayJob], folder: Path, label: str, drain: list[str] | tuple[str, ...] = ()) -> dict:
    """_run runs the slice through a fresh serve (``drain`` nodes drained meanwhile); returns figures and store."""
    db = open_store(None)
    prefix = f"w{label[0]}x{int(time.time()) % 100000}"
    say(f"{label}: starts ({prefix}, drained: {', '.join(drain) or 'none'})")
    _scontrol_nodes(drain, "DRAIN", "reason=bench_what_if")
    try:
        figures = run_metasched(jobs, prefix, folder / label, db, None, timeout=1800,
                                capacity_gpus=_gpus_left(drain))  # fmt: skip
    finally:
        _scontrol_nodes(drain, "RESUME")
    say(f"{label}: mean queue {figures['queue_delay_s']['mean']:.1f} s, {figures['failed']} failed")
    return {"figures": figures, "db": db.url}


def _scontrol_nodes(nodes: list[str] | tuple[str, ...], state: str, *extra: str) -> None:
    """_scontrol_nodes sets the nodes' state in Slurm (DRAIN or RESUME)."""
    if nodes:
        subprocess.run(["scontrol", "update", f"NodeName={','.join(nodes)}", f"State={state}", *extra],
                       check=True, capture_output=True, timeout=30)  # fmt: skip


class _fairshare:
    """_fairshare sets the accounts' Fairshare in Slurm for a block and puts the devcluster's back."""

    def __init__(self, shares: dict[str, int]) -> None:
        self.shares = shares

    def __enter__(self) -> None:
        _set_shares(self.shares)

    def __exit__(self, *exc: object) -> None:
        _set_shares({name: SHARES[name] for name in self.shares if name in SHARES})


def _set_shares(shares: dict[str, int]) -> None:
    """_set_shares runs sacctmgr for each account."""
    for account, share in shares.items():
        subprocess.run(["sacctmgr", "-i", "modify", "account", account, "set", f"fairshare={share}"],
                       check=True, capture_output=True, timeout=30)  # fmt: skip


def _what_if(run: dict, options: list[str]) -> dict:
    """_what_if asks ``metasched plan what-if`` about the run's store and returns its JSON."""
    argv = [sys.executable, "-c", "from cli.main import main; main()", "--db", run["db"], "plan", "what-if",
            "--since", "2d", *options, "--json"]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        sys.exit(f"bench_what_if: plan what-if failed ({done.returncode}): {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout)


def _check(label: str, before: dict, after: dict, predicted: dict) -> dict:
    """_check puts the predicted change of mean queue delay beside the measured one, overall and per account."""
    rows = []
    for who in ("*", *sorted(after["figures"]["tenant_mean_delay_s"])):
        measured = _mean(after, who) - _mean(before, who)
        guess = _predicted_delta(predicted, who)
        # a prediction of no change has no sign and no size to be within 30% of: never "met"
        error = None if not guess else (measured - guess) / abs(guess)
        same_sign = bool(guess) and (measured > 0) == (guess > 0)
        rows.append({"who": who, "before_s": round(_mean(before, who), 2), "after_s": round(_mean(after, who), 2),
                     "measured_delta_s": round(measured, 2), "predicted_delta_s": None if guess is None else round(guess, 2),
                     "same_sign": same_sign, "error": None if error is None else round(error, 3),
                     "met": same_sign and error is not None and abs(error) <= TOLERANCE})  # fmt: skip
    return {"check": label, "rows": rows, "calibration": predicted.get("calibration")}


def _mean(run: dict, who: str) -> float:
    """_mean is a run's measured mean queue delay, overall (``*``) or of one account."""
    figures = run["figures"]
    return figures["queue_delay_s"]["mean"] if who == "*" else figures["tenant_mean_delay_s"].get(who, 0.0)


def _predicted_delta(predicted: dict, who: str) -> float | None:
    """_predicted_delta is the scenario's simulated mean minus today's, from ``plan what-if --json``."""
    today, scenario = predicted["today"], predicted["scenarios"][-1]["figures"]

    def mean(figures: dict) -> float | None:
        if who == "*":
            return figures["overall"]["mean_queue_s"]
        tenant = figures["tenants"].get(who)
        return None if tenant is None else tenant["mean_queue_s"]

    first, last = mean(today), mean(scenario)
    return None if first is None or last is None else last - first


def _table(report: dict) -> str:
    """_table renders the checks as text."""
    lines = [f"slice: {report['slice']}"]
    for check in report["checks"]:
        lines.append("")
        lines.append(check["check"])
        lines.append(f"{'who':<10}{'before s':>10}{'after s':>10}{'measured Δ':>12}{'predicted Δ':>13}{'error':>8}  met")
        for row in check["rows"]:
            predicted = "-" if row["predicted_delta_s"] is None else f"{row['predicted_delta_s']:.1f}"
            error = "-" if row["error"] is None else f"{row['error']:+.0%}"
            lines.append(f"{row['who']:<10}{row['before_s']:>10.1f}{row['after_s']:>10.1f}"
                         f"{row['measured_delta_s']:>12.1f}{predicted:>13}{error:>8}  {'yes' if row['met'] else 'NO'}")
    return "\n".join(lines)


def _arguments() -> argparse.Namespace:
    """_arguments parses the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--start-h", type=float, default=24.0, help="window start, hours after the trace's first job")
    parser.add_argument("--jobs", type=int, default=120)
    parser.add_argument("--span", type=float, default=240.0, help="seconds between the first and last arrival")
    parser.add_argument("--load", type=float, default=1.0, help="offered load on the full cluster's 40 GPUs")
    parser.add_argument("--drain", nargs="+", default=["h100n2"], help="nodes drained for the smaller cluster")
    parser.add_argument("--share", action="append", default=None,
                        help="ACCOUNT=FAIRSHARE for the share check (repeat; none: skip it)")
    parser.add_argument("--json", action="store_true")
    return parser.parse_args()


if __name__ == "__main__":
    main()
