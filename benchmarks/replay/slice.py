"""slice cuts a replayable piece out of a real trace: N consecutive jobs, compressed to minutes.

The dev cluster has 40 GPUs (2 × 8 A100, 2 × 8 H100, 2 × 4 T4) and a run must end in minutes,
so the slice is reshaped, the same way for both sides of the replay and for the simulator:

- arrivals keep their order and relative spacing, scaled so the last one comes ``span_s`` after
  the first;
- durations are compressed as ``c · d ** 0.5`` (Philly's run from a minute to weeks: a linear
  scale would leave most jobs at the floor and a few at the ceiling; the square root keeps their
  order and most of their spread), with ``c`` found by bisection so the offered load
  (GPU-seconds asked ÷ (GPUs × span)) is ``load``, then clamped to [min, max] seconds so no job
  is shorter than Slurm's own latencies nor longer than the run can afford;
- jobs asking more GPUs than the cluster's two largest nodes hold (16) are skipped; a job with
  ≤ 8 GPUs is one node (``-N 1``), a bigger one a gang of ``ceil(g / 8)`` nodes with an equal
  share each (16 → 2 × 8);
- the jobs are every k-th job of a window of the trace (``start_h`` + ``hours``), so the slice keeps
  the window's mix and its bursts rather than one user's run of look-alike jobs;
- the trace's tenants (Philly's virtual clusters) are split over the two accounts whole, largest
  first, each to the account that has asked the fewest GPU-seconds so far (so the two are busy
  alike and one VC's jobs always belong to one account).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from meta.sim.trace import TraceJob, load_trace

NODE_GPUS = 8
MAX_GPUS = 16
ACCOUNTS = ("tenant-a", "tenant-b")
DURATION_EXPONENT = 0.5


@dataclass(frozen=True, slots=True)
class ReplayJob:
    """ReplayJob is one job of the slice, in the shape both sides submit."""

    index: int
    trace_id: str
    account: str
    gpus: int
    nodes: int
    arrival_s: float  # after the run's start
    duration_s: int

    @property
    def gpus_per_node(self) -> int:
        """gpus_per_node is the GPUs each of the job's nodes holds."""
        return self.gpus // self.nodes

    @property
    def time_limit_min(self) -> int:
        """time_limit_min is the job's limit: its duration plus a minute of slack, in whole minutes."""
        return math.ceil((self.duration_s + 60) / 60)


@dataclass(frozen=True, slots=True)
class SliceSpec:
    """SliceSpec says which jobs to take and how to compress them."""

    trace: Path
    start_h: float = 24.0  # the window starts this long after the trace's first job
    hours: float = 24.0
    jobs: int = 120
    span_s: float = 240.0
    load: float = 0.9
    capacity_gpus: int = 40
    min_duration_s: int = 10
    max_duration_s: int = 180


def accounts_of(rows: list[TraceJob]) -> dict[str, str]:
    """accounts_of assigns each trace tenant to an account: largest first, to the less loaded one."""
    volume: dict[str, float] = {}
    for row in rows:
        volume[row.tenant] = volume.get(row.tenant, 0.0) + row.num_gpus * row.duration_s
    given = dict.fromkeys(ACCOUNTS, 0.0)
    owner = {}
    for tenant in sorted(volume, key=lambda t: (-volume[t], t)):
        account = min(ACCOUNTS, key=lambda a: (given[a], a))
        owner[tenant] = account
        given[account] += volume[tenant]
    return owner


def gang(gpus: int) -> tuple[int, int]:
    """gang is (nodes, GPUs) for a job: one node up to 8 GPUs, else equal shares of 8 or fewer."""
    nodes = max(1, math.ceil(gpus / NODE_GPUS))
    per_node = math.ceil(gpus / nodes)
    return nodes, per_node * nodes


def cut(spec: SliceSpec) -> list[ReplayJob]:
    """cut returns the compressed slice described by ``spec``."""
    picked = _window(spec)
    owner = accounts_of(picked)
    arrivals = _arrivals(picked, spec.span_s)
    shapes = [gang(row.num_gpus) for row in picked]
    factor = _duration_factor(picked, shapes, spec)
    return [
        ReplayJob(
            index=i,
            trace_id=row.job_id,
            account=owner[row.tenant],
            gpus=gpus,
            nodes=nodes,
            arrival_s=arrivals[i],
            duration_s=_clamped(_compressed(row.duration_s, factor), spec),
        )
        for i, (row, (nodes, gpus)) in enumerate(zip(picked, shapes, strict=True))
    ]


def offered_load(jobs: list[ReplayJob], capacity_gpus: int, span_s: float) -> float:
    """offered_load is GPU-seconds asked ÷ GPU-seconds the cluster has over the arrival span."""
    return sum(job.gpus * job.duration_s for job in jobs) / (capacity_gpus * span_s)


def _window(spec: SliceSpec) -> list[TraceJob]:
    """_window is every k-th usable job of the trace window, ``spec.jobs`` of them."""
    rows, _ = load_trace(spec.trace)
    begin = rows[0].submit_time + spec.start_h * 3600
    end = begin + spec.hours * 3600
    usable = [row for row in rows if begin <= row.submit_time < end and 0 < row.num_gpus <= MAX_GPUS]
    if len(usable) < spec.jobs:
        raise ValueError(f"the window has only {len(usable)} usable jobs (asked for {spec.jobs})")
    step = len(usable) / spec.jobs
    return [usable[int(i * step)] for i in range(spec.jobs)]


def _arrivals(rows: list[TraceJob], span_s: float) -> list[float]:
    """_arrivals scales the rows' submit times onto [0, span_s]."""
    first, last = rows[0].submit_time, rows[-1].submit_time
    scale = span_s / (last - first) if last > first else 0.0
    return [round((row.submit_time - first) * scale, 3) for row in rows]


def _compressed(seconds: float, factor: float) -> float:
    """_compressed is a trace duration on the replay's clock (before clamping)."""
    return factor * seconds**DURATION_EXPONENT


def _clamped(seconds: float, spec: SliceSpec) -> int:
    """_clamped rounds a compressed duration into [min, max] whole seconds."""
    return int(min(spec.max_duration_s, max(spec.min_duration_s, round(seconds))))


def _duration_factor(rows: list[TraceJob], shapes: list[tuple[int, int]], spec: SliceSpec) -> float:
    """_duration_factor is the duration scale that makes the clamped slice's offered load ``spec.load``."""

    def load_at(factor: float) -> float:
        asked = sum(
            g * _clamped(_compressed(row.duration_s, factor), spec)
            for row, (_, g) in zip(rows, shapes, strict=True)
        )
        return asked / (spec.capacity_gpus * spec.span_s)

    low, high = 0.0, 1.0
    while load_at(high) < spec.load and high < 1e6:
        high *= 2
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if load_at(middle) < spec.load else (low, middle)
    return high
