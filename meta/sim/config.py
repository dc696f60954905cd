"""SimConfig: the knobs of one simulation run that are not the trace, the cluster or the policy."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from meta.config.period import DEFAULT_IDLE_CYCLE_S, DEFAULT_PERIOD_S
from meta.model.kinds import JobKind, Topology
from meta.policy.admission import SubmitLimits
from meta.sim.outages import Outage

# Time-limit buckets (s) a user would pick with ``sbatch --time``: 30 min … 30 days.
TIME_LIMIT_BUCKETS_S = (
    1800, 3600, 2 * 3600, 4 * 3600, 8 * 3600, 12 * 3600, 86400, 2 * 86400, 3 * 86400,
    7 * 86400, 14 * 86400, 30 * 86400,
)


@dataclass(frozen=True, slots=True)
class SimConfig:
    """SimConfig holds checkpointing, estimates, cycle batching, warm-up and fair-share decay."""

    checkpoint_interval_s: float = 3600.0  # training jobs checkpoint every hour of run time
    restore_cost_s: float = 300.0  # time to reload a checkpoint on restart (no progress)
    checkpoint_kinds: frozenset[JobKind] = frozenset({JobKind.TRAINING})
    preemptible_kinds: frozenset[JobKind] = frozenset({JobKind.TRAINING, JobKind.EVALUATION})
    # "bucket": duration rounded up to a time-limit bucket; "noise": × factor; "limit": the trace's
    # time limit (what the daemon believes), "bucket" for a job without one
    estimate: str = "bucket"
    noise_factor: float = 2.0  # used by estimate="noise"
    # the daemon's period: arrivals and completions are decided at the next tick (0 = at once)
    cycle_interval_s: float = DEFAULT_PERIOD_S
    # with work waiting, a cycle at least this often even when nothing happens (0 = never)
    idle_cycle_s: float = DEFAULT_IDLE_CYCLE_S
    warmup_hours: float | None = None  # None = the cluster preset's default
    # the baselines' fair-share half-life (Slurm's PriorityDecayHalfLife default); metasched's usage
    # decays with its SchedulerConfig's usage_half_life_s, as in the daemon
    usage_half_life_s: float = 7 * 86400.0
    gang_topology: Topology = Topology.PREFER_SAME_SWITCH
    priority_class: str = ""  # "" = the job kind names the class (training, inference, …)
    tenant_weights: dict[str, float] = field(default_factory=dict)  # overrides the preset's
    # Guaranteed quota per tenant = this fraction of the cluster's GPUs split by tenant weight
    # (Philly's VC quotas); 0 = no guarantees. Only presets with tenant weights get any.
    # The baselines ignore guarantees (they never preempt); metasched may reclaim them.
    guarantee_fraction: float = 1.0
    # A fresh attempt may not be preempted before this much run time (Reservation.min_runtime_s),
    # so reclaimed capacity is not bounced between tenants cycle after cycle.
    min_runtime_s: float = 0.0
    # A preempted attempt keeps its capacity this long (checkpoint signal → exit) as a stopping
    # reservation; 0 = it vanishes at once.
    preemption_grace_s: float = 0.0
    strict: bool = True  # an invalid placement raises instead of being dropped and counted
    max_cycles_per_instant: int = 3  # re-run the policy after preemptions, at most this often
    # the API's submit limits per tenant (meta.policy.admission; issue 16); empty = none
    submit_limits: dict[str, SubmitLimits] = field(default_factory=dict)
    submit_retry_s: float = DEFAULT_PERIOD_S  # a client refused for its pending jobs tries again after this
    # judge after every decision why each waiting job waits (shortage, fragmentation, policy: issue 23);
    # off by default: it costs time and the decisions are the same either way
    waiting_causes: bool = False
    # the launch through Slurm: a job decided at t holds its resources from t and starts running at
    # t + launch_delay_s (its queue delay ends there, as a recorded one ends at Slurm's RUNNING); 0 = at once
    launch_delay_s: float = 0.0
    # clusters dark for a while (issue 26): no new placements there, running work runs on; () = none
    outages: tuple[Outage, ...] = ()

    def __post_init__(self) -> None:
        if not (math.isfinite(self.launch_delay_s) and self.launch_delay_s >= 0):
            raise ValueError(f"launch_delay_s must be a finite number of seconds ≥ 0, not {self.launch_delay_s!r}")


def runtime_estimate(duration_s: float, config: SimConfig, time_limit_s: float | None = None) -> float:
    """runtime_estimate is what both policies believe a job will run (always ≥ the real duration)."""
    if config.estimate == "limit" and time_limit_s is not None:
        # a task's attempts together may have run past one attempt's limit: never below the duration
        return max(time_limit_s, duration_s)
    if config.estimate == "noise":
        return max(duration_s * config.noise_factor, 60.0)
    for bucket in TIME_LIMIT_BUCKETS_S:
        if duration_s <= bucket:
            return float(bucket)
    month = TIME_LIMIT_BUCKETS_S[-1]
    return float(-(-duration_s // month) * month)
