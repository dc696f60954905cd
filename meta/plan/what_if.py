"""What-if: today's calibrated replay beside each scenario's replay of the same history, with the deltas.

Every run is ``calibrate.replay`` (the same engine settings, the same origin, so the same period
grid, and the same launch delay: the window's measured one unless given); "today" is the calibration's own run, so its figures are the calibration's simulated side
and its error against the record is shown beside them. Every figure is defined in ``DEFINITIONS``
below, which ``--json`` prints too.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from meta.plan.calibrate import MIN_JOBS, Calibration, Replay, compare, launch_delay, replay
from meta.plan.history import HistoryExport, HistoryRow
from meta.plan.scenario import Applied, Inputs, Scenario, apply_scenario, check_names
from meta.policy.config import SchedulerConfig
from meta.sim import policies
from meta.sim.cluster import ClusterSpec
from meta.sim.engine import EngineResult
from meta.sim.job import JobState, SimJob
from meta.sim.metrics import summary

WEIGHTS_IDLE = ("under this policy the share change moves nothing: with no guarantee in the replay every job "
                "borrows, and fair_share_horizon_s: 0 with tenant_order: turns orders borrowers shortest-first "
                "whatever their weight (set fair_share_horizon_s or tenant_order: multifactor in --scenario-policy "
                "to see weights act)")
DEFINITIONS = {
    "queue_delay": "simulated time from eligible to start (decision + launch delay), of the rows placed in that "
                   "run (seconds)",
    "gpu_utilization": "GPU-seconds run / (the run's cluster GPUs × span); span = first eligible row -> last end",
    "stranded_gpus": "time-averaged free GPUs (any type) while some job waited after a scheduling decision; "
                     "waiting_share = that time over the span",
    "largest_gang_gpus": "per GPU type, on an empty cluster: the most GPUs one job of equal workers can get under "
                         "one top-level switch (nodes without a switch count as one network)",
    "delta": "scenario − today; relative = delta / today (None when today is 0)",
}


@dataclass(frozen=True, slots=True)
class Delay:
    """Delay is the queue delays of some placed rows: how many, their mean and p95 (seconds)."""

    jobs: int
    mean: float
    p95: float

    def as_dict(self) -> dict[str, float]:
        """as_dict is the figures for --json."""
        return {"jobs": self.jobs, "mean_queue_s": round(self.mean, 3), "p95_queue_s": round(self.p95, 3)}


@dataclass(frozen=True, slots=True)
class Figures:
    """Figures is one replay's outcome: delays per tenant and overall, utilization, stranded GPUs, largest gangs."""

    name: str
    rows: int
    nodes: int
    capacity_gpus: int
    tenants: dict[str, Delay]
    overall: Delay
    utilization: float
    stranded_gpus: float
    waiting_share: float
    largest_gang: dict[str, int]
    invalid_placements: int = 0

    @property
    def unplaced(self) -> int:
        """unplaced counts the rows that never ran (no node of the run's cluster fits them)."""
        return self.rows - self.overall.jobs

    def as_dict(self) -> dict[str, Any]:
        """as_dict is the figures for --json."""
        return {
            "name": self.name, "rows": self.rows, "replayed": self.overall.jobs, "unplaced": self.unplaced,
            "nodes": self.nodes, "capacity_gpus": self.capacity_gpus,
            "tenants": {tenant: delay.as_dict() for tenant, delay in sorted(self.tenants.items())},
            "overall": self.overall.as_dict(), "gpu_utilization": round(self.utilization, 4),
            "stranded_gpus": round(self.stranded_gpus, 3), "waiting_share": round(self.waiting_share, 4),
            "largest_gang_gpus": dict(sorted(self.largest_gang.items())),
            "invalid_placements": self.invalid_placements,
        }


@dataclass
class Outcome:
    """Outcome is one scenario: what it changed, its figures and its run (for plots)."""

    scenario: Scenario
    applied: Applied
    figures: Figures
    run: Replay = field(repr=False)


@dataclass
class Comparison:
    """Comparison is today's calibrated replay and each scenario beside it."""

    calibration: Calibration
    today: Figures
    today_run: Replay = field(repr=False)
    outcomes: list[Outcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """as_dict is the --json report."""
        return {
            "calibration": self.calibration.as_dict(),
            "today": self.today.as_dict(),
            "scenarios": [{
                "scenario": outcome.scenario.as_dict(), "changes": outcome.scenario.changes(),
                "trend": outcome.applied.trend.as_dict() if outcome.applied.trend else None,
                "figures": outcome.figures.as_dict(), "delta_vs_today": delta(self.today, outcome.figures),
                "notes": list(outcome.applied.notes),
            } for outcome in self.outcomes],
            "definitions": dict(DEFINITIONS),
            "notes": list(self.notes),
        }


def what_if(export: HistoryExport, base: Inputs, scenarios: Sequence[Scenario], period_s: float, *,
            policy: Callable[..., Any] | None = None, min_jobs: int = MIN_JOBS,
            launch_delay_s: float | None = None) -> Comparison:
    """what_if replays today (calibrated against the record) and every scenario on the same origin and launch delay.

    ``launch_delay_s`` (None: the export's measured one) is decision → start in every replay.
    """
    check_names(scenarios)
    if not base.rows:
        raise ValueError("no row to replay: no task of the window started before the cut")
    applied = [apply_scenario(found, base) for found in scenarios]  # every refusal before the first simulation
    launch = launch_delay(export, launch_delay_s)
    today_run = run_inputs(base, period_s, policy=policy, launch_delay_s=launch)
    result = Comparison(compare(export, today_run, min_jobs), figures("today", today_run, base.cluster), today_run)
    for found, change in zip(scenarios, applied, strict=True):
        if found.shares and not weights_order(change.inputs.policy_config):
            change.notes.append(WEIGHTS_IDLE)
        run = run_inputs(change.inputs, period_s, policy=policy, origin=today_run.origin, launch_delay_s=launch)
        result.outcomes.append(Outcome(found, change, figures(found.name, run, change.inputs.cluster), run))
    return result


def weights_order(config: Any) -> bool:
    """weights_order tells whether the policy's order of waiting jobs depends on the tenants' weights in a replay.

    In a replay no tenant has a guarantee, so every task is a borrower; with ``tenant_order: turns``
    and ``fair_share_horizon_s: 0`` (the shipped setting) borrowers merge shortest-first whatever
    their tenant's share, and a weight changes nothing.
    """
    if config is None:
        config = policies.resolve("metasched")[1]
    if config is None or not isinstance(config, SchedulerConfig):
        return True  # another policy's config: its own rules, not second-guessed here
    return config.tenant_order != "turns" or config.fair_share_horizon_s != 0


def run_inputs(inputs: Inputs, period_s: float, *, policy: Callable[..., Any] | None = None,
               origin: float | None = None, launch_delay_s: float = 0.0) -> Replay:
    """run_inputs replays one set of inputs (calibrate's replay: the same engine settings)."""
    return replay(inputs.rows, inputs.cluster, inputs.weights, inputs.policy_config, period_s, policy=policy,
                  origin=origin, launch_delay_s=launch_delay_s)


def figures(name: str, run: Replay, cluster: ClusterSpec) -> Figures:
    """figures summarises one replay by the module's definitions."""
    placed = run.placed
    by_tenant: dict[str, list[SimJob]] = defaultdict(list)
    for row, job in placed:
        by_tenant[row.tenant].append(job)
    span = _span([job for _, job in placed])
    free, waiting = stranded(run.raw)
    return Figures(
        name=name, rows=len(run.rows), nodes=cluster.node_count(), capacity_gpus=run.capacity_gpus,
        tenants={tenant: delays(jobs) for tenant, jobs in sorted(by_tenant.items())},
        overall=delays([job for _, job in placed]),
        utilization=_utilization(placed, run.capacity_gpus, span), stranded_gpus=free,
        waiting_share=waiting / span if span > 0 else 0.0, largest_gang=largest_gang(cluster),
        invalid_placements=run.raw.invalid_placements,
    )


def delays(jobs: Sequence[SimJob]) -> Delay:
    """delays is the count, mean and p95 of the jobs' simulated queue delays."""
    found = summary(job.queue_s for job in jobs)
    return Delay(len(jobs), found["mean"], found["p95"])


def stranded(raw: EngineResult) -> tuple[float, float]:
    """stranded is (mean free GPUs while some job waited, seconds some job waited), from the policy's samples.

    Each sample is one policy call: its free GPUs are those left after the call's placements, and
    they stay free until the next call (a completion with work waiting triggers one). A job waits
    after the call at ``t`` when it became eligible by ``t`` and had not been placed by ``t`` (the
    replay preempts nothing, so a job's wait is eligible → its first placement; a launching job holds
    its GPUs and waits for no decision). Waits that end at the next decision (the period's grid) are
    not counted: no sample falls inside them.
    """
    submits = sorted(job.submit for job in raw.jobs if job.state not in (JobState.REJECTED, JobState.FUTURE))
    starts = sorted(job.first_placed for job in raw.jobs if job.first_placed is not None)
    waited = free_s = 0.0
    for now, following in zip(raw.samples, raw.samples[1:], strict=False):
        if bisect_right(submits, now.time) - bisect_right(starts, now.time) > 0:
            step = following.time - now.time
            waited += step
            free_s += now.free_gpus * step
    return (free_s / waited if waited > 0 else 0.0), waited


def largest_gang(cluster: ClusterSpec) -> dict[str, int]:
    """largest_gang is, per GPU type, the most GPUs of one gang of equal workers under one top-level switch."""
    tree = cluster.switch_tree()
    sizes: dict[tuple[str, str], dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for group in cluster.node_groups:
        if not group.gpus:
            continue
        for index in range(group.count):
            top = _top(group.switch_of(index) or "", tree)
            sizes[(group.gpu_type or "untyped", top)][group.gpus] += 1
    best: dict[str, int] = {}
    for (gpu_type, _), counts in sizes.items():
        # workers of g GPUs each: a node of n GPUs holds n // g of them
        most = max(g * sum(count * (gpus // g) for gpus, count in counts.items()) for g in range(1, max(counts) + 1))
        best[gpu_type] = max(best.get(gpu_type, 0), most)
    return dict(sorted(best.items()))


def _top(switch: str, tree: dict[str, str]) -> str:
    """_top follows a switch's parents to the top of its tree (a loop in the tree stops where it closes)."""
    seen = {switch}
    while switch in tree and tree[switch] not in seen:
        switch = tree[switch]
        seen.add(switch)
    return switch


def _span(jobs: Sequence[SimJob]) -> float:
    """_span is first eligible → last end of the placed jobs (seconds)."""
    if not jobs:
        return 0.0
    return max(job.end_time or job.submit for job in jobs) - min(job.submit for job in jobs)


def _utilization(placed: Sequence[tuple[HistoryRow, SimJob]], capacity: int, span: float) -> float:
    """_utilization is the placed rows' GPU-seconds over capacity × span (calibrate's simulated side)."""
    if not capacity or span <= 0:
        return 0.0
    return sum(row.duration_s * row.num_gpus for row, _ in placed) / (capacity * span)


def change(today: float, other: float) -> dict[str, float | None]:
    """change is ``other − today`` and its ratio to today (None when today is 0)."""
    return {"change": round(other - today, 4), "relative": None if today == 0 else round((other - today) / today, 4)}


def delta(today: Figures, other: Figures) -> dict[str, Any]:
    """delta is every figure of ``other`` against today's (tenants on one side only get None)."""
    tenants: dict[str, Any] = {}
    for tenant in sorted(set(today.tenants) | set(other.tenants)):
        before, after = today.tenants.get(tenant), other.tenants.get(tenant)
        tenants[tenant] = None if before is None or after is None else {
            "mean_queue_s": change(before.mean, after.mean), "p95_queue_s": change(before.p95, after.p95)}
    gangs = sorted(set(today.largest_gang) | set(other.largest_gang))
    return {
        "tenants": tenants,
        "overall": {"mean_queue_s": change(today.overall.mean, other.overall.mean),
                    "p95_queue_s": change(today.overall.p95, other.overall.p95)},
        "gpu_utilization": change(today.utilization, other.utilization),
        "stranded_gpus": change(today.stranded_gpus, other.stranded_gpus),
        "capacity_gpus": change(today.capacity_gpus, other.capacity_gpus),
        "largest_gang_gpus": {t: other.largest_gang.get(t, 0) - today.largest_gang.get(t, 0) for t in gangs},
    }
