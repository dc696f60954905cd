"""bench_task_cap: how long the largest allowed request holds the store, and another tenant's submit meanwhile (issue 22, S4).

Usage (from the repo root)::

    python benchmarks/bench_task_cap.py [--db postgresql+psycopg://...] [--rounds 5] [--prefill 100000]

In-process ``Service`` calls with a ``SubmitGate`` (what ``POST /v1/jobs/batch`` runs, without
HTTP and MUNGE). Each round: tenant-a sends the largest request the cap allows
(``MAX_TASKS_PER_REQUEST`` tasks: 100 inference jobs of 200 partitions, or one job of 20,000),
and 50 ms in, tenant-b submits one one-task job from another thread; its latency is compared
with the same submit alone. Also timed: the refusal of S4's request (100 jobs of 20,000
partitions). ``--prefill`` stores that many pending tasks first (a store that is not empty).
Prints a Markdown table of medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.store import open_store  # noqa: E402
from meta.model.errors import InvalidRequest  # noqa: E402
from meta.model.limits import MAX_TASKS_PER_REQUEST  # noqa: E402
from meta.model.spec import AnySpec, spec_from_dict  # noqa: E402
from meta.service.api import Service  # noqa: E402
from meta.service.submit_gate import SubmitGate  # noqa: E402

OTHER_AFTER_S = 0.05


def inference(name: str, tenant: str, partitions: int) -> AnySpec:
    """inference is one inference job of ``partitions`` tasks."""
    return spec_from_dict({"kind": "inference", "name": name, "tenant": tenant, "command": "run",
                           "partitions": partitions, "output": "/tmp/bench-out",
                           "resources": {"cpus": 1, "memory": "1G", "gpus": 1}})  # fmt: skip


def one_task(name: str, tenant: str) -> AnySpec:
    """one_task is a one-task evaluation job."""
    return spec_from_dict({"kind": "evaluation", "name": name, "tenant": tenant, "command": "run",
                           "resources": {"cpus": 1, "memory": "1G", "gpus": 1}})  # fmt: skip


def timed(run) -> float:  # noqa: ANN001 - a callable
    """timed is how long ``run`` took, in seconds."""
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def contended(service: Service, batch: list[AnySpec], other: AnySpec) -> tuple[float, float]:
    """contended is (the batch's time, the other tenant's submit latency started ``OTHER_AFTER_S`` into it)."""
    latency: list[float] = []

    def other_submit() -> None:
        time.sleep(OTHER_AFTER_S)
        latency.append(timed(lambda: service.submit(other)))

    thread = threading.Thread(target=other_submit)
    thread.start()
    took = timed(lambda: service.submit_many(batch))
    thread.join()
    return took, latency[0]


def main(argv: list[str] | None = None) -> int:
    """main prints one Markdown row per request shape: medians over the rounds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=None, help="an empty database URL (default: a new SQLite file)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--prefill", type=int, default=0, help="pending tasks stored before the rounds")
    args = parser.parse_args(argv)
    service = Service(open_store(args.db))
    service.gate = SubmitGate(service.db, max_pending_tasks=None, rate=1e6, burst=10**7)  # measure the store
    for start in range(0, args.prefill, MAX_TASKS_PER_REQUEST):
        service.submit_many(
            [inference(f"fill{start}", "tenant-c", min(MAX_TASKS_PER_REQUEST, args.prefill - start))]
        )
    shapes = {
        f"100 jobs x {MAX_TASKS_PER_REQUEST // 100} partitions": 100,
        f"1 job x {MAX_TASKS_PER_REQUEST:,} partitions": 1,
    }
    store = "PostgreSQL" if args.db else "SQLite"
    print(f"| store ({args.prefill:,} tasks stored first) | request | request took | other tenant's submit during it "
          "| the same submit alone |")  # fmt: skip
    print("|---|---|---:|---:|---:|")
    for shape, jobs in shapes.items():
        took, during, alone = [], [], []
        for r in range(args.rounds):
            batch = [inference(f"r{r}j{j}", "tenant-a", MAX_TASKS_PER_REQUEST // jobs) for j in range(jobs)]
            t, d = contended(service, batch, one_task(f"o{r}{jobs}", "tenant-b"))
            took.append(t)
            during.append(d)
            alone.append(timed(lambda r=r, jobs=jobs: service.submit(one_task(f"a{r}{jobs}", "tenant-b"))))
        print(f"| {store} | {shape} | {statistics.median(took):.2f} s | {statistics.median(during):.2f} s "
              f"| {statistics.median(alone) * 1000:.0f} ms |")  # fmt: skip
    refused = [inference(f"s4-{j}", "tenant-a", 20_000) for j in range(100)]
    started = time.perf_counter()
    try:
        service.submit_many(refused)
    except InvalidRequest:
        refusal = time.perf_counter() - started
    else:
        raise AssertionError("S4's request was stored")
    print(
        f"| {store} | S4's request: 100 jobs x 20,000 partitions | refused in {refusal * 1000:.0f} ms | | |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
