"""bench_period: the daemon's whole period, end to end, as waiting tasks, nodes and running jobs grow.

Usage (from the repo root)::

    python benchmarks/bench_period.py                                   # small sizes, SQLite
    python benchmarks/bench_period.py --db postgresql+psycopg://... --sizes 50000x4000x10000

Each size ``WxNxR`` is W waiting tasks, N nodes and R running attempts. The store is filled
through the Service (inference jobs of up to 1,000 shards, 10 tenants); Slurm is the in-memory
FakeSlurm, so the figures are the daemon's own work: its store reads and writes and the policy.
Every task (running or waiting) wants one A100, and the nodes have R GPUs between them (R/N
each, rounded), so the running attempts fill them and a waiting task fits only where a running
one ended. ``--shape mixed`` submits the waiting (and steady) work instead as separate jobs of
every kind — evaluations, trainings (a tenth of them gangs of 2-4 workers), inferences of 1-4
partitions — spread over the 10 tenants, a worker asking for up to what a node has (what a real
queue looks like; ``mixed()``). Per size (idle and steady report their median and max):

* first: the period that places the R running attempts (their launches stream behind it);
* view: the first period after the W waiting tasks arrive (the leader describes each once);
* idle: a period with nothing changed (median of ``--periods``; how many rested: a quiet period,
  ``meta/cycle/snapshot/quiet.py``); idle full pass: one such period made to pass in full, what
  the daemon pays at each time event and at least every ``quiet_max_s``;
* steady: a period after 1% of the running jobs ended and as many new tasks were submitted: it
  reconciles the ends and places as many waiting tasks (median of ``--periods``);
* burst: a period after 2,000 one-GPU nodes joined the cluster: it places 2,000 new attempts;
  ``stream`` is how long the launch pool then takes to send them behind it;
* ends: a period after 2,000 running jobs ended: it follows the ends and hands each inference
  partition's output folder to the workers to read; ``then`` is the next period, which commits
  the outputs read meanwhile (in bulk), lets the attempts succeed and places waiting tasks where
  they ran;
* failover: the first period of a new leader (empty memory: it rebuilds its view of every
  waiting task and rewrites no reason it finds stored).

The collector is tuned as ``metasched serve`` tunes it (``meta/serve/collector.py``); ``--gc default``
measures with CPython's thresholds instead. The launch pool is drained between periods (the daemon's period leaves it the rest of its
2 s); its time is not in a period's. Every step of ``Daemon.period`` is timed for the steady
periods; RSS is the process's (peak, and current after the last period).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import random
import resource
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import meta.cycle.daemon as daemon_module  # noqa: E402
from benchmarks.store import open_store  # noqa: E402
from meta.cycle.actuate.launch_plan import LaunchSettings  # noqa: E402
from meta.cycle.daemon import Daemon, DaemonConfig  # noqa: E402
from meta.cycle.lease import LEASE_NAME  # noqa: E402
from meta.model.durations import utcnow  # noqa: E402
from meta.model.spec import spec_from_dict  # noqa: E402
from meta.serve.collector import tune_collector  # noqa: E402
from meta.service.api import Service  # noqa: E402
from meta.store.db import Database  # noqa: E402
from meta.store.models import LeaderLease  # noqa: E402
from slurm_bridge.fake import FakeSlurm, sinfo_node  # noqa: E402

TENANTS = [f"tenant-{i}" for i in range(10)]
SHARDS_PER_JOB = 1000
MIXED_BATCH = 1000  # jobs per submit_many (the API's bound)
BURST = 2000
STEPS = ("_inventory", "_reconcile", "_snapshot", "_gates", "_schedule", "_apply", "_holds", "_actuate")
CYCLE = ("_snapshot", "_gates", "_schedule", "accrue", "_apply", "_holds")  # steps 7 to 12, "_cycle" in the results
INNER = ("build_snapshot", "schedule", "accrue", "apply_plan")
SETTLE_S = 600.0
DEFAULT_GC_THRESHOLDS = (700, 10, 10)  # CPython's, for --gc default


def shards(service: Service, count: int, gpus: int, tag: str) -> None:
    """shards submits ``count`` one-task-per-shard inference work of ``gpus`` GPUs, spread over tenants."""
    job = 0
    while count > 0:
        n = min(SHARDS_PER_JOB, count)
        spec = {
            "kind": "inference", "name": f"{tag}-{job}", "tenant": TENANTS[job % len(TENANTS)],
            "command": "python infer.py", "partitions": n, "output": f"/tmp/bench-period/{tag}-{job}",
            "resources": {"cpus": 1, "memory": "1G", "gpus": gpus, "gpu_type": "a100"},
        }  # fmt: skip
        service.submit(spec_from_dict(spec))
        count, job = count - n, job + 1


def mixed(service: Service, count: int, gpus: int, tag: str, seed: int = 24) -> None:
    """mixed submits ``count`` separate jobs of every kind, 10 tenants, gangs of 2-4 workers (issue 24's real-queue shape).

    In 1,000: 450 evaluations, 250 one-worker and 100 gang trainings, 200 inferences of 1-4
    partitions (so the task count slightly exceeds ``count``); a tenth of the trainings
    preemptible with a checkpoint, time limits from 10 minutes to a day. A worker asks for at
    most ``gpus`` GPUs (what the bench's nodes have), so each job fits where running work ended.
    """
    rng = random.Random(f"{seed}-{tag}")
    batch: list[Any] = []
    for number in range(count):
        batch.append(spec_from_dict(_mixed_spec(rng, f"{tag}-{number}", TENANTS[rng.randrange(len(TENANTS))], gpus)))
        if len(batch) == MIXED_BATCH:
            service.submit_many(batch)
            batch = []
    if batch:
        service.submit_many(batch)


def _mixed_spec(rng: random.Random, name: str, tenant: str, gpus: int) -> dict[str, Any]:
    """_mixed_spec is one job of the mixed shape (see ``mixed``)."""
    roll = rng.random()
    worker = {"cpus": 1, "memory": "1G", "gpus": rng.randint(1, max(1, gpus)), "gpu_type": "a100"}
    limit = rng.choice(("10m", "1h", "4h", "24h"))
    base = {"name": name, "tenant": tenant, "time_limit": limit, "resources": worker}
    if roll < 0.45:
        return base | {"kind": "evaluation", "command": "python eval.py", "resources": worker | {"gpus": 1}}
    if roll < 0.80:
        spec = base | {"kind": "training", "command": "python train.py", "workers": 1 if roll < 0.70 else rng.randint(2, 4)}
        if rng.random() < 0.1:
            spec |= {"preemptible": True, "checkpoint": {"dir": f"/tmp/bench-period/{name}", "interval": "30m"}}
        return spec
    return base | {"kind": "inference", "command": "python infer.py", "partitions": rng.randint(1, 4),
                   "output": f"/tmp/bench-period/{name}", "resources": worker | {"gpus": 1}}  # fmt: skip


SUBMITTERS = {"shards": shards, "mixed": mixed}


class StepClock:
    """StepClock wraps the daemon's steps and the cycle's inner calls to time each one per period."""

    def __init__(self, daemon: Daemon) -> None:
        self.last: dict[str, float] = defaultdict(float)
        self.wrap(daemon)
        for name in INNER:
            setattr(daemon_module, name, self._timed(name, getattr(daemon_module, name)))

    def wrap(self, daemon: Daemon) -> None:
        """wrap times a daemon's steps (a new leader's too)."""
        for name in STEPS:
            setattr(daemon, name, self._timed(name, getattr(daemon, name)))

    def _timed(self, name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                self.last[name] += time.perf_counter() - started

        return timed

    def take(self) -> dict[str, float]:
        """take returns this period's step times and starts the next period's."""
        taken, self.last = dict(self.last), defaultdict(float)
        taken["_cycle"] = sum(taken.get(name, 0.0) for name in CYCLE)  # snapshot to holds, as one figure
        return taken


def run_period(daemon: Daemon, clock: StepClock, fake: FakeSlurm) -> dict[str, float]:
    """run_period runs one period, then lets the launch pool finish and Slurm start what it got."""
    started = time.perf_counter()
    report = daemon.period()
    elapsed = time.perf_counter() - started
    if report.error:
        raise RuntimeError(f"period failed: {report.error}")
    steps = clock.take()
    streamed = time.perf_counter()
    if not daemon.settle_launches(SETTLE_S):
        raise RuntimeError("the launch pool did not drain")
    stream = time.perf_counter() - streamed
    fake.advance()  # launched jobs start (run_ticks keeps running ones running)
    return {"period": elapsed, **steps, "placed": report.placed, "stream": stream, "rested": report.rested}


def current_rss_mib() -> float:
    """current_rss_mib is the process's resident set now (peak is ru_maxrss)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 2**20


def end_running(fake: FakeSlurm, count: int) -> int:
    """end_running finishes ``count`` running jobs (oldest first); returns how many ended."""
    ended = 0
    for job in list(fake.jobs.values()):
        if ended == count:
            break
        if job.state == "RUNNING":
            fake.finish(job.job_id)
            ended += 1
    return ended


def new_leader(db: Database, fake: FakeSlurm, config: DaemonConfig, old: Daemon) -> Daemon:
    """new_leader stops the old leader (its lease runs out) and starts a replica with empty memory."""
    old.close_launches()
    with db.session() as session:
        session.get(LeaderLease, LEASE_NAME).expires_at = utcnow() - timedelta(seconds=1)
    config = DaemonConfig(period_s=0.0, leader_lease_s=3600, holder="bench-2", launch=config.launch)
    return Daemon(db, fake, config)


def measure(
    waiting: int, nodes: int, running: int, url: str | None, periods: int, collector: str = "tuned",
    shape: str = "shards",
) -> dict[str, Any]:
    """measure fills the store and times the periods of one size (see the module docstring)."""
    db = open_store(url)
    service = Service(db)
    per_node, extra = divmod(running, nodes)
    fake = FakeSlurm([sinfo_node(f"n{i:05d}", gpus=per_node + (i < extra)) for i in range(nodes)])
    fake.run_ticks = 10**9  # jobs run until the benchmark ends them
    per_task = 1
    config = DaemonConfig(period_s=0.0, leader_lease_s=3600, holder="bench",
                          launch=LaunchSettings(log_dir=tempfile.mkdtemp()))  # fmt: skip
    daemon = Daemon(db, fake, config)
    if collector == "tuned":
        tune_collector()  # as metasched serve does after building its daemon
    else:
        gc.unfreeze()
        gc.set_threshold(*DEFAULT_GC_THRESHOLDS)
    clock = StepClock(daemon)
    t0 = time.perf_counter()
    shards(service, running, per_task, "run")
    setup = time.perf_counter() - t0
    first = [run_period(daemon, clock, fake) for _ in range(2)]  # places them; then sees them running
    t0 = time.perf_counter()
    submit = SUBMITTERS[shape]
    # shards want one GPU each; the mixed shape's workers ask for up to what a node has
    room = per_task if shape == "shards" else max(1, per_node)
    submit(service, waiting, room, "wait")
    setup += time.perf_counter() - t0
    view = run_period(daemon, clock, fake)
    idle = [run_period(daemon, clock, fake) for _ in range(periods)]
    daemon.forget_rest()  # the full pass a quiet period stands for: what each quiet_max_s or time event costs
    idle_full = run_period(daemon, clock, fake)
    churn = max(1, running // 100)
    steady = []
    for _ in range(periods):
        end_running(fake, churn)
        submit(service, churn, room, f"more-{len(steady)}")
        steady.append(run_period(daemon, clock, fake))
    for i in range(BURST):
        fake.nodes[f"x{i:05d}"] = sinfo_node(f"x{i:05d}", gpus=1)
    burst = run_period(daemon, clock, fake)
    end_running(fake, BURST)
    ends = run_period(daemon, clock, fake)
    ends_next = run_period(daemon, clock, fake)  # the ended partitions' outputs, read meanwhile, commit here
    rss_now = current_rss_mib()
    leader = new_leader(db, fake, config, daemon)
    clock.wrap(leader)
    failover = run_period(leader, clock, fake)
    again = run_period(leader, clock, fake)
    leader.close_launches()
    db.dispose()
    row: dict[str, Any] = {name: statistics.median(p.get(name, 0.0) for p in steady) for name in ("period", *STEPS, *INNER)}
    row.update(
        waiting=waiting, nodes=nodes, running=running, setup_s=setup,
        first=first[0]["period"], first_placed=first[0]["placed"], first_stream=first[0]["stream"],
        view=view["period"], idle=statistics.median(p["period"] for p in idle),
        idle_max=max(p["period"] for p in idle), steady_max=max(p["period"] for p in steady), shape=shape,
        idle_rested=sum(p["rested"] for p in idle), idle_full=idle_full["period"],
        idle_steps={k: round(statistics.median(p.get(k, 0.0) for p in idle), 3) for k in (*STEPS, *INNER)},
        steady_placed=statistics.median(p["placed"] for p in steady),
        burst=burst["period"], burst_placed=burst["placed"], burst_stream=burst["stream"],
        burst_steps={k: round(burst.get(k, 0.0), 3) for k in (*STEPS, *INNER)},
        ends=ends["period"], ends_placed=ends["placed"],
        ends_steps={k: round(ends.get(k, 0.0), 3) for k in (*STEPS, *INNER)},
        ends_next=ends_next["period"], ends_next_placed=ends_next["placed"],
        failover=failover["period"], failover_next=again["period"],
        rss_peak_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, rss_mib=rss_now,
    )  # fmt: skip
    return row


def periods_run(args: argparse.Namespace) -> int:
    """periods_run is how many idle and steady periods each size measures."""
    return max(1, args.periods)


def parse_size(text: str) -> tuple[int, int, int]:
    """parse_size reads ``WxNxR`` (waiting x nodes x running)."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"size {text!r} is not WAITINGxNODESxRUNNING, e.g. 10000x1000x2500")
    return int(parts[0]), int(parts[1]), int(parts[2])


def growth(rows: list[dict[str, Any]], key: str) -> str:
    """growth is the exponent k in time ∝ waiting^k between consecutive sizes that differ only in waiting."""
    out = []
    for a, b in zip(rows, rows[1:], strict=False):
        if (a["nodes"], a["running"]) == (b["nodes"], b["running"]) and a["waiting"] != b["waiting"] and a[key] > 0:
            k = math.log(b[key] / a[key]) / math.log(b["waiting"] / a["waiting"])
            out.append(f"{a['waiting']:,}→{b['waiting']:,}: {k:.2f}")
    return ", ".join(out) or "n/a"


def main(argv: list[str] | None = None) -> int:
    """main prints one Markdown row per size, then growth exponents (and JSON with --json)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000x100x250,10000x100x250", help="comma-separated WAITINGxNODESxRUNNING")
    parser.add_argument("--db", default=None, help="an empty database URL (default: a new SQLite file)")
    parser.add_argument("--periods", type=int, default=3, help="idle and steady periods measured per size (median)")
    parser.add_argument("--json", default=None, help="also write every figure to this file")
    parser.add_argument(
        "--shape", choices=tuple(SUBMITTERS), default="shards",
        help="waiting work as inference jobs of 1,000 shards, or as separate mixed jobs (kinds, gangs, tenants)",
    )  # fmt: skip
    parser.add_argument(
        "--gc", choices=("tuned", "default"), default="tuned",
        help="the collector as metasched serve tunes it (meta/serve/collector.py), or CPython's defaults",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:
        sizes = [parse_size(s) for s in args.sizes.split(",")]
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    print("| waiting × nodes × running | first (placed) | view | idle median / max (rested) | idle full pass | steady median / max (placed) | burst (placed) "
          "| stream | ends (placed) | then (placed) | failover | reconcile | snapshot | schedule | apply | actuate | RSS MiB (peak) |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for waiting, nodes, running in sizes:
        r = measure(waiting, nodes, running, args.db, periods_run(args), args.gc, args.shape)
        rows.append(r)
        print(
            f"| {waiting:,} × {nodes:,} × {running:,} | {r['first']:.2f} ({r['first_placed']:,}) | {r['view']:.2f} "
            f"| {r['idle']:.3f} / {r['idle_max']:.3f} ({r['idle_rested']}/{periods_run(args)}) | {r['idle_full']:.3f} | {r['period']:.3f} / {r['steady_max']:.3f} ({r['steady_placed']:.0f}) | {r['burst']:.2f} ({r['burst_placed']:,}) "
            f"| {r['burst_stream']:.2f} | {r['ends']:.2f} ({r['ends_placed']:,}) | {r['ends_next']:.2f} ({r['ends_next_placed']:,}) | {r['failover']:.2f} | {r['_reconcile']:.3f} | {r['build_snapshot']:.3f} "
            f"| {r['schedule']:.3f} | {r['apply_plan']:.3f} | {r['_actuate']:.3f} | {r['rss_mib']:.0f} ({r['rss_peak_mib']:.0f}) |",
            flush=True,
        )
        print(f"  idle steps {r['idle_steps']}; burst steps {r['burst_steps']}; ends steps {r['ends_steps']}; "
              f"failover next period {r['failover_next']:.2f}; setup {r['setup_s']:.0f}s", flush=True)
    for key in ("period", "idle"):
        print(f"growth exponent of {key} in waiting tasks: {growth(rows, key)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
