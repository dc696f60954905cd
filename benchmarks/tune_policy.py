"""tune_policy: choose the metasched settings by leave-one-week-out over the four Philly weeks.

Usage (from the repo root)::

    python benchmarks/tune_policy.py                  # the whole grid, then the tables (cached)
    python benchmarks/tune_policy.py --jobs 2         # two worker processes
    python benchmarks/tune_policy.py --only shipped   # just the shipped setting's 12 runs

Every setting in ``GRID`` (and slurm-like, the baseline) is simulated on the four shared Philly
weeks × loads ×0.9/1.0/1.1 on philly150 with the daemon's period model: 12 runs each. Runs are
cached in ``--cache`` (JSON lines), so an interrupted tuning resumes where it stopped.

The procedure never looks at the week it scores:

* for each held-out week, the *training* runs are the other three weeks × three loads (9 runs);
  a setting is *admissible* on them when every training run meets the issue's guard rails
  (p99 ≤ slurm-like's, useful utilization ≥ slurm-like's − 0.5 pt, Jain ≥ slurm-like's − 0.001,
  lost GPU-h ≤ 0.2% of capacity, and no tenant worse: every tenant with ≥ 20 jobs has a mean
  queue delay ≤ 1.1× its slurm-like mean, both floored at 60 s — meta/sim/tenant_delays.py; a
  constraint, never traded against the mean); the admissible setting with the lowest mean queue
  ratio to slurm-like over the training runs is chosen (if none is admissible: the fewest guard-rail
  misses, then the lowest ratio), and scored on the held-out week's three runs;
* the held-out table is those 12 scored runs (4 folds × 3 loads), with worst and mean;
* the shipped setting is the one chosen by the most folds; a tie goes to the lowest mean ratio
  over the tied settings' training runs of the folds that chose them. Its own 12-run table
  follows (on weeks it was partly chosen on, so the held-out table is the honest estimate).

Each cached run keeps every tenant's queue figures (``tenants``); a cached run from before they
were recorded is simulated again, since the tenant guard rail cannot be judged without them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from meta.config.policy_file import policy_config_from  # noqa: E402
from meta.policy import scheduler  # noqa: E402, F401  (imported before any run: a worker never mixes versions)
from meta.sim.config import SimConfig  # noqa: E402
from meta.sim.report import markdown  # noqa: E402
from meta.sim.run import RunSpec  # noqa: E402
from meta.sim.run import run as run_sim  # noqa: E402
from meta.sim.tenant_delays import (  # noqa: E402
    FLOOR_S,
    MAX_TENANT_RATIO,
    MIN_JOBS,
    TenantDelay,
    tenant_delays,
    worst_tenant_ratio,
)

WEEKS = (
    "philly_2017-10-09_to_10-16.csv",
    "philly_2017-10-16_to_10-23.csv",
    "philly_2017-10-23_to_10-30.csv",
    "philly_2017-10-30_to_11-06.csv",
)
LOADS = (0.9, 1.0, 1.1)
CLUSTER = "philly150"
BASELINE = "slurm"
SIM = SimConfig(strict=False)  # the daemon's period model: 2 s grid, idle cycle every 60 s

# Guard rails of the issue (a training run must meet every one to count as admissible).
P99_MAX_RATIO = 1.0
UTIL_SLACK = 0.005
JAIN_SLACK = 0.001
LOST_MAX_FRACTION = 0.002
TENANT_MAX_RATIO = MAX_TENANT_RATIO  # issue 21: no tenant with >= 20 jobs waits > 1.1x its slurm-like mean

# Candidate settings: every knob the grid varies is spelled out (over the SchedulerConfig
# defaults of the time, which no longer matter), so a cached run keeps its meaning when the
# shipped defaults change. Small on purpose: one setting costs 12 simulated weeks (docs/benchmarks.md).
BEFORE = {"short_job_weight": 10.0, "max_wait_s": 14400.0, "fair_share_horizon_s": None,
          "guarantee_rounds_up_to_task": False, "guaranteed_in_share_order": True,
          "short_job_gpu_exponent": 0.0, "max_held_reservations": 1, "reclaim_patience_s": 0.0,
          "short_job_max_penalty_s": None}
WEEK1 = BEFORE | {"max_wait_s": 86400.0, "fair_share_horizon_s": 0.0, "guarantee_rounds_up_to_task": True}
GRID: dict[str, dict[str, Any]] = {
    "old-defaults": BEFORE,  # what SchedulerConfig shipped before this tuning
    "week1-tuned": WEEK1,  # the old tuned-policy.yaml, chosen on the first week only
    "owned-shortest": WEEK1 | {"guaranteed_in_share_order": False},
    "gpu-time-first": WEEK1 | {"short_job_gpu_exponent": 1.0},
    "more-holds": WEEK1 | {"max_held_reservations": 4},
    "shortest-100": WEEK1 | {"short_job_weight": 100.0},
    "patient-30m": WEEK1 | {"reclaim_patience_s": 1800.0},  # fewer reclaim preemptions, less lost work
    # Issue 21: fair share between tenants, shortest-first inside a tenant with the length
    # penalty capped (a job is never passed by its line's work submitted more than the cap after it).
    "share-cap4h": WEEK1 | {"guaranteed_in_share_order": False, "fair_share_horizon_s": None,
                            "short_job_max_penalty_s": 14400.0},
    # ... or a bounded deviation: tenants merge by that capped key + horizon x share.
    "horizon1d-cap4h": WEEK1 | {"guaranteed_in_share_order": False, "fair_share_horizon_s": 86400.0,
                                "short_job_max_penalty_s": 14400.0},
    "horizon6h-cap2h": WEEK1 | {"guaranteed_in_share_order": False, "fair_share_horizon_s": 21600.0,
                                "short_job_max_penalty_s": 7200.0},
    # Slot-preserving tenant order: Slurm's multifactor order picks each place's tenant, the tenant's
    # own jobs fill it shortest-first; optionally the hold follows the first blocked task of any size (as EASY).
    "multifactor-owned": WEEK1 | {"guaranteed_in_share_order": False, "tenant_order": "multifactor"},
    "multifactor-hold-any": WEEK1 | {"guaranteed_in_share_order": False, "tenant_order": "multifactor",
                                     "hold_min_gpus": 0},
    "multifactor-hold-any-cap4h": WEEK1 | {"guaranteed_in_share_order": False, "tenant_order": "multifactor",
                                           "hold_min_gpus": 0, "short_job_max_penalty_s": 14400.0},
    "multifactor-hold-any-nopreempt": WEEK1 | {"guaranteed_in_share_order": False, "tenant_order": "multifactor",
                                               "hold_min_gpus": 0, "preemption_enabled": False},
    # Issue 21: ... and a reclaim spares borrowers lighter (by fair share) than the reclaiming tenant.
    "multifactor-hold-any-spare": WEEK1 | {"guaranteed_in_share_order": False, "tenant_order": "multifactor",
                                           "hold_min_gpus": 0, "reclaim_spares_lighter": True},
    # The shipped order, with a reclaim taking from the heaviest borrowing tenant first.
    "owned-shortest-heaviest": WEEK1 | {"guaranteed_in_share_order": False, "reclaim_victims": "heaviest"},
    # ... or a reclaim takes from the heaviest borrowing tenant first (Kueue's order), not the least lost work.
    "multifactor-hold-any-heaviest": WEEK1 | {"guaranteed_in_share_order": False, "tenant_order": "multifactor",
                                              "hold_min_gpus": 0, "reclaim_victims": "heaviest"},
}
# What the procedure chose when it was last run (docs/benchmarks.md); meta/policy/config.py's defaults are
# this setting, which tests/unit/test_policy_file.py checks.
SHIPPED = "owned-shortest"


@dataclass(frozen=True)
class Run:
    """Run is one simulation of the grid: a setting on one week at one load."""

    setting: str
    week: str
    load: float

    def key(self) -> str:
        """key identifies the run in the cache."""
        return f"{self.setting}|{self.week}|{self.load:g}"


def simulate(run: Run, traces_dir: Path, overrides: dict[str, Any] | None) -> dict[str, Any]:
    """simulate runs one week at one load and returns the figures the procedure needs."""
    policy = BASELINE if overrides is None else "metasched"
    config = None if overrides is None else policy_config_from(overrides, source=run.setting)
    spec = RunSpec(trace=traces_dir / "philly" / run.week, cluster=CLUSTER, policy=policy, load=run.load,
                   config=SIM, policy_config=config)
    started = time.process_time()
    outcome = run_sim(spec)
    m = outcome.report["metrics"]
    window = m["window_s"][1] - m["window_s"][0]
    capacity_gpu_h = outcome.raw.capacity_gpus * window / 3600.0
    return {
        "key": run.key(), "setting": run.setting, "week": run.week, "load": run.load,
        "mean": m["queue"]["mean"], "p99": m["queue"]["p99"], "useful_util": m["useful_utilization"],
        "util": m["utilization"], "jain": m["fairness"]["jain"], "lost_gpu_h": m["lost_gpu_hours"],
        "lost_frac": m["lost_gpu_hours"] / capacity_gpu_h if capacity_gpu_h else 0.0,
        "preemptions": m["preemptions"], "jobs": m["jobs"]["completed_measured"],
        "cycles": m["cycles"], "cpu_s": time.process_time() - started,
        "tenants": {t: d.to_dict() for t, d in tenant_delays(m).items()},
    }


def _simulate_star(args: tuple[Run, Path, dict[str, Any] | None]) -> dict[str, Any]:
    """_simulate_star unpacks arguments for the process pool."""
    return simulate(*args)


def load_cache(path: Path) -> dict[str, dict[str, Any]]:
    """load_cache reads finished runs (the last line per key wins)."""
    out: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                if "tenants" in row:  # older rows lack the per-tenant figures the guard rail needs
                    out[row["key"]] = row
    return out


def run_all(runs: list[Run], grid: dict[str, dict[str, Any] | None], traces_dir: Path, cache: Path,
            jobs: int) -> dict[str, dict[str, Any]]:
    """run_all simulates every run not in the cache (``jobs`` processes) and returns all results."""
    done = load_cache(cache)
    todo = [r for r in runs if r.key() not in done]
    # the biggest weeks first, so the pool does not end on one long run
    todo.sort(key=lambda r: (-(WEEKS.index(r.week) in (0, 1)), -r.load))
    print(f"tune_policy: {len(runs) - len(todo)} runs cached, {len(todo)} to simulate", file=sys.stderr)
    args = [(r, traces_dir, grid[r.setting]) for r in todo]
    with cache.open("a", encoding="utf-8") as out:
        if jobs > 1:
            with ProcessPoolExecutor(jobs) as pool:
                results = pool.map(_simulate_star, args)
                for row in results:
                    _record(out, done, row)
        else:
            for a in args:
                _record(out, done, _simulate_star(a))
    return done


def _record(out, done: dict[str, dict[str, Any]], row: dict[str, Any]) -> None:
    """_record appends one finished run to the cache and the results."""
    out.write(json.dumps(row, sort_keys=True) + "\n")
    out.flush()
    done[row["key"]] = row
    print(f"  {row['setting']:16s} {row['week'][7:17]} ×{row['load']:<4g} mean {row['mean']:8,.0f} s "
          f"cpu {row['cpu_s']:6.1f} s", file=sys.stderr)


# --- the procedure ------------------------------------------------------------------------------


def scored(results: dict[str, dict[str, Any]], setting: str, week: str, load: float) -> dict[str, Any]:
    """scored is one run of a setting next to slurm-like's run of the same week and load."""
    ours = results[Run(setting, week, load).key()]
    base = results[Run(BASELINE, week, load).key()]
    worst = worst_tenant_ratio(_tenants(ours), _tenants(base))
    misses = [
        name for name, ok in (
            ("p99", ours["p99"] <= P99_MAX_RATIO * base["p99"]),
            ("util", ours["useful_util"] >= base["useful_util"] - UTIL_SLACK),
            ("Jain", ours["jain"] >= base["jain"] - JAIN_SLACK),
            ("lost", ours["lost_frac"] <= LOST_MAX_FRACTION),
            ("tenant", worst is None or worst[1] <= TENANT_MAX_RATIO),
        ) if not ok
    ]
    return ours | {"ratio": ours["mean"] / base["mean"] if base["mean"] else 1.0, "base": base, "misses": misses,
                   "worst_tenant": None if worst is None else worst[0],
                   "worst_tenant_ratio": None if worst is None else worst[1]}


def _tenants(row: dict[str, Any]) -> dict[str, TenantDelay]:
    """_tenants reads a cached run's per-tenant figures."""
    return {t: TenantDelay.from_dict(d) for t, d in row["tenants"].items()}


def objective(results: dict[str, dict[str, Any]], setting: str, weeks: list[str]) -> tuple[bool, float, int]:
    """objective is (admissible, mean queue ratio, guard-rail misses) over the weeks × loads."""
    runs = [scored(results, setting, w, load) for w in weeks for load in LOADS]
    misses = sum(len(r["misses"]) for r in runs)
    return misses == 0, sum(r["ratio"] for r in runs) / len(runs), misses


def choose(results: dict[str, dict[str, Any]], settings: list[str], weeks: list[str]) -> str:
    """choose picks the admissible setting with the lowest mean ratio (if none is: fewest misses, then ratio)."""
    scores = {s: objective(results, s, weeks) for s in settings}
    return min(settings, key=lambda s: (not scores[s][0], scores[s][2] if not scores[s][0] else 0, scores[s][1], s))


def folds(results: dict[str, dict[str, Any]], settings: list[str]) -> list[tuple[str, str]]:
    """folds is (held-out week, chosen setting) for each of the four weeks."""
    return [(held, choose(results, settings, [w for w in WEEKS if w != held])) for held in WEEKS]


def shipped(results: dict[str, dict[str, Any]], chosen: list[tuple[str, str]]) -> str:
    """shipped is the setting most folds chose; ties go to the lowest ratio on those folds' training weeks."""
    counts = Counter(s for _, s in chosen)
    top = max(counts.values())
    tied = [s for s, n in counts.items() if n == top]

    def training_ratio(s: str) -> float:
        """training_ratio averages the setting's objective over the folds that chose it."""
        held = [h for h, c in chosen if c == s]
        return sum(objective(results, s, [w for w in WEEKS if w != h])[1] for h in held) / len(held)

    return min(tied, key=lambda s: (training_ratio(s), s))


# --- tables ---------------------------------------------------------------------------------------

HEADERS = ["week", "load", "setting", "mean queue (s) ms / slurm", "×slurm", "p99 ms / slurm",
           "useful util % ms / slurm", "Jain ms / slurm", "lost GPU-h (% cap)", "worst tenant ×slurm", "misses"]


def _row(r: dict[str, Any]) -> list[str]:
    """_row is one Markdown row of a scored run."""
    b = r["base"]
    return [
        r["week"][7:17], f"×{r['load']:g}", r["setting"], f"{r['mean']:,.0f} / {b['mean']:,.0f}", f"{r['ratio']:.2f}",
        f"{r['p99']:,.0f} / {b['p99']:,.0f}", f"{100 * r['useful_util']:.1f} / {100 * b['useful_util']:.1f}",
        f"{r['jain']:.4f} / {b['jain']:.4f}", f"{r['lost_gpu_h']:,.0f} ({100 * r['lost_frac']:.3f})",
        _worst_cell(r), ", ".join(r["misses"]) or "–",
    ]


def _worst_cell(r: dict[str, Any]) -> str:
    """_worst_cell is the run's worst-off tenant and its floored mean ratio ('–' if none has >= 20 jobs)."""
    return "–" if r["worst_tenant"] is None else f"{r['worst_tenant']} {r['worst_tenant_ratio']:.2f}"


def table(runs: list[dict[str, Any]]) -> str:
    """table prints the runs, then the worst and mean ratio and the guard-rail misses."""
    ratios = [r["ratio"] for r in runs]
    worst_p99 = max(r["p99"] / r["base"]["p99"] for r in runs)
    worst_util = min(r["useful_util"] - r["base"]["useful_util"] for r in runs)
    worst_jain = min(r["jain"] - r["base"]["jain"] for r in runs)
    worst_lost = max(r["lost_frac"] for r in runs)
    worst_tenant = max((r["worst_tenant_ratio"] for r in runs if r["worst_tenant"] is not None), default=0.0)
    lines = [markdown(HEADERS, [_row(r) for r in runs]), "",
             f"mean queue ×slurm-like: worst {max(ratios):.2f}, mean {sum(ratios) / len(ratios):.2f} "
             f"(targets ≤ 0.70 worst, ≤ 0.60 mean); p99 ×slurm-like worst {worst_p99:.2f} (≤ 1); "
             f"useful util worst {100 * worst_util:+.2f} pt (≥ −0.5); Jain worst {worst_jain:+.4f} (≥ −0.001); "
             f"lost GPU-h worst {100 * worst_lost:.3f}% of capacity (≤ 0.2%); worst tenant's mean ×slurm-like "
             f"{worst_tenant:.2f} (≤ {TENANT_MAX_RATIO:g}, tenants with ≥ {MIN_JOBS} jobs, means floored at {FLOOR_S:g} s)"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """main simulates the grid (cached) and prints the folds, the held-out table and the shipped setting."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces-dir", type=Path, default=REPO.parent / "shared" / "traces")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/metasched-tune-cache.jsonl"))
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--only", default="", help="comma-separated settings of the grid (default: all)")
    parser.add_argument("--no-baseline", action="store_true",
                        help="simulate only the settings (another process runs slurm-like into the same cache)")
    parser.add_argument("--report-only", action="store_true", help="print from the cache, simulate nothing")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not (args.traces_dir / "philly").is_dir():
        print(f"tune_policy: traces dir not found: {args.traces_dir}", file=sys.stderr)
        return 2
    grid = dict(GRID)
    wanted = [s for s in args.only.split(",") if s] or list(grid)
    unknown = [s for s in wanted if s not in grid]
    if unknown:
        print(f"tune_policy: unknown setting(s) {', '.join(unknown)} (grid: {', '.join(grid)})", file=sys.stderr)
        return 2
    plan: dict[str, dict[str, Any] | None] = {} if args.no_baseline else {BASELINE: None}
    plan |= {s: grid[s] for s in wanted}
    runs = [Run(s, w, load) for s in plan for w in WEEKS for load in LOADS]
    results = load_cache(args.cache) if args.report_only else run_all(runs, plan, args.traces_dir, args.cache,
                                                                     args.jobs)
    missing = [r.key() for s in [BASELINE, *wanted] for w in WEEKS for load in LOADS
               if (r := Run(s, w, load)).key() not in results]
    if missing:
        print(f"tune_policy: {len(missing)} runs still missing (e.g. {missing[0]}); no report yet", file=sys.stderr)
        return 0 if args.no_baseline else 1
    return report(results, wanted, args.json)


def report(results: dict[str, dict[str, Any]], settings: list[str], as_json: bool) -> int:
    """report prints the procedure's outcome."""
    chosen = folds(results, settings)
    held_out = [scored(results, s, held, load) for held, s in chosen for load in LOADS]
    ship = shipped(results, chosen)
    ship_runs = [scored(results, ship, w, load) for w in WEEKS for load in LOADS]
    if as_json:
        print(json.dumps({"folds": chosen, "shipped": ship, "held_out": held_out, "shipped_runs": ship_runs},
                         indent=2, sort_keys=True, default=str))
        return 0
    print("## Settings tried (training objective over all four weeks × three loads, for reference)\n")
    rows = []
    for s in settings:
        ok, ratio, misses = objective(results, s, list(WEEKS))
        rows.append([s, json.dumps(GRID[s], sort_keys=True), f"{ratio:.3f}", str(misses)])
    print(markdown(["setting", "overrides", "mean ratio (12 runs)", "guard-rail misses"], rows))
    print("\n## Per fold: the setting chosen on the other three weeks\n")
    print(markdown(["held-out week", "chosen", "training mean ratio", "training misses"],
                   [[h[7:17], s, f"{objective(results, s, [w for w in WEEKS if w != h])[1]:.3f}",
                     str(objective(results, s, [w for w in WEEKS if w != h])[2])] for h, s in chosen]))
    print("\n## Held-out runs (each week scored with the setting chosen without it)\n")
    print(table(held_out))
    print(f"\n## Shipped setting: {ship} {json.dumps(GRID[ship], sort_keys=True)}\n")
    print(table(ship_runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
