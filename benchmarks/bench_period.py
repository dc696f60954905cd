"""bench_period: the daemon's whole period, end to end, as waiting tasks, nodes and running jobs grow.

Usage (from the repo root)::

    python benchmarks/bench_period.py                                   # small sizes, SQLite
    python benchmarks/bench_period.py --db postgresql+psycopg://... --sizes 10000x1000x2500

Each size ``WxNxR`` is W waiting tasks, N nodes of 8 A100 and R running attempts. The store is
filled through the Service (inference jobs of up to 1,000 shards, 10 tenants); Slurm is the
in-memory FakeSlurm, so the figures are the daemon's own work: its store reads and writes and
the policy. The first periods place and launch the R running attempts (the "first" column is
the slowest of them); the waiting tasks each want a whole 8-GPU node while the running ones
leave none free, so the measured periods are steady ones where nothing changes. Every step of
``Daemon.period`` is timed; RSS is the process's peak.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import meta.cycle.daemon as daemon_module  # noqa: E402
from benchmarks.store import open_store  # noqa: E402
from meta.cycle.daemon import Daemon, DaemonConfig  # noqa: E402
from meta.cycle.launch_plan import LaunchSettings  # noqa: E402
from meta.model.spec import spec_from_dict  # noqa: E402
from meta.service.api import Service  # noqa: E402
from tests.runtime.fake_slurm import FakeSlurm, sinfo_node  # noqa: E402

GPUS_PER_NODE = 8
TENANTS = [f"tenant-{i}" for i in range(10)]
SHARDS_PER_JOB = 1000
STEPS = ("_inventory", "_reconcile", "_cycle", "_actuate")
INNER = ("build_snapshot", "schedule", "apply_plan")


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


class StepClock:
    """StepClock wraps the daemon's steps and the cycle's inner calls to time each one per period."""

    def __init__(self, daemon: Daemon) -> None:
        self.last: dict[str, float] = defaultdict(float)
        for name in STEPS:
            setattr(daemon, name, self._timed(name, getattr(daemon, name)))
        for name in INNER:
            setattr(daemon_module, name, self._timed(name, getattr(daemon_module, name)))

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
        return taken


def run_period(daemon: Daemon, clock: StepClock) -> dict[str, float]:
    """run_period runs one period and returns its wall time and step times."""
    started = time.perf_counter()
    report = daemon.period()
    if report.error:
        raise RuntimeError(f"period failed: {report.error}")
    return {"period": time.perf_counter() - started, **clock.take(), "placed": report.placed}


def measure(waiting: int, nodes: int, running: int, url: str | None, periods: int) -> dict[str, float]:
    """measure fills the store and times the first (placing) and the steady periods of one size."""
    db = open_store(url)
    service = Service(db)
    fake = FakeSlurm([sinfo_node(f"n{i:05d}", gpus=GPUS_PER_NODE) for i in range(nodes)])
    per_running = max(1, (nodes * GPUS_PER_NODE) // running)
    shards(service, running, per_running, "run")
    config = DaemonConfig(period_s=0.0, leader_lease_s=3600, holder="bench",
                          launch=LaunchSettings(log_dir=tempfile.mkdtemp()))  # fmt: skip
    daemon = Daemon(db, fake, config)
    clock = StepClock(daemon)
    first: list[dict[str, float]] = []
    while len(fake.jobs) < running and len(first) < 20:
        first.append(run_period(daemon, clock))
    for job in list(fake.jobs):
        fake.start(job)
    run_period(daemon, clock)  # reconcile sees them running
    shards(service, waiting, GPUS_PER_NODE, "wait")
    run_period(daemon, clock)  # the first look at the new waiting tasks writes their reasons
    steady = [run_period(daemon, clock) for _ in range(periods)]
    db.dispose()
    row = {name: statistics.median(p.get(name, 0.0) for p in steady) for name in ("period", *STEPS, *INNER)}
    row.update(waiting=waiting, nodes=nodes, running=len(fake.jobs), first=max(p["period"] for p in first),
               rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)  # fmt: skip
    return row


def parse_size(text: str) -> tuple[int, int, int]:
    """parse_size reads ``WxNxR`` (waiting x nodes x running)."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"size {text!r} is not WAITINGxNODESxRUNNING, e.g. 10000x1000x2500")
    return int(parts[0]), int(parts[1]), int(parts[2])


def main(argv: list[str] | None = None) -> int:
    """main prints one Markdown row per size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000x100x250,10000x100x250", help="comma-separated WAITINGxNODESxRUNNING")
    parser.add_argument("--db", default=None, help="an empty database URL (default: a new SQLite file)")
    parser.add_argument("--periods", type=int, default=3, help="steady periods measured per size (median)")
    args = parser.parse_args(argv)
    try:
        sizes = [parse_size(s) for s in args.sizes.split(",")]
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    print("| waiting × nodes × running | first period (s) | steady period (s) | inventory | reconcile "
          "| snapshot | schedule | apply | actuate | peak RSS MiB |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for waiting, nodes, running in sizes:
        r = measure(waiting, nodes, running, args.db, max(1, args.periods))
        print(
            f"| {waiting:,} × {nodes:,} × {r['running']:,} | {r['first']:.2f} | {r['period']:.3f} "
            f"| {r['_inventory']:.3f} | {r['_reconcile']:.3f} | {r['build_snapshot']:.3f} | {r['schedule']:.3f} "
            f"| {r['apply_plan']:.3f} | {r['_actuate']:.3f} | {r['rss_mib']:.0f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
