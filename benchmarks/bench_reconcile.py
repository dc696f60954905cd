"""bench_reconcile: what one reconcile pass costs the store as the number of running jobs grows.

Usage (from the repo root)::

    python benchmarks/bench_reconcile.py                      # 1,000 and 5,000 attempts, SQLite
    python benchmarks/bench_reconcile.py --attempts 10000 --db postgresql+psycopg://...

Slurm is a FakeSlurm here (its reads are measured by bench_overhead on the real cluster): the
figure is the daemon's own database work per period — the first pass moves every attempt from
launching to running, later passes only see them still running and renew their leases.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.store import open_store  # noqa: E402
from meta.cycle.reconcile import Reconciler, ReconcileSettings, observe  # noqa: E402
from meta.model.states import AttemptState  # noqa: E402
from meta.service.api import Service  # noqa: E402
from meta.store.models import Attempt  # noqa: E402
from slurm_bridge.fake import FakeSlurm  # noqa: E402
from tests.runtime.support import lead, place, share, submit, training  # noqa: E402


def measure(n: int, url: str | None, periods: int) -> dict[str, float]:
    """measure sets up ``n`` launching attempts with running Slurm jobs and times reconcile passes."""
    db = open_store(url)
    service, fake = Service(db), FakeSlurm()
    for i in range(n):
        _, (task_id,) = submit(service, training(name=f"bench-{i}"))
        attempt_id = place(db, task_id, [share("node1")], AttemptState.LAUNCHING)
        job = fake.add_job(f"ms-{attempt_id}", f"metasched:attempt={attempt_id}:token=1", "RUNNING", ("node1",))
        with db.session() as session:  # the actuator records the id sbatch answered with
            session.get(Attempt, attempt_id).slurm_job_id = str(job.job_id)
    leadership = lead(db, lease_s=3600)  # after the setup, which may take longer than a lease
    reconciler = Reconciler(db, fake, ReconcileSettings())
    times = []
    for _ in range(periods):
        observation = observe(fake, reconciler.since())
        started = time.perf_counter()
        reconciler.apply(observation, leadership)
        times.append(time.perf_counter() - started)
    db.dispose()
    steady = sorted(times[1:])[len(times[1:]) // 2]
    return {"attempts": n, "first_s": times[0], "steady_s": steady}


def main(argv: list[str] | None = None) -> int:
    """main prints one Markdown row per attempt count."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", default="1000,5000", help="comma-separated counts of running attempts")
    parser.add_argument("--db", default=None, help="an empty database URL (default: a new SQLite file)")
    parser.add_argument("--periods", type=int, default=5)
    args = parser.parse_args(argv)
    print("| running attempts | first pass: launching → running (s) | later passes: renew only (s, median) |")
    print("|---:|---:|---:|")
    for n in (int(x) for x in args.attempts.split(",")):
        r = measure(n, args.db, max(args.periods, 2))
        print(f"| {n:,} | {r['first_s']:.2f} | {r['steady_s']:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
