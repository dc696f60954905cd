"""bench_list: how long ``list`` takes as the store grows (the API's Service.list_jobs, no HTTP).

Usage (from the repo root)::

    python benchmarks/bench_list.py --db postgresql+psycopg://... --jobs 100000

The store gets ``--jobs`` jobs of 10 tenants (one real submit per tenant, then its rows cloned
with new ids and submit times, 1 task each, a tenth of them finished). Each figure is the median
of 5 calls: an admin's newest 200, a tenant member's newest 200, the next page after those
(keyset cursor), and an admin's 200 newest pending jobs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sqlalchemy import select  # noqa: E402

from benchmarks.store import open_store  # noqa: E402
from meta.model.spec import spec_from_dict  # noqa: E402
from meta.model.states import JobState  # noqa: E402
from meta.service.api import Service  # noqa: E402
from meta.store.bulk_insert import insert_sharing  # noqa: E402
from meta.store.models import Job, JobSpecRow, Task  # noqa: E402
from tenants.identity import Principal  # noqa: E402

TENANTS = [f"tenant-{i}" for i in range(10)]


def _row(session, model, where) -> dict:  # noqa: ANN001 - a small setup helper
    row = session.execute(select(model.__table__).where(where)).mappings().one()
    return dict(row)


def fill(service: Service, jobs: int) -> None:
    """fill stores ``jobs`` jobs: one real submit per tenant, cloned."""
    per_tenant = jobs // len(TENANTS)
    for tenant in TENANTS:
        spec = {"kind": "evaluation", "name": "e", "tenant": tenant, "command": "run",
                "resources": {"cpus": 1, "memory": "1G", "gpus": 1}}  # fmt: skip
        job_id = service.submit(spec_from_dict(spec)).job.id
        with service.db.session() as session:
            job = _row(session, Job, Job.id == job_id)
            spec_row = _row(session, JobSpecRow, JobSpecRow.job_id == job_id)
            task = _row(session, Task, Task.job_id == job_id)
            ids = [str(uuid.uuid4()) for _ in range(per_tenant)]
            start = job["submitted_at"]
            job_rows = [{"id": i, "short_id": i[:12], "submitted_at": start + timedelta(seconds=n * 7)}
                        for n, i in enumerate(ids)]  # fmt: skip
            job_shared = {k: v for k, v in job.items() if k not in {"id", "short_id", "submitted_at", "idempotency_key"}}
            insert_sharing(session, Job.__table__, job_rows, job_shared)
            spec_shared = {k: v for k, v in spec_row.items() if k != "job_id"}
            insert_sharing(session, JobSpecRow.__table__, [{"job_id": i} for i in ids], spec_shared)
            task_rows = [{"id": str(uuid.uuid4()), "job_id": i, "state": "succeeded" if n % 10 == 0 else "pending"}
                         for n, i in enumerate(ids)]  # fmt: skip
            task_shared = {k: v for k, v in task.items() if k not in {"id", "job_id", "state"}}
            insert_sharing(session, Task.__table__, task_rows, task_shared)


def timed(call) -> float:  # noqa: ANN001
    """timed is the median wall time of 5 calls."""
    times = []
    for _ in range(5):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    """main fills the store and prints one Markdown row."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=None, help="an empty database URL (default: a new SQLite file)")
    parser.add_argument("--jobs", type=int, default=20_000)
    args = parser.parse_args(argv)
    service = Service(open_store(args.db))
    started = time.perf_counter()
    fill(service, args.jobs)
    print(f"filled {args.jobs:,} jobs in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    member = Principal(name="alice", uid=2001, accounts=frozenset({"tenant-3"}), default_account="tenant-3")
    first = service.list_jobs(limit=200)
    cursor = first[-1].short_id if first else None
    figures = {
        "admin newest 200": timed(lambda: service.list_jobs(limit=200)),
        "member newest 200": timed(lambda: service.list_jobs(member, limit=200)),
        "admin pending 200": timed(lambda: service.list_jobs(state=JobState.PENDING, limit=200)),
    }
    if cursor is not None:
        figures["admin next page"] = timed(lambda: service.list_jobs(limit=200, after=cursor))
    print("| jobs in the store | " + " | ".join(figures) + " |")
    print("|---:|" + "---:|" * len(figures))
    print(f"| {args.jobs:,} | " + " | ".join(f"{v:.3f} s" for v in figures.values()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
