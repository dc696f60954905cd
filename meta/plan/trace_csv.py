"""Writing an export as a trace CSV that ``meta.sim.trace.load_trace`` (``metasched simulate --trace``) reads."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import TextIO

from meta.plan.history import HistoryRow

# the simulator's columns first (meta/sim/trace.py), then what calibration compares and who asked
COLUMNS = (
    "job_id", "submit_time", "duration_s", "num_gpus", "gpu_type", "num_cpus", "memory_mib", "tenant", "job_kind",
    "workers", "gpus_per_worker", "attempts", "outcome", "censored", "queue_delay_s", "time_limit_s", "user", "name",
)


def number(value: float) -> int | float:
    """number writes a whole value without ``.0`` and keeps milliseconds of the rest."""
    return int(value) if float(value).is_integer() else round(value, 3)


def cells(row: HistoryRow) -> list[object]:
    """cells is a row's values in COLUMNS order."""
    return [
        row.job_id, number(row.submit_time), number(row.duration_s), row.num_gpus, row.gpu_type or "",
        number(row.num_cpus), row.memory_mib, row.tenant, row.job_kind, row.workers, row.gpus_per_worker,
        row.attempts, row.outcome, int(row.censored), number(row.queue_delay_s), number(row.time_limit_s),
        row.user, row.name,
    ]


def write_trace(rows: Iterable[HistoryRow], handle: TextIO) -> int:
    """write_trace writes the header and one line per row; returns the number of rows."""
    writer = csv.writer(handle, lineterminator="\n")
    writer.writerow(COLUMNS)
    count = 0
    for row in rows:
        writer.writerow(cells(row))
        count += 1
    return count
