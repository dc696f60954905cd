"""Decisions on record: the inputs that decided each placement, preemption and hold, as data.

``schedule(..., record=k)`` adds to its Plan one Decision per placement, preempted victim and
held reservation: the winner's order key (the components the policy sorted by), its tenant's
share and usage, its age and deadline slack, and up to ``k`` alternatives it beat with their
keys and why they lost, plus one CycleContext (every tenant's share at cycle start and the
ordering knobs) from which ``key_for`` rebuilds any waiting task's key later. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from meta.policy.config import SchedulerConfig
from meta.policy.ordering import slack, submit_key
from meta.policy.snapshot import PendingTask

PLACE, PREEMPT, HOLD = "place", "preempt", "hold"
AGED, URGENT, CLASS = "aged", "urgent", "class"
_TIERS = {AGED: 0, URGENT: 1, CLASS: 2}
# the knobs a key depends on: kept with each cycle so a waiting task's key can be rebuilt later
ORDER_KNOBS = ("max_wait_s", "deadline_urgency_s", "short_job_weight", "short_job_gpu_exponent",
               "short_job_max_penalty_s", "fair_share_horizon_s", "priority_classes", "tenant_order")  # fmt: skip


@dataclass(frozen=True, slots=True)
class OrderKey:
    """OrderKey is where a task stood in the cycle's order and the inputs that put it there."""

    tier: str  # aged (past the aging bound), urgent (deadline slack ran out) or class
    priority_class: str
    rank: int
    guaranteed: bool | None  # inside its tenant's guarantee (goes before borrowers); None: no guarantees set
    position: float  # aged: submit time; urgent: slack; class: share, submit key + horizon x share, or slot
    submit_key: float  # inside one tenant: submit time + short-job weight x size
    share: float  # the tenant's weighted dominant share when the task's turn came
    usage: float  # the tenant's decayed usage (cost-weighted GPU-seconds)
    age_s: float
    slack_s: float | None

    def order(self) -> tuple:
        """order is the key as a tuple: a smaller tuple goes first."""
        return (self.guaranteed is False, _TIERS[self.tier], -self.rank if self.tier == CLASS else 0, self.position,
                self.submit_key)  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        """to_json is the key as stored: floats rounded, names short."""
        return {"tier": self.tier, "class": self.priority_class, "rank": self.rank, "guaranteed": self.guaranteed,
                "position": round(self.position, 6), "submit_key": round(self.submit_key, 3),
                "share": round(self.share, 4), "usage": round(self.usage, 1), "age_s": round(self.age_s, 1),
                "slack_s": None if self.slack_s is None else round(self.slack_s, 1)}  # fmt: skip

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OrderKey:
        """from_json reads a stored key back."""
        return cls(data["tier"], data["class"], int(data["rank"]), data.get("guaranteed"), float(data["position"]),
                   float(data["submit_key"]), float(data["share"]), float(data["usage"]), float(data["age_s"]),
                   data.get("slack_s"))  # fmt: skip


@dataclass(frozen=True, slots=True)
class Alternative:
    """Alternative is a waiting task the decision went past, with its key and why it lost."""

    task_id: str
    job_id: str
    label: str  # the id users see
    tenant: str
    key: OrderKey
    lost: str


@dataclass(frozen=True, slots=True)
class Decision:
    """Decision is one placement, preemption (one victim) or hold, with the inputs that decided it."""

    kind: str  # place, preempt or hold
    task_id: str  # the task placed, the beneficiary of a preemption, or the task nodes are held for
    job_id: str
    label: str
    tenant: str
    key: OrderKey
    reason: str
    alternatives: tuple[Alternative, ...] = ()
    detail: dict[str, Any] = field(default_factory=dict)  # nodes, backfilled, victim, planned start...
    other_job: str | None = None  # preempt: the victim's job


@dataclass(frozen=True, slots=True)
class CycleContext:
    """CycleContext is what any waiting task's key needs besides the task: shares and ordering knobs."""

    tenants: dict[str, dict[str, Any]]  # name -> share, usage, weight, guarantee room by GPU type
    knobs: dict[str, Any]
    pending: int

    def config(self) -> SchedulerConfig:
        """config is a SchedulerConfig with the recorded ordering knobs (other knobs at their defaults)."""
        names = {f.name for f in fields(SchedulerConfig)}
        return SchedulerConfig(**{k: v for k, v in self.knobs.items() if k in names})

    def to_json(self) -> dict[str, Any]:
        """to_json is the context as stored."""
        return {"tenants": self.tenants, "knobs": self.knobs, "pending": self.pending}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CycleContext:
        """from_json reads a stored context back."""
        return cls(dict(data.get("tenants", {})), dict(data.get("knobs", {})), int(data.get("pending", 0)))


def knobs_of(config: SchedulerConfig) -> dict[str, Any]:
    """knobs_of is the part of a config that orders tasks (JSON-ready)."""
    return {name: (dict(v) if isinstance(v := getattr(config, name), dict) else v) for name in ORDER_KNOBS}


def key_for(task: PendingTask, config: SchedulerConfig, now: float, share: float, usage: float,
            guaranteed: bool | None) -> OrderKey:
    """key_for is a task's order key given its tenant's share and usage at that moment."""
    age = now - task.submit_time
    left = slack(task, now)
    own = submit_key(task, config)
    name = config.class_name(task.priority_class, task.kind, task.deadline)
    rank = config.rank(task.priority_class, task.kind, task.deadline)
    if age >= config.max_wait_s:
        tier, position = AGED, task.submit_time
    elif left is not None and left <= config.deadline_urgency_s:
        tier, position = URGENT, left
    else:
        horizon = config.fair_share_horizon_s
        tier, position = CLASS, (share if horizon is None else own + horizon * share)
    return OrderKey(tier, name, rank, guaranteed, position, own, share, usage, age, left)


def why_won(winner: OrderKey, loser: OrderKey, config: SchedulerConfig | None = None) -> str:
    """why_won says in words why ``winner`` went before ``loser`` (or that it went past by backfill)."""
    if winner.order() > loser.order():
        return "backfilled: it came later in line, but the one ahead did not fit the free capacity and this did"
    if winner.guaranteed is not loser.guaranteed and winner.guaranteed:
        return "inside its tenant's guarantee: guaranteed work goes before borrowing"
    if winner.tier != loser.tier:
        if winner.tier == AGED:
            return f"it had waited past the aging bound ({winner.age_s / 3600:.1f} h): aged work goes first"
        return f"its deadline slack ran out ({_s(winner.slack_s)} left): urgent deadlines go before the classes"
    if winner.tier == AGED:
        return f"both aged: it was submitted earlier ({_s(winner.age_s)} vs {_s(loser.age_s)} ago)"
    if winner.tier == URGENT:
        return f"both urgent: it had less deadline slack ({_s(winner.slack_s)} vs {_s(loser.slack_s)})"
    if winner.rank != loser.rank:
        return (f"higher priority class: {winner.priority_class} ({winner.rank}) vs "
                f"{loser.priority_class} ({loser.rank})")
    if config is not None and config.tenant_order == "multifactor":
        return (f"earlier place in Slurm's multifactor order (place {winner.position:.0f}): fair share, age and "
                "size give each place to a tenant, and a tenant fills its places with its own jobs, shortest first")
    horizon = config.fair_share_horizon_s if config else 0.0
    if horizon is None and winner.share != loser.share:
        return f"lower fair share: {winner.share:.3f} vs {loser.share:.3f}"
    # Strict share order with equal shares: the tenants' heads meet by their submit keys.
    ahead = loser.position - winner.position if horizon is not None else loser.submit_key - winner.submit_key
    if ahead >= 1.0:
        weight = config.short_job_weight if config else 10.0
        cap = config.short_job_max_penalty_s if config else None
        length = f"{weight:g} x runtime" if cap is None else f"min({weight:g} x runtime, {_s(cap)})"
        return (f"earlier in line by {_s(ahead)}: submit time + {length}"
                f"{f' + {horizon:g} s x share' if horizon else ''} (share {winner.share:.3f} vs {loser.share:.3f})")
    return "same place in line: it was submitted first (or its id sorts first)"


def _s(seconds: float | None) -> str:
    """_s renders a duration compactly: 45 s, 12 min, 3.5 h."""
    if seconds is None:
        return "-"
    if abs(seconds) < 120:
        return f"{seconds:.0f} s"
    if abs(seconds) < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
