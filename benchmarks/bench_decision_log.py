"""bench_decision_log: what the decision log adds to a cycle with 10,000 waiting tasks.

Usage (from the repo root)::

    python benchmarks/bench_decision_log.py --db postgresql+psycopg://metasched:metasched@127.0.0.1:5432/DB

The store is filled through the Service as ``bench_period`` fills it (inference shards of 10
tenants): N nodes of 8 A100, one running job per node, W waiting tasks that each want a whole
node. Slurm is the in-memory FakeSlurm. Two kinds of period are timed, the decision log on and
off in turn (on, off, off, on, ...) on the same daemon and store, so drift hits both alike:

* steady: nothing ends, nothing is placed (the log writes the cycle's context and its hold);
* busy: K running jobs end before each period (its reconcile sees them end), so its cycle
  places K waiting tasks (K placements on record, each with its key and alternatives).

What the log adds is measured where it happens, because a busy cycle also rewrites most waiting
tasks' reasons (their fair-share attributions change) and that swings the cycle by seconds:
the policy's share is ``schedule()`` replayed on each period's own snapshot with and without
recording (best of 3 each, after the period), the write's is the timed ``DecisionLog.write`` and ``prune``.
The whole cycle (steps 7 to 12: snapshot, gates, schedule, apply with the log's write, holds) on vs off is
printed too; rows and bytes per cycle are read back from the log.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sqlalchemy import func, select  # noqa: E402

import meta.cycle.daemon as daemon_module  # noqa: E402
from benchmarks.bench_period import StepClock, shards  # noqa: E402
from benchmarks.store import open_store  # noqa: E402
from meta.cycle.actuate.launch_plan import LaunchSettings  # noqa: E402
from meta.cycle.apply.decision_log import DecisionLogSettings  # noqa: E402
from meta.cycle.daemon import Daemon, DaemonConfig  # noqa: E402
from meta.policy.scheduler import schedule  # noqa: E402
from meta.service.api import Service  # noqa: E402
from meta.store.models import DecisionRow  # noqa: E402
from slurm_bridge.fake import FakeSlurm, sinfo_node  # noqa: E402

GPUS_PER_NODE = 8
ON, OFF = DecisionLogSettings(), DecisionLogSettings(enabled=False)


class Replay:
    """Replay keeps each period's snapshot and, afterwards, times schedule() on it with and without recording."""

    def __init__(self, k: int) -> None:
        self.k, self.last = k, None
        timed = daemon_module.schedule

        def keep(snapshot: Any, config: Any = None, record: int = 0) -> Any:
            self.last = (snapshot, config)
            return timed(snapshot, config, record=record)

        daemon_module.schedule = keep

    def policy_cost(self, repeats: int = 3) -> tuple[float, float]:
        """policy_cost is the best time of schedule() without and with recording on the last snapshot."""
        snapshot, config = self.last
        best = {0: float("inf"), self.k: float("inf")}
        for i in range(repeats):
            for record in (0, self.k) if i % 2 == 0 else (self.k, 0):
                started = time.perf_counter()
                schedule(snapshot, config, record=record)
                best[record] = min(best[record], time.perf_counter() - started)
        return best[0], best[self.k]


def _settle(daemon: Daemon) -> None:
    """_settle waits for launches streamed behind a period (when the daemon streams them)."""
    settle = getattr(daemon, "settle_launches", None)
    if settle is not None:
        settle(120.0)


def _period(daemon: Daemon, clock: StepClock) -> dict[str, float]:
    started = time.perf_counter()
    report = daemon.period()
    if report.error:
        raise RuntimeError(f"period failed: {report.error}")
    took = time.perf_counter() - started
    _settle(daemon)
    return {"period": took, **clock.take(), "placed": report.placed}


def _log_size(daemon: Daemon) -> tuple[int, int]:
    """_log_size is the newest cycle's rows and bytes of record JSON in the log."""
    with daemon.db.session() as session:
        cycle = session.scalar(select(func.max(DecisionRow.cycle)))
        rows, size = session.execute(select(func.count(), func.sum(func.length(DecisionRow.record)))
                                     .where(DecisionRow.cycle == cycle)).one()  # fmt: skip
    return int(rows or 0), int(size or 0)


def _start_pending(fake: FakeSlurm) -> None:
    for job in list(fake.jobs):
        if fake.jobs[job].state == "PENDING":
            fake.start(job)


def measure(url: str | None, waiting: int, nodes: int, busy: int, rounds: int, verbose: bool = False) -> dict[str, Any]:
    """measure fills the store, then times steady and busy periods with the log on and off in turn."""
    db = open_store(url)
    service = Service(db)
    fake = FakeSlurm([sinfo_node(f"n{i:05d}", gpus=GPUS_PER_NODE) for i in range(nodes)])
    shards(service, nodes, GPUS_PER_NODE, "run")
    config = DaemonConfig(period_s=0.0, leader_lease_s=3600, holder="bench", submit_timeout_s=5.0,
                          launch=LaunchSettings(log_dir=tempfile.mkdtemp()), decisions=ON)  # fmt: skip
    daemon = Daemon(db, fake, config)
    clock = StepClock(daemon)
    replay = Replay(ON.alternatives)
    for name in ("write", "prune"):  # the log's own statements, timed together as "log_write"
        setattr(daemon.decision_log, name, clock._timed("log_write", getattr(daemon.decision_log, name)))
    for _ in range(10):
        _period(daemon, clock)
        if len(fake.jobs) >= nodes:
            break
    _start_pending(fake)
    shards(service, waiting, GPUS_PER_NODE, "wait")
    _period(daemon, clock)
    _period(daemon, clock)  # the first looks at the waiting tasks write their reasons
    out: dict[str, Any] = {"waiting": waiting, "nodes": nodes, "busy": busy, "rounds": rounds}
    for kind in ("steady", "busy"):
        runs: dict[str, list[dict[str, float]]] = {"on": [], "off": []}
        sizes: list[tuple[int, int]] = []
        policy: list[tuple[float, float]] = []
        for i in range(-1, 2 * rounds):  # i = -1: a warm-up period (the change of kind rewrites every reason)
            name = "on" if i % 4 in (0, 3) else "off"
            daemon.decision_log.settings = ON if name == "on" else OFF
            if kind == "busy":
                for job in [j for j in list(fake.jobs) if fake.jobs[j].state == "RUNNING"][:busy]:
                    fake.finish(job)
            runs[name].append(_period(daemon, clock))
            if i < 0:
                runs[name].pop()
                _start_pending(fake)
                continue
            if verbose:
                print(kind, name, {k: round(v, 3) for k, v in runs[name][-1].items()}, flush=True)
            if name == "on":
                sizes.append(_log_size(daemon))
            policy.append(replay.policy_cost())
            _start_pending(fake)
        for name, periods in runs.items():
            for step in ("period", "_cycle", "schedule", "apply_plan", "log_write", "placed"):
                out[f"{kind}_{name}_{step}"] = statistics.median(p.get(step, 0.0) for p in periods)
        out[f"{kind}_rows"] = statistics.median(r for r, _ in sizes)
        out[f"{kind}_bytes"] = statistics.median(b for _, b in sizes)
        out[f"{kind}_policy_off"] = statistics.median(off for off, _ in policy)
        out[f"{kind}_policy_on"] = statistics.median(on for _, on in policy)
    with db.session() as session:
        out["rows"] = session.scalar(select(func.count()).select_from(DecisionRow))
    db.dispose()
    return out


def main(argv: list[str] | None = None) -> int:
    """main prints a Markdown table: cycle and period on and off, overhead %, rows and bytes per cycle."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=None, help="an empty database URL (default: a new SQLite file)")
    parser.add_argument("--waiting", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--busy", type=int, default=20, help="running jobs that end before each busy period")
    parser.add_argument("--rounds", type=int, default=4, help="on/off pairs per kind (median)")
    parser.add_argument("--verbose", action="store_true", help="print every measured period's steps")
    args = parser.parse_args(argv)
    r = measure(args.db, args.waiting, args.nodes, args.busy, max(1, args.rounds), args.verbose)
    print(f"{r['waiting']:,} waiting × {r['nodes']} nodes; {2 * r['rounds']} periods of each kind, medians")
    print("| period | placed | schedule() off → on (s) | log write (s) | added | cycle off (s) | added / cycle "
          "| cycle on (s), whole | rows / cycle | bytes / cycle |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kind in ("steady", "busy"):
        p_off, p_on = r[f"{kind}_policy_off"], r[f"{kind}_policy_on"]
        write, cycle_off, cycle_on = r[f"{kind}_on_log_write"], r[f"{kind}_off__cycle"], r[f"{kind}_on__cycle"]
        added = p_on - p_off + write
        print(f"| {kind} | {r[f'{kind}_on_placed']:.0f} | {p_off:.3f} → {p_on:.3f} | {write:.4f} | {added:.3f} "
              f"| {cycle_off:.3f} | {100 * added / cycle_off:+.1f}% | {cycle_on:.3f} ({100 * (cycle_on / cycle_off - 1):+.0f}%) "
              f"| {r[f'{kind}_rows']:.0f} | {r[f'{kind}_bytes']:,.0f} |", flush=True)  # fmt: skip
    print(f"rows in the log at the end: {r['rows']:,}; steps (median s, off / on): " + "; ".join(
        f"{kind} {step} {r[f'{kind}_off_{step}']:.3f} / {r[f'{kind}_on_{step}']:.3f}"
        for kind in ("steady", "busy") for step in ("schedule", "apply_plan")))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
