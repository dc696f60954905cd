"""collect waits for a side's jobs to end and turns Slurm's accounting into the replay's figures.

Times come from ``sacct`` (whole seconds), the same source for both sides. A job's queue delay is
measured from its *planned* arrival (the trace's time on the run's clock) to the Start Slurm
recorded: for metasched that includes the time it held the job before handing it to Slurm,
which Slurm's own Submit field does not see. A job submitted more than once by metasched (a
retried attempt) counts once, by its completed attempt; GPU time counts every attempt.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from benchmarks.replay.submit import Submitted
from meta.sim.metrics import summary

SACCT_FIELDS = ("JobName", "Account", "User", "Submit", "Start", "End", "State", "AllocTRES", "Cluster")
FINAL_PREFIXES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED")


@dataclass(frozen=True, slots=True)
class SlurmRow:
    """SlurmRow is one Slurm job of a side as sacct reports it."""

    name: str
    account: str
    user: str
    submit: float
    start: float | None
    end: float | None
    state: str
    gpus: int
    cluster: str = ""

    @property
    def final(self) -> bool:
        """final tells whether Slurm has ended the job."""
        return self.state.startswith(FINAL_PREFIXES)


def read_rows(prefix: str, since: float, clusters: str | None = None) -> list[SlurmRow]:
    """read_rows is every job whose name starts with ``prefix``, submitted since ``since`` (epoch), on ``clusters``."""
    start = datetime.fromtimestamp(since - 5).strftime("%Y-%m-%dT%H:%M:%S")
    argv = ["sacct", "-a", "-X", "-n", "-P", "-S", start, f"--format={','.join(SACCT_FIELDS)}"]
    argv += ["-M", clusters] if clusters else []
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout
    rows = [_row(line.split("|")) for line in out.splitlines() if line.strip()]
    return [row for row in rows if row.name.startswith(prefix + "-")]


def wait_until_done(
    prefix: str, since: float, names: set[str], pending: Callable[[], int], timeout_s: float,
    clusters: str | None = None,
) -> list[SlurmRow]:
    """wait_until_done polls sacct until every name has a final row and ``pending()`` is 0."""
    deadline = time.time() + timeout_s
    while True:
        rows = read_rows(prefix, since, clusters)
        seen = {row.name for row in rows}
        if seen >= names and all(row.final for row in rows) and pending() == 0:
            return rows
        if time.time() > deadline:
            raise TimeoutError(
                f"{prefix}: {len(names - seen)} jobs never reached Slurm, "
                f"{sum(not row.final for row in rows)} still live after {timeout_s:.0f} s"
            )
        time.sleep(3)


def figures(submitted: list[Submitted], rows: list[SlurmRow], capacity_gpus: int) -> dict:
    """figures is one side's report: jobs, queue delay, makespan, utilisation, per tenant, submits."""
    origin = min(s.planned for s in submitted)
    planned = {s.name: s.planned for s in submitted}
    done = _completed(rows)
    delays = {
        name: max(0.0, row.start - planned[name]) for name, row in done.items() if row.start is not None
    }
    slurm_delays = [row.start - row.submit for row in done.values() if row.start is not None]
    ends = [row.end for row in rows if row.end is not None]
    makespan = (max(ends) - origin) if ends else 0.0
    gpu_seconds = sum(row.gpus * (row.end - row.start) for row in rows if row.start and row.end)
    return {
        "jobs": len(submitted),
        "submit_failed": sum(not s.ok for s in submitted),
        "finished": len(done),
        "failed": len(planned) - len(done),
        "slurm_jobs": len(rows),
        "queue_delay_s": summary(delays.values()),
        "slurm_submit_to_start_s": summary(slurm_delays),
        "makespan_s": makespan,
        "gpu_utilization": gpu_seconds / (capacity_gpus * makespan) if makespan else 0.0,
        "tenant_mean_delay_s": _per_tenant(delays, done),
        "submit_latency_s": summary(s.latency_s for s in submitted),
        "submit_lag_max_s": max(s.started - s.planned for s in submitted),
        "jobs_per_cluster": dict(sorted(Counter(row.cluster for row in done.values()).items())),
    }


def _completed(rows: list[SlurmRow]) -> dict[str, SlurmRow]:
    """_completed is each job name's completed Slurm job (the last one if there are several)."""
    done: dict[str, SlurmRow] = {}
    for row in sorted(rows, key=lambda r: r.submit):
        if row.state.startswith("COMPLETED"):
            done[row.name] = row
    return done


def _per_tenant(delays: dict[str, float], done: dict[str, SlurmRow]) -> dict[str, float]:
    """_per_tenant is the mean queue delay of each account's completed jobs."""
    grouped: dict[str, list[float]] = defaultdict(list)
    for name, delay in delays.items():
        grouped[done[name].account].append(delay)
    return {account: sum(values) / len(values) for account, values in sorted(grouped.items())}


def _row(cells: list[str]) -> SlurmRow:
    """_row parses one sacct line in SACCT_FIELDS order."""
    name, account, user, submit, start, end, state, tres, cluster = cells[: len(SACCT_FIELDS)]
    return SlurmRow(
        name, account, user, _epoch(submit) or 0.0, _epoch(start), _epoch(end), state, _gpus(tres), cluster
    )


def _epoch(stamp: str) -> float | None:
    """_epoch reads sacct's local time stamp; Unknown/None (not started or not ended) is None."""
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def _gpus(tres: str) -> int:
    """_gpus is the untyped ``gres/gpu=N`` count of an AllocTRES string (0 when absent)."""
    for item in tres.split(","):
        key, _, value = item.partition("=")
        if key == "gres/gpu":
            return int(value)
    return 0
