"""Trace loading: the common CSV schema of the Philly, PAI-2023 and Crux samples → TraceJob rows.

Choices made here (and reported by the simulator):

* fractional GPUs (PAI GPU sharing, e.g. 0.46) are rounded **up** to one whole GPU, because
  Slurm's GRES allocates whole devices;
* an empty tenant becomes ``"unknown"``;
* rows without a duration (PAI pods that were never scheduled) are skipped and counted;
* ``job_kind`` labels are shortened (``latency_sensitive(...)`` → ``latency_sensitive``);
* the optional columns ``workers`` and ``gpus_per_worker`` (``metasched plan history`` writes them)
  give a gang's own shape; a trace without them is shaped from its GPU count as before;
* the optional column ``time_limit_s`` (also written by ``plan history``) is the job's time limit,
  the runtime estimate of ``SimConfig(estimate="limit")``; empty or absent = none.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from meta.model.kinds import JobKind

UNKNOWN_TENANT = "unknown"

# Trace kind label → the policy's JobKind (the label itself is kept for per-kind metrics).
_KIND_MAP = {
    "training": JobKind.TRAINING,
    "best_effort": JobKind.TRAINING,  # PAI BE pods: batch, likely training/offline
    "latency_sensitive": JobKind.INFERENCE,  # PAI LS pods: likely online inference
    # PAI's Kubernetes QoS classes for the few remaining pods: long-running, service-like pods
    # that ask for fixed resources; treated as (non-checkpointing, non-preemptible) inference.
    "guaranteed": JobKind.INFERENCE,
    "burstable": JobKind.INFERENCE,
    "inference": JobKind.INFERENCE,
    "evaluation": JobKind.EVALUATION,
}


class TraceError(ValueError):
    """TraceError is raised for a trace file that cannot be read or lacks required columns."""


@dataclass(frozen=True, slots=True)
class TraceJob:
    """TraceJob is one job of a trace, already normalised (whole GPUs, named tenant)."""

    job_id: str
    submit_time: float
    duration_s: float
    num_gpus: int
    gpu_type: str | None = None
    num_cpus: float = 0.0
    memory_mib: int = 0
    tenant: str = UNKNOWN_TENANT
    kind_label: str = "training"
    # the gang's shape as recorded (None: the simulator splits num_gpus by node size)
    workers: int | None = None
    gpus_per_worker: int | None = None
    time_limit_s: float | None = None  # what the job asked for (--time): the daemon's runtime estimate

    @property
    def kind(self) -> JobKind:
        """kind maps the trace's label to the policy's JobKind (unknown labels → evaluation)."""
        return _KIND_MAP.get(self.kind_label, JobKind.EVALUATION)


@dataclass(slots=True)
class LoadReport:
    """LoadReport counts what the loader changed or dropped, so runs can say so."""

    rows: int = 0
    loaded: int = 0
    skipped_no_duration: int = 0
    fractional_gpus_rounded: int = 0
    unknown_tenant: int = 0
    notes: list[str] = field(default_factory=list)


REQUIRED_COLUMNS = ("submit_time", "duration_s", "num_gpus")
SHAPE_COLUMNS = ("workers", "gpus_per_worker")  # optional: both or neither on a row


def _float(value: str | None, default: float = 0.0) -> float:
    """_float parses a CSV cell, treating empty as ``default``."""
    value = (value or "").strip()
    return float(value) if value else default


def _kind_label(raw: str | None) -> str:
    """_kind_label shortens ``latency_sensitive(likely...)`` to ``latency_sensitive``."""
    label = (raw or "").strip().lower()
    return label.split("(", 1)[0] or "training"


def parse_row(row: dict[str, str], index: int, report: LoadReport) -> TraceJob | None:
    """parse_row turns one CSV row into a TraceJob, or None when it has no duration."""
    if not (row.get("duration_s") or "").strip():
        report.skipped_no_duration += 1
        return None
    raw_gpus = _float(row.get("num_gpus"))
    gpus = math.ceil(raw_gpus) if raw_gpus > 0 else 0
    if gpus != raw_gpus:
        report.fractional_gpus_rounded += 1
    tenant = (row.get("tenant") or "").strip()
    if not tenant:
        report.unknown_tenant += 1
    workers, per_worker = _shape(row, index, gpus)
    return TraceJob(
        job_id=(row.get("job_id") or "").strip() or f"job-{index}",
        submit_time=_float(row.get("submit_time")),
        duration_s=max(0.0, _float(row.get("duration_s"))),
        num_gpus=gpus,
        gpu_type=(row.get("gpu_type") or "").strip().lower() or None,
        num_cpus=_float(row.get("num_cpus")),
        memory_mib=int(_float(row.get("memory_mib"))),
        tenant=tenant or UNKNOWN_TENANT,
        kind_label=_kind_label(row.get("job_kind")),
        workers=workers,
        gpus_per_worker=per_worker,
        time_limit_s=_time_limit(row, index),
    )


def _time_limit(row: dict[str, str], index: int) -> float | None:
    """_time_limit reads the optional time limit of a row: a positive number of seconds, or None when empty."""
    cell = (row.get("time_limit_s") or "").strip()
    if not cell:
        return None
    limit = float(cell)
    if not limit > 0:  # also refuses nan: a limit must let the job run
        raise TraceError(f"row {index + 1}: time_limit_s must be positive, not {cell!r}")
    return limit


def _whole(value: str, name: str, index: int) -> int:
    """_whole parses a count cell that must be a whole number (``2`` or ``2.0``)."""
    number = float(value)
    if not number.is_integer() or number < 0:
        raise TraceError(f"row {index + 1}: {name} must be a whole number, not {value!r}")
    return int(number)


def _shape(row: dict[str, str], index: int, gpus: int) -> tuple[int | None, int | None]:
    """_shape reads the optional (workers, gpus_per_worker) of a row; they must multiply to its GPUs."""
    cells = [(row.get(name) or "").strip() for name in SHAPE_COLUMNS]
    if not any(cells):
        return None, None
    if not all(cells):
        raise TraceError(f"row {index + 1}: give both workers and gpus_per_worker, or neither")
    workers, per_worker = (_whole(cell, name, index) for cell, name in zip(cells, SHAPE_COLUMNS, strict=True))
    if workers < 1 or workers * per_worker != gpus:
        raise TraceError(f"row {index + 1}: {workers} workers × {per_worker} GPUs is not num_gpus {gpus}")
    return workers, per_worker


def load_trace(path: str | Path, max_jobs: int | None = None) -> tuple[list[TraceJob], LoadReport]:
    """load_trace reads a trace CSV of the common schema, sorted by submit time."""
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"trace file not found: {path}")
    report = LoadReport()
    jobs: list[TraceJob] = []
    try:
        with path.open(newline="") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or ())]
            if missing:
                raise TraceError(f"{path}: missing column(s) {', '.join(missing)}")
            for index, row in enumerate(reader):
                report.rows += 1
                job = parse_row(row, index, report)
                if job is not None:
                    jobs.append(job)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise TraceError(f"cannot read trace {path}: {exc}") from exc
    except ValueError as exc:
        if isinstance(exc, TraceError):
            raise
        raise TraceError(f"{path}: bad value ({exc})") from exc
    jobs.sort(key=lambda job: (job.submit_time, job.job_id))
    if max_jobs is not None:
        jobs = jobs[:max_jobs]
    report.loaded = len(jobs)
    if report.fractional_gpus_rounded:
        report.notes.append(f"{report.fractional_gpus_rounded} fractional GPU requests rounded up to whole GPUs")
    if report.skipped_no_duration:
        report.notes.append(f"{report.skipped_no_duration} rows without duration (never scheduled) skipped")
    if report.unknown_tenant:
        report.notes.append(f"{report.unknown_tenant} rows without tenant → '{UNKNOWN_TENANT}'")
    return jobs, report


def compress_arrivals(jobs: list[TraceJob], load: float) -> list[TraceJob]:
    """compress_arrivals divides every inter-arrival gap by ``load`` (load > 1 = busier)."""
    if load <= 0:
        raise TraceError("load factor must be positive")
    if load == 1 or not jobs:
        return list(jobs)
    origin = jobs[0].submit_time
    return [_with_submit(job, origin + (job.submit_time - origin) / load) for job in jobs]


def _with_submit(job: TraceJob, submit: float) -> TraceJob:
    """_with_submit copies a TraceJob with a new submit time."""
    return replace(job, submit_time=submit)
