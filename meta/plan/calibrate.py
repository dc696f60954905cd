"""Calibration: a window's history replayed in the simulator, beside what really happened, with the error.

Rules (``metasched plan calibrate`` prints the notes that apply):

* **Replay.** Every history row is one task, submitted at its eligible moment, running its
  recorded run time (a censored row's run time up to the cut: a lower bound), shaped as asked
  (workers × GPUs per worker, GPU type, cpus, memory). No warm-up, no load compression; the
  policy decides on the daemon's period grid.
* **Estimate.** The policy's runtime estimate is the job's time limit, as the daemon's is.
* **No preemption.** History does not record which jobs declared they could be preempted or
  checkpointed, so nothing is; a task retried or requeued for real runs once, for its summed run time.
* **Queue delay.** Recorded: first start − eligible, which includes the launch through Slurm
  (the daemon's decision → RUNNING); simulated: eligible → start, a job decided at t holding its
  GPUs from t and starting at t + the launch delay: the window's measured one (the export's median,
  ``meta.plan.history``) unless one is given (``--launch-delay``; 0: a job starts at its decision).
  Percentiles interpolate linearly on both sides. Rows the simulated cluster can never place are
  left out of both sides and counted.
* **Error** = (simulated − recorded) / recorded; None when recorded is 0.
* **Tenants** with at least ``min_jobs`` replayed rows are compared one by one; all rows are replayed.
* **GPU utilization** = GPU-seconds run ÷ (cluster GPUs × span), span = first eligible moment →
  last end; a recorded task's attempts are taken as back to back from its first start.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from meta.plan.history import HistoryExport, HistoryRow
from meta.sim import policies
from meta.sim.cluster import ClusterSpec
from meta.sim.config import SimConfig
from meta.sim.engine import Engine, EngineResult
from meta.sim.job import JobState, SimJob
from meta.sim.metrics import summary
from meta.sim.trace import TraceJob
from meta.sim.waiting_causes import WaitingSplit, waiting_split

MIN_JOBS = 5  # a tenant with fewer rows is replayed but not compared: its mean is a few jobs' luck


@dataclass(frozen=True, slots=True)
class Pair:
    """Pair is one figure as recorded and as simulated."""

    real: float
    sim: float

    @property
    def error(self) -> float | None:
        """error is (sim − real) / real, None when real is 0."""
        return None if self.real == 0 else (self.sim - self.real) / self.real

    def as_dict(self, digits: int = 3) -> dict[str, float | None]:
        """as_dict is the pair and its error, rounded for JSON."""
        error = self.error
        return {"real": round(self.real, digits), "sim": round(self.sim, digits),
                "error": None if error is None else round(error, 4)}


@dataclass(frozen=True, slots=True)
class TenantFit:
    """TenantFit is one tenant's queue delay, recorded beside simulated."""

    tenant: str
    jobs: int
    mean: Pair
    p95: Pair


@dataclass
class Calibration:
    """Calibration is the replay's figures beside the recorded ones, and what the replay assumed."""

    rows: int
    replayed: int  # rows placed in the simulation (the compared ones)
    censored: int
    unplaced: int  # rows that never ran in the simulation (no node fits them)
    min_jobs: int
    tenants: list[TenantFit]
    small_tenants: dict[str, int]  # tenant -> replayed rows, below min_jobs
    mean: Pair
    p95: Pair
    utilization: Pair
    span_s: Pair
    capacity_gpus: int
    notes: list[str] = field(default_factory=list)
    waiting: WaitingSplit | None = None  # the simulated waiting by cause: shortage, fragmentation, policy
    launch_delay_s: float = 0.0  # the launch the replay simulated (decision → start)
    launch_measured_s: float = 0.0  # the window's measured launch (the export's median)
    launch_attempts: int = 0  # the attempts it was measured on (0: none)

    def verdict(self) -> str:
        """verdict is one line: the bound on the per-tenant error of the mean, or why there is none."""
        if not self.tenants:
            return f"no tenant has {self.min_jobs} replayed jobs: no per-tenant verdict"
        known = [fit for fit in self.tenants if fit.mean.error is not None]
        silent = [fit.tenant for fit in self.tenants if fit.mean.error is None]
        tail = f"; no relative error for {', '.join(silent)} (no recorded delay)" if silent else ""
        if not known:
            return "no tenant recorded a queue delay: no relative error" + tail
        worst = max(known, key=lambda fit: (abs(fit.mean.error or 0.0), fit.tenant))
        error = worst.mean.error or 0.0
        every = "every tenant" if not silent else "every tenant with a recorded delay"
        return (f"simulated mean queue delay within {math.ceil(round(abs(error) * 100, 6))}% of recorded on {every} "
                f"(worst: {worst.tenant}, {error:+.1%}){tail}")

    def as_dict(self) -> dict[str, Any]:
        """as_dict is the --json report."""
        return {
            "rows": self.rows, "replayed": self.replayed, "censored": self.censored, "unplaced": self.unplaced,
            "min_jobs": self.min_jobs,
            "tenants": [{"tenant": fit.tenant, "jobs": fit.jobs, "mean_queue_s": fit.mean.as_dict(),
                         "p95_queue_s": fit.p95.as_dict()} for fit in self.tenants],
            "small_tenants": dict(sorted(self.small_tenants.items())),
            "overall": {"mean_queue_s": self.mean.as_dict(), "p95_queue_s": self.p95.as_dict()},
            "gpu_utilization": self.utilization.as_dict(4),
            "span_s": self.span_s.as_dict(),
            "capacity_gpus": self.capacity_gpus,
            "launch_delay": {"simulated_s": round(self.launch_delay_s, 3), "measured_s": round(self.launch_measured_s, 3),
                             "measured_attempts": self.launch_attempts},
            "verdict": self.verdict(),
            "notes": list(self.notes),
            "waiting": None if self.waiting is None else self.waiting.as_dict(),
        }


def trace_job(row: HistoryRow, origin: float = 0.0) -> TraceJob:
    """trace_job is a history row as the simulator's trace row (its recorded shape and time limit), ``origin`` s earlier."""
    return TraceJob(
        job_id=row.job_id, submit_time=row.submit_time - origin, duration_s=row.duration_s, num_gpus=row.num_gpus,
        gpu_type=row.gpu_type, num_cpus=row.num_cpus, memory_mib=row.memory_mib, tenant=row.tenant,
        kind_label=row.job_kind, workers=row.workers, gpus_per_worker=row.gpus_per_worker,
        time_limit_s=row.time_limit_s,
    )


def launch_delay(export: HistoryExport, given: float | None = None) -> float:
    """launch_delay is the launch a replay simulates: ``given`` (``--launch-delay``), else the window's measured one."""
    return export.launch_delay_s if given is None else given


def sim_config(weights: dict[str, float], period_s: float, launch_delay_s: float = 0.0) -> SimConfig:
    """sim_config is the replay's settings: the daemon's period and launch delay, limits as estimates, no warm-up, no preemption."""
    return SimConfig(
        launch_delay_s=launch_delay_s,
        cycle_interval_s=period_s, warmup_hours=0, estimate="limit", checkpoint_kinds=frozenset(),
        preemptible_kinds=frozenset(), tenant_weights=dict(weights),
        guarantee_fraction=0.0,  # the simulator's guarantees-by-weight are not the site's (see site.binding_quotas)
        strict=False,  # an invalid placement is counted and noted, not a crash of the command
        waiting_causes=True,  # every replay says how much of its waiting was shortage, fragmentation or policy
    )


@dataclass
class Replay:
    """Replay is one engine run of history rows: each row beside its simulated job, and the raw result."""

    rows: list[HistoryRow]
    raw: EngineResult
    origin: float  # the rows' time that is the engine's 0 s
    capacity_gpus: int
    launch_delay_s: float = 0.0  # decision → start in this run

    @property
    def placed(self) -> list[tuple[HistoryRow, SimJob]]:
        """placed pairs the rows that ran in the simulation with their simulated jobs."""
        return [(row, job) for row, job in zip(self.rows, self.raw.jobs, strict=True) if job.state == JobState.DONE]


def replay(rows: Sequence[HistoryRow], cluster: ClusterSpec, weights: dict[str, float], policy_config: Any,
           period_s: float, *, policy: Callable[..., Any] | None = None, origin: float | None = None,
           launch_delay_s: float = 0.0) -> Replay:
    """replay runs the rows through the engine under the policy (metasched's by default) with the replay's settings.

    ``origin`` (default: the first eligible row) is the rows' time that becomes the engine's 0 s; replays that
    are to be compared (today and a what-if) share it, so their decisions fall on the same period grid, and
    ``launch_delay_s`` (decision → start; see ``launch_delay``), so their jobs launch alike.
    """
    if policy is None:
        policy, default = policies.resolve("metasched")
        policy_config = default if policy_config is None else policy_config
    # time starts at the first eligible row, not at --since: the period grid's phase would otherwise move
    # with the moment the command runs ("14d" ago), and the figures with it
    start = min((row.submit_time for row in rows), default=0.0) if origin is None else origin
    raw = Engine([trace_job(row, start) for row in rows], cluster, policy, policy_config,
                 sim_config(weights, period_s, launch_delay_s)).run()
    return Replay(list(rows), raw, start, cluster.total_gpus(), launch_delay_s)


def calibrate(export: HistoryExport, cluster: ClusterSpec, weights: dict[str, float], policy_config: Any,
              period_s: float, *, min_jobs: int = MIN_JOBS, policy: Callable[..., Any] | None = None,
              launch_delay_s: float | None = None) -> Calibration:
    """calibrate replays the export's rows under the policy (metasched's by default) and compares queue delays.

    ``launch_delay_s`` (None: the export's measured one) is decision → start in the replay.
    """
    if not export.rows:
        raise ValueError("no row to replay: no task of the window started before the cut")
    run = replay(export.rows, cluster, weights, policy_config, period_s, policy=policy,
                 launch_delay_s=launch_delay(export, launch_delay_s))
    return compare(export, run, min_jobs)


def compare(export: HistoryExport, run: Replay, min_jobs: int = MIN_JOBS) -> Calibration:
    """compare puts a replay of the export's rows beside what was recorded for them."""
    placed = run.placed
    by_tenant: dict[str, list[tuple[HistoryRow, SimJob]]] = defaultdict(list)
    for pair in placed:
        by_tenant[pair[0].tenant].append(pair)
    fits = [_fit(tenant, pairs) for tenant, pairs in sorted(by_tenant.items()) if len(pairs) >= min_jobs]
    overall = _fit("*", placed)
    result = Calibration(
        rows=len(run.rows), replayed=len(placed), censored=export.censored,
        unplaced=len(run.rows) - len(placed), min_jobs=min_jobs, tenants=fits,
        small_tenants={t: len(p) for t, p in by_tenant.items() if len(p) < min_jobs},
        mean=overall.mean, p95=overall.p95, capacity_gpus=run.capacity_gpus, **_busy(placed, run.capacity_gpus),
        launch_delay_s=run.launch_delay_s, launch_measured_s=export.launch_delay_s,
        launch_attempts=export.launch_attempts,
    )
    result.notes = _notes(export, result, run.raw.invalid_placements, run.raw.notes)
    result.waiting = waiting_split(run.raw)
    return result


def _fit(tenant: str, pairs: Sequence[tuple[HistoryRow, SimJob]]) -> TenantFit:
    """_fit summarises recorded and simulated queue delays of the same rows."""
    real = summary(row.queue_delay_s for row, _ in pairs)
    sim = summary(job.queue_s for _, job in pairs)
    return TenantFit(tenant, len(pairs), Pair(real["mean"], sim["mean"]), Pair(real["p95"], sim["p95"]))


def _busy(pairs: Sequence[tuple[HistoryRow, SimJob]], capacity: int) -> dict[str, Pair]:
    """_busy is GPU utilization and span of the placed rows, recorded and simulated (the same GPU-seconds)."""
    if not pairs:
        return {"utilization": Pair(0.0, 0.0), "span_s": Pair(0.0, 0.0)}
    gpu_s = sum(row.duration_s * row.num_gpus for row, _ in pairs)
    real_start = min(row.submit_time for row, _ in pairs)
    real_end = max(row.submit_time + row.queue_delay_s + row.duration_s for row, _ in pairs)
    sim_start = min(job.submit for _, job in pairs)  # the replay's clock starts elsewhere (see calibrate)
    sim_end = max(job.end_time or job.submit for _, job in pairs)
    spans = Pair(real_end - real_start, sim_end - sim_start)

    def busy(span: float) -> float:
        return gpu_s / (capacity * span) if capacity and span > 0 else 0.0

    return {"utilization": Pair(busy(spans.real), busy(spans.sim)), "span_s": spans}


def _launch_notes(result: Calibration) -> list[str]:
    """_launch_notes says which launch delay the replay simulated and where it came from."""
    used, measured, attempts = result.launch_delay_s, result.launch_measured_s, result.launch_attempts
    head = "recorded delays include the launch through Slurm (the daemon's decision → RUNNING)"
    found = (f"measured: {measured:.2f} s, the median over {attempts} started attempt{'s' if attempts != 1 else ''} "
             "of the window" if attempts else "no attempt of the window recorded its start: none measured")
    if used == 0:
        given = "" if not attempts else " (--launch-delay 0)"
        return [f"{head}; {found}; the replay simulates none{given}: a simulated job starts at its decision"]
    source = "the measured one" if attempts and used == measured else "given (--launch-delay)"
    return [f"{head}; {found}; the replay simulates {used:.2f} s, {source}: a job holds its GPUs from its decision "
            f"and starts {used:.2f} s later, its queue delay ending there",
            f"the simulated waiting by cause runs to each decision: the {used:.2f} s launch after it is no cause"]


def _notes(export: HistoryExport, result: Calibration, invalid: int, engine_notes: list[str]) -> list[str]:
    """_notes says what the replay assumed and what it left out, in numbers."""
    notes = [
        "runtime estimate: each job's time limit, as the daemon's; decisions on the daemon's period grid",
        "nothing is preempted or checkpointed in the replay (history does not say which jobs allowed it)",
        *_launch_notes(result),
    ]
    if result.censored:
        notes.append(f"{result.censored} rows had not ended at the cut: replayed with their run time up to it "
                     "(a lower bound)")
    retried = sum(1 for row in export.rows if row.attempts > 1 or row.outcome == "preempted")
    if retried:
        notes.append(f"{retried} rows were retried, requeued or preempted for real: replayed as one run of their "
                     "summed run time")
    if result.unplaced:
        notes.append(f"{result.unplaced} rows never ran in the simulation (no node of it fits them): left out of both sides")
    if result.small_tenants:
        small = ", ".join(f"{t} ({n})" for t, n in sorted(result.small_tenants.items()))
        notes.append(f"replayed but not compared (fewer than {result.min_jobs} rows): {small}")
    if invalid:
        notes.append(f"{invalid} placements of the policy could not be applied in the simulation (dropped)")
    return notes + list(engine_notes)
