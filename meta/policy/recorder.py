"""The decision recorder: what schedule() writes down while it decides, when asked to (``record=k``).

It reads the order trace for the winner's key and its rivals, remembers the last ``k`` tasks
that were ahead in line but did not fit (a backfilled placement went past them), and the first
``k`` tasks each hold kept waiting. Everything is bounded by ``k`` per decision, so a cycle
with 10,000 waiting tasks costs a tuple per waiting task and a few keys per decision.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from meta.policy.config import SchedulerConfig
from meta.policy.decisions import (
    CLASS,
    HOLD,
    PLACE,
    PREEMPT,
    Alternative,
    CycleContext,
    Decision,
    OrderKey,
    key_for,
    knobs_of,
    why_won,
)
from meta.policy.explain import job_label
from meta.policy.fairshare import FairShare
from meta.policy.ordering import OrderTrace
from meta.policy.plan import HeldReservation, PendingReason, Placement, Preemption, ReasonCode
from meta.policy.quota import QuotaLedger
from meta.policy.snapshot import PendingTask, Snapshot


class Recorder:
    """Recorder collects one cycle's Decisions and its CycleContext."""

    def __init__(self, k: int, snapshot: Snapshot, config: SchedulerConfig, fair: FairShare,
                 quota: QuotaLedger) -> None:
        self.k, self.cfg, self.now, self.fair = k, config, snapshot.now, fair
        self.trace = OrderTrace()
        self.usage = {t.name: t.decayed_usage for t in snapshot.tenants}
        # the last k tasks that did not fit, in a ring of k slots per field (no object per waiting
        # task: at 10,000 waiting tasks a tuple each made the garbage collector run more often);
        # their keys are built only if a decision lists them
        self._ring: list[list[Any]] = [[None] * k for _ in range(5)]  # task, tier, position, guaranteed, code
        self._filled = 0
        self.decisions: list[Decision] = []
        self.blocked: dict[str, list[Alternative]] = {}  # held job -> tasks its hold kept waiting
        # consecutive placements mostly go past the same few tasks: each is described once per cycle
        self._ahead_alt: dict[str, Alternative] = {}
        self._rival_keys: dict[tuple[str, float], OrderKey] = {}
        self.context = self._context(snapshot, quota)

    def _context(self, snapshot: Snapshot, quota: QuotaLedger) -> CycleContext:
        """_context is every tenant's share, usage, weight and guarantee room at cycle start."""
        names = {t.name for t in snapshot.tenants} | {t.tenant for t in snapshot.pending}
        weights = {t.name: t.weight for t in snapshot.tenants}
        tenants = {}
        for name in sorted(names):
            used = quota.used.get(name, {})
            room = {key: amount - used.get(key, 0) for key, amount in (quota.guaranteed.get(name) or {}).items()}
            tenants[name] = {"share": round(self.fair.share(name), 6), "usage": round(self.usage.get(name, 0.0), 1),
                             "weight": weights.get(name, 1.0), "room": room}  # fmt: skip
        return CycleContext(tenants, knobs_of(self.cfg), len(snapshot.pending))

    # --- keys ---------------------------------------------------------------------------------

    def key(self, task: PendingTask, share: float | None = None) -> OrderKey:
        """key is the task's order key now, at its place in the trace (``share``: its tenant's before placing)."""
        tr = self.trace
        return self._key_at(task, tr.tier, tr.position, tr.guaranteed, share)

    def _key_at(self, task: PendingTask, tier: str, position: float, guaranteed: bool | None,
                share: float | None = None) -> OrderKey:
        """_key_at is the task's key with the tier and position the order used (e.g. strict share order)."""
        share = self.fair.share(task.tenant) if share is None else share
        key = key_for(task, self.cfg, self.now, share, self.usage.get(task.tenant, 0.0), guaranteed)
        if key.tier == tier and key.position == position:
            return key
        return OrderKey(tier, key.priority_class, key.rank, guaranteed, position, key.submit_key, share, key.usage,
                        key.age_s, key.slack_s)  # fmt: skip

    def _rival_key(self, task: PendingTask, share: float | None) -> OrderKey:
        """_rival_key is a rival's key in the same line, with its tenant's share now (or ``share``)."""
        share = self.fair.share(task.tenant) if share is None else share
        memo = (task.task_id, share)
        key = self._rival_keys.get(memo)
        if key is None:
            key = self._rival_keys[memo] = key_for(task, self.cfg, self.now, share, self.usage.get(task.tenant, 0.0),
                                                   self.trace.guaranteed)  # fmt: skip
        return key

    def _ahead(self, task: PendingTask, tier: str, position: float, guaranteed: bool | None,
               code: ReasonCode) -> Alternative:
        """_ahead describes a task ahead in line that did not fit (once per cycle: its key at first use)."""
        alt = self._ahead_alt.get(task.task_id)
        if alt is None:
            alt = self._ahead_alt[task.task_id] = Alternative(
                task.task_id, task.job_id, job_label(task), task.tenant, self._key_at(task, tier, position, guaranteed),
                f"ahead in line but did not fit: {code.value}")  # fmt: skip
        return alt

    def _alternatives(self, task: PendingTask, key: OrderKey) -> tuple[Alternative, ...]:
        """_alternatives are the tasks ahead that did not fit, then the rivals next in line, k of each."""
        out = [self._ahead(*entry) for entry in self._ahead_entries()]
        # multifactor places: a rival's position is its place in the line, not a key of its own
        slotted = self.trace.lined and key.tier == CLASS
        for j, rival in enumerate(self.trace.rivals(task.tenant, self.k)):
            theirs = self._rival_key(rival, key.share if rival.tenant == task.tenant else None)
            if slotted:
                theirs = replace(theirs, position=key.position + 1 + j)
            out.append(Alternative(rival.task_id, rival.job_id, job_label(rival), rival.tenant, theirs,
                                   f"behind in line: {why_won(key, theirs, self.cfg)}"))  # fmt: skip
        return tuple(out)

    # --- what the scheduler reports -------------------------------------------------------------

    def _ahead_entries(self) -> list[tuple]:
        """_ahead_entries are the ring's entries, oldest first."""
        k, n = self.k, self._filled
        order = range(n) if n <= k else [(n + i) % k for i in range(k)]
        tasks, tiers, positions, groups, codes = self._ring
        return [(tasks[i], tiers[i], positions[i], groups[i], codes[i]) for i in order]

    @property
    def waits(self) -> int:
        """waits is how many waiting tasks the record has been told of so far."""
        return self._filled

    def waited(self, task: PendingTask, reason: PendingReason) -> None:
        """waited notes a task that stays waiting for capacity (a later placement may go past it)."""
        tr = self.trace
        at = self._filled % self.k
        self._filled += 1
        ring = self._ring
        ring[0][at] = task
        ring[1][at] = tr.tier
        ring[2][at] = tr.position
        ring[3][at] = tr.guaranteed
        ring[4][at] = reason.code
        if reason.blocking_job is not None and reason.code is ReasonCode.BLOCKED_BY_RESERVATION:
            kept = self.blocked.setdefault(reason.blocking_job, [])
            if len(kept) < self.k:
                kept.append(Alternative(task.task_id, task.job_id, job_label(task), task.tenant, self.key(task),
                                        "would fit only on the held nodes and would delay the holder"))  # fmt: skip

    def placed(self, task: PendingTask, placement: Placement, share: float) -> None:
        """placed records a placement: the winner's key (at ``share``, before it placed) and who it went before."""
        key = self.key(task, share)
        nodes = sorted({s.node for s in placement.shares})
        reason = placement.reason or "first in line that fit the free capacity"
        self.decisions.append(Decision(PLACE, task.task_id, task.job_id, job_label(task), task.tenant, key, reason,
                                       self._alternatives(task, key),
                                       {"nodes": nodes, "backfilled": placement.backfilled}))  # fmt: skip

    def preempted(self, task: PendingTask, evicted: Iterable[tuple[Preemption, str, str]]) -> None:
        """preempted records one decision per victim (job id, tenant) evicted for ``task``."""
        key = self.key(task)
        alternatives = self._alternatives(task, key)
        for p, victim_job, victim_tenant in evicted:
            detail = {"victim_attempt": p.attempt_id, "victim_task": p.task_id, "victim_tenant": victim_tenant,
                      "lost_gpu_seconds": round(p.lost_gpu_seconds, 1)}  # fmt: skip
            self.decisions.append(Decision(PREEMPT, task.task_id, task.job_id, job_label(task), task.tenant, key,
                                           p.reason, alternatives, detail, other_job=victim_job))  # fmt: skip

    def held(self, task: PendingTask, hold: HeldReservation | None, nodes: list[str], reason: PendingReason) -> None:
        """held records nodes kept for ``task`` (a held start, or kept from other gangs when no start is known)."""
        key = self.key(task)
        detail = {"nodes": nodes[:16], "node_count": len(nodes),
                  "planned_start": hold.planned_start if hold else None, "kept_from_gangs": hold is None}  # fmt: skip
        self.decisions.append(Decision(HOLD, task.task_id, task.job_id, job_label(task), task.tenant, key,
                                       reason.message, self._alternatives(task, key), detail))  # fmt: skip

    def finish(self) -> list[Decision]:
        """finish attaches to each hold (and preemption) the tasks it kept waiting, and returns the decisions."""
        if not self.blocked:
            return self.decisions
        out = []
        for d in self.decisions:
            kept = self.blocked.get(d.job_id)
            if kept and d.kind in (HOLD, PREEMPT):
                d = Decision(d.kind, d.task_id, d.job_id, d.label, d.tenant, d.key, d.reason,
                             d.alternatives + tuple(kept), d.detail, d.other_job)  # fmt: skip
            out.append(d)
        return out
