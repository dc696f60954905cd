"""bench_submit: jobs stored per second by the service's submit path, one at a time, concurrent, in batches.

Usage (from the repo root)::

    python benchmarks/bench_submit.py --db postgresql+psycopg://... [--jobs 2000]

In-process ``Service`` calls (what the API routes run, without HTTP and MUNGE): single submits
from one thread, single submits from 8 threads at once, and ``submit_many`` batches of 100 and
1,000 jobs. Each job is a one-task evaluation of its tenant (10 tenants).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.store import open_store  # noqa: E402
from meta.model.spec import AnySpec, spec_from_dict  # noqa: E402
from meta.service.api import Service  # noqa: E402

THREADS = 8


def spec(i: int) -> AnySpec:
    """spec is job ``i``: a one-task evaluation of tenant i mod 10."""
    return spec_from_dict({"kind": "evaluation", "name": f"b{i}", "tenant": f"tenant-{i % 10}", "command": "run",
                           "resources": {"cpus": 1, "memory": "1G", "gpus": 1}})  # fmt: skip


def rate(jobs: int, run) -> float:  # noqa: ANN001 - a callable storing ``jobs`` jobs
    """rate is jobs stored per second by ``run``."""
    started = time.perf_counter()
    run()
    return jobs / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    """main prints one Markdown row of jobs/s per way of submitting."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=None, help="an empty database URL (default: a new SQLite file)")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per measurement")
    args = parser.parse_args(argv)
    service = Service(open_store(args.db))
    specs = [spec(i) for i in range(args.jobs)]
    service.submit_many(specs[:10])  # tenants and queues exist before anything is timed
    figures = {
        "single, 1 thread": rate(args.jobs // 4, lambda: [service.submit(s) for s in specs[: args.jobs // 4]]),
        f"single, {THREADS} threads": rate(args.jobs, lambda: list(ThreadPoolExecutor(THREADS).map(service.submit, specs))),
        "batches of 100": rate(args.jobs, lambda: [service.submit_many(specs[i : i + 100]) for i in range(0, args.jobs, 100)]),
        "batches of 1,000": rate(args.jobs, lambda: [service.submit_many(specs[i : i + 1000]) for i in range(0, args.jobs, 1000)]),
    }  # fmt: skip
    print("| store | " + " | ".join(figures) + " |")
    print("|---|" + "---:|" * len(figures))
    store = "PostgreSQL" if args.db else "SQLite"
    print(f"| {store} | " + " | ".join(f"{v:,.0f} jobs/s" for v in figures.values()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
