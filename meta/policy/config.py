"""Scheduler configuration: every knob of the allocation policy, with production defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from meta.model.kinds import JobKind

DEFAULT_GPU_COST_WEIGHTS: Mapping[str, float] = {"h100": 3.0, "a100": 2.0, "t4": 0.5}
DEFAULT_PRIORITY_CLASSES: Mapping[str, int] = {
    "inference-deadline": 300,
    "training": 200,
    "inference": 100,
    "evaluation": 0,
}


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """SchedulerConfig holds the policy knobs; the defaults are the shipped policy.

    ``metasched serve`` without a policy file, the simulator and the benchmarks all run these
    defaults; the knobs marked *tuned* were chosen by ``benchmarks/tune_policy.py``
    (leave-one-week-out over four Philly weeks × three loads; procedure and figures in docs/benchmarks.md).
    """

    # Fair share: a GPU-second of an H100 costs more than one of a T4.
    gpu_cost_weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_GPU_COST_WEIGHTS))
    default_gpu_cost_weight: float = 1.0
    # Decayed usage is normalised by what the whole cluster would accrue over one half-life window.
    usage_half_life_s: float = 7 * 24 * 3600.0
    usage_share_weight: float = 1.0
    current_share_weight: float = 1.0
    # Priority classes, higher rank first; unknown names fall back to the job kind's class.
    priority_classes: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_PRIORITY_CLASSES))
    # Aging (tuned): a task waiting longer than this outranks the fair-share order (bounded waiting).
    # 24 h: shorter bounds let aged tasks of an over-share tenant take capacity just reclaimed for
    # another tenant, and they become the cheapest victims of the next cycle (a preemption storm).
    max_wait_s: float = 24 * 3600.0
    # Deadlines: once slack (deadline - now - runtime) drops below this, the task is urgent.
    deadline_urgency_s: float = 3600.0
    # Within one tenant and class: order by submit time + weight x runtime estimate (0 = FIFO).
    short_job_weight: float = 10.0
    # ... where the runtime estimate is first multiplied by GPUs ** this (1 = smallest GPU-time first).
    short_job_gpu_exponent: float = 0.0
    # ... and the length penalty (weight x size) is capped at this many seconds (None = uncapped).
    # Why: uncapped, a long job goes back behind every shorter job submitted in the next
    # weight x runtime seconds (10 x a 9-minute limit = 90 min), so a tenant whose work is long
    # waits many times what Slurm would give it. Capped, a job is never passed by work in its
    # line submitted more than this long after it: a bound an admin can state to a user.
    short_job_max_penalty_s: float | None = None
    # Share horizon (tuned). None = strict share order (the lowest share always goes next). A number merges tenants'
    # tasks by the key above, each pushed back by this many seconds per unit of its tenant's
    # weighted share: over-share tenants wait longer, yet their short jobs can pass long ones.
    # Tasks inside their tenant's guarantee keep strict share order; the horizon orders
    # borrowers, i.e. capacity nobody is entitled to. 0 = borrowers purely shortest-first, sound
    # where guarantees carry fairness (with no guarantees set, everyone is a borrower).
    fair_share_horizon_s: float | None = 0.0
    # Tasks inside their tenant's guarantee go before borrowers either way. True: among them
    # tenants take strict turns by share; False (tuned): they merge by the horizon above, like
    # borrowers (the guarantee buys a place ahead of borrowers and the right to reclaim, not a turn).
    guaranteed_in_share_order: bool = False
    # Who gets each place in line between tenants. "turns": the knobs above (share turns or the
    # horizon merge). "multifactor": slot-preserving tenant order, i.e. Slurm's multifactor priority
    # (fair share 2^(-U/S), age, size; meta/policy/slurmlike.py) decides which tenant each place
    # goes to, and the tenant fills its places with its own tasks by the key above (shortest-first):
    # a tenant gets the places plain Slurm would give it, and only its own work can take them.
    tenant_order: Literal["turns", "multifactor"] = "turns"
    # On a site of several Slurm clusters, where a tenant's limits hold. "cluster": on each cluster,
    # as Slurm enforces an association's GrpTRES (a tenant limited to 40 GPUs may run 40 on each);
    # "site": once over all clusters together. One cluster: the same either way.
    limit_scope: Literal["cluster", "site"] = "cluster"
    # Backfill: how many head-of-line tasks get nodes held for their earliest start.
    max_held_reservations: int = 1
    # Only tasks that small jobs could starve get held nodes: gangs, tasks of at least this many
    # GPUs, and aged tasks. Small tasks fit into any gap and are better left to backfill.
    hold_min_gpus: int = 8
    # Preemption.
    preemption_enabled: bool = True
    max_preemption_attempts: int = 2  # per cycle: each costs a pass over running work
    max_victims_considered: int = 64
    # Tuned: a tenant with any guarantee left may reclaim (and go before borrowers) for a whole task that
    # takes it past its guarantee: a 52-GPU guarantee otherwise never covers a seventh 8-GPU job.
    guarantee_rounds_up_to_task: bool = True
    # Reclaiming a guarantee preempts only when running work would not free room within this
    # long anyway (0 = preempt at once): a victim's lost work and requeue buy little otherwise.
    reclaim_patience_s: float = 0.0
    # Issue 21: a reclaim takes only from borrowers whose fair share is at least the reclaiming
    # tenant's (False: from any borrower). A light tenant's borrowed work is then never evicted so
    # that a heavier tenant gets its guarantee back; it waits for running work to end instead.
    reclaim_spares_lighter: bool = False
    # Issue 21: which borrowers' work a reclaim takes first. "least_lost": the least lost work,
    # whoever's (small long jobs are then the favourite victims, again and again); "heaviest":
    # the borrowing tenant with the largest fair share first (as Kueue reclaims from the cluster
    # queue borrowing most), least lost work within it. Priority-class and deadline evictions
    # always take the least lost work.
    reclaim_victims: Literal["least_lost", "heaviest"] = "least_lost"
    # A job whose dependency can never be satisfied (afterok on a job that failed, ...) is cancelled
    # when it did not say --kill-on-invalid-dep itself: Slurm's SchedulerParameters=kill_invalid_depend.
    # Off by default, as in Slurm: the job waits with reason DependencyNeverSatisfied.
    kill_invalid_depend: bool = False

    def gpu_cost(self, gpu_type: str | None) -> float:
        """gpu_cost is the fair-share weight of one GPU of ``gpu_type``."""
        if gpu_type is None:
            return self.default_gpu_cost_weight
        return self.gpu_cost_weights.get(gpu_type, self.default_gpu_cost_weight)

    def class_name(self, priority_class: str, kind: JobKind, deadline: float | None) -> str:
        """class_name resolves a task's effective priority class (inference with a deadline is its own)."""
        name = priority_class or kind.value
        if name not in self.priority_classes:
            name = kind.value
        if name == JobKind.INFERENCE.value and deadline is not None:
            return "inference-deadline"
        return name

    def rank(self, priority_class: str, kind: JobKind, deadline: float | None) -> int:
        """rank is the numeric priority of a class (higher runs first and may preempt lower)."""
        return self.priority_classes.get(self.class_name(priority_class, kind, deadline), 0)
