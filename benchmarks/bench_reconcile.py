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

from sqlalchemy import select  # noqa: E402

from benchmarks.store import open_store  # noqa: E402
from meta.cycle.lease import try_acquire  # noqa: E402
from meta.cycle.reconcile import Reconciler, ReconcileSettings, observe  # noqa: E402
from meta.model.spec import spec_from_dict  # noqa: E402
from meta.model.states import AttemptState  # noqa: E402
from meta.service.api import Service  # noqa: E402
from meta.store.db import Database  # noqa: E402
from meta.store.lifecycle import attempt_event, create_attempt  # noqa: E402
from meta.store.models import Attempt, Task  # noqa: E402
from meta.store.site import ensure_site_id  # noqa: E402
from slurm_bridge import tags  # noqa: E402
from slurm_bridge.fake import FakeSlurm  # noqa: E402

# one worker × 2 A100 on node1: the job and node share of every benchmarked attempt
RESOURCES = {"cpus": 4, "memory": "16G", "gpus": 2, "gpu_type": "a100"}
SHARE = {"node": "node1", "cpus": 4, "memory_mib": 16384, "gpus": 2, "gpu_type": "a100", "storage_gib": 0,
         "network": None}


def launching(db: Database, service: Service, name: str) -> str:
    """launching submits one training job and walks its task's attempt to launching; returns the attempt id."""
    spec = spec_from_dict({"kind": "training", "name": name, "tenant": "acme", "command": "python train.py",
                           "resources": dict(RESOURCES)})
    job_id = service.submit(spec).job.id
    with db.session() as session:
        task_id = session.scalar(select(Task.id).where(Task.job_id == job_id))
        attempt_id = create_attempt(session, task_id, f"bench:place:{task_id}", placement=[dict(SHARE)]).id
        attempt_event(session, attempt_id, AttemptState.LAUNCHING, f"bench:{attempt_id}:0", actor="bench")
    return attempt_id


def measure(n: int, url: str | None, periods: int) -> dict[str, float]:
    """measure sets up ``n`` launching attempts with running Slurm jobs and times reconcile passes."""
    db = open_store(url)
    service, fake = Service(db), FakeSlurm()
    site = ensure_site_id(db)  # the daemon tags every job with its store's site
    for i in range(n):
        attempt_id = launching(db, service, f"bench-{i}")
        job = fake.add_job(f"ms-{attempt_id}", tags.comment(site, attempt_id), "RUNNING", ("node1",))
        with db.session() as session:  # the actuator records the id sbatch answered with
            session.get(Attempt, attempt_id).slurm_job_id = str(job.job_id)
    leadership = try_acquire(db, "bench-leader", 3600)  # after the setup, which may take longer than a lease
    assert leadership is not None, "the leader lease of a fresh store is free"
    reconciler = Reconciler(db, fake, ReconcileSettings())
    times = []
    for _ in range(periods):
        observation = observe(fake, reconciler.since(), site=reconciler.site)
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
