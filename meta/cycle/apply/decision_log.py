"""Cycle step 11 (apply), decisions on record: the plan's decisions appended to the bounded decision log.

The policy returns, with its plan, each placement's, preemption's and hold's inputs (order key,
share, age, slack, the alternatives it beat and why they lost) and the cycle's context (every
tenant's share at cycle start, the ordering knobs). Here they become rows, written in the apply
step's transaction (one statement per cycle), so the log records exactly what was committed:
a placement the capacity re-check dropped, or a preemption whose victim had already gone, is
left out. Every ``prune_every_s`` the leader deletes rows past the retention in bulk.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from meta.policy.decisions import PLACE, PREEMPT, Alternative, Decision
from meta.policy.plan import Plan
from meta.store import decision_log

CONTEXT = "cycle"  # the kind of the one row per cycle that holds its CycleContext


@dataclass(frozen=True)
class DecisionLogSettings:
    """DecisionLogSettings: whether to record, how many alternatives per decision, and the retention."""

    enabled: bool = True
    alternatives: int = 3  # of each kind (ahead that did not fit, next in line, kept by a hold)
    max_age_s: float | None = 7 * 24 * 3600.0
    max_rows: int | None = 1_000_000
    prune_every_s: float = 60.0


def _alternative(a: Alternative) -> dict[str, Any]:
    return {"task": a.task_id, "job": a.job_id, "label": a.label, "tenant": a.tenant, "key": a.key.to_json(),
            "lost": a.lost}  # fmt: skip


def decision_row(d: Decision) -> dict[str, Any]:
    """decision_row is one Decision as a decision-log row."""
    record = {"key": d.key.to_json(), "reason": d.reason, "label": d.label, "detail": d.detail,
              "alternatives": [_alternative(a) for a in d.alternatives]}  # fmt: skip
    return {"kind": d.kind, "task_id": d.task_id, "job_id": d.job_id, "tenant": d.tenant, "other_job": d.other_job,
            "record": record}  # fmt: skip


def rows_of(plan: Plan, skipped: Collection[str] = (), preempting: Collection[str] | None = None) -> list[dict]:
    """rows_of is the plan's decisions as rows, without placements skipped or preemptions not made."""
    rows = []
    if plan.context is not None:
        rows.append({"kind": CONTEXT, "record": plan.context.to_json()})
    for d in plan.decisions:
        if d.kind == PLACE and d.task_id in skipped:
            continue
        if d.kind == PREEMPT and preempting is not None and d.detail.get("victim_attempt") not in preempting:
            continue
        rows.append(decision_row(d))
    return rows


class DecisionLog:
    """DecisionLog writes each cycle's rows and prunes the log now and then (leader only)."""

    def __init__(self, settings: DecisionLogSettings) -> None:
        self.settings = settings
        self._pruned_at: float | None = None
        self.last_rows = 0  # rows written by the last cycle (for benchmarks and logs)

    @property
    def record(self) -> int:
        """record is the ``record`` argument for schedule(): alternatives per kind, 0 when off."""
        return self.settings.alternatives if self.settings.enabled else 0

    def write(self, session: Session, plan: Plan, *, cycle: int, at: datetime, epoch: int,
              skipped: Collection[str], preempting: Collection[str]) -> int:
        """write appends the cycle's rows (in the caller's transaction) and returns how many."""
        if not self.settings.enabled:
            return 0
        self.last_rows = decision_log.append(session, rows_of(plan, skipped, set(preempting)), cycle=cycle, at=at,
                                             epoch=epoch)  # fmt: skip
        return self.last_rows

    def prune(self, session: Session, now: datetime, monotonic: float) -> int:
        """prune deletes rows past the retention, at most once per ``prune_every_s``."""
        s = self.settings
        if self._pruned_at is not None and monotonic - self._pruned_at < s.prune_every_s:
            return 0
        self._pruned_at = monotonic
        return decision_log.prune(session, now, max_age_s=s.max_age_s, max_rows=s.max_rows)
