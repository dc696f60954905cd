"""Cycle step 6, health: evict whole attempts from nodes that were drained or went down.

A gang is all-or-nothing: if one of its nodes is drained or lost, the whole attempt is stopped
like a preemption (USR1, checkpoint grace, cancel) and its task is retried elsewhere from its
latest checkpoint — never half a gang left running. The bad node is added to the task's
avoid list so the next attempt does not land there.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from meta.cycle.lease import Leadership, fence
from meta.model.nodes import NodeState
from meta.model.states import AttemptState
from meta.store import audit
from meta.store.lifecycle import attempt_event
from meta.store.models import Attempt, Task

_EVICTABLE = [AttemptState.RUNNING.value, AttemptState.LAUNCHING.value]


def unusable_nodes(nodes: Sequence[NodeState]) -> set[str]:
    """unusable_nodes are nodes that may not keep running work: drained, down or not responding."""
    return {node.name for node in nodes if not node.schedulable()}


class NodeWatch:
    """NodeWatch confirms bad nodes: a drain at once, an unhealthy node only once it stayed so for a grace.

    Right after slurmctld restarts, every node reports ``unknown`` until its slurmd registers
    again (seconds); a node may also miss a ping now and then. Evicting on one such sample
    would stop healthy work on a Slurm blip. A drain is an operator's decision and counts at
    once; a node that is really gone stays unhealthy past the grace (and Slurm itself fails
    its jobs with NODE_FAIL when it declares the node down).
    """

    def __init__(self, grace_s: float = 60.0):
        self.grace_s = grace_s
        self._bad_since: dict[str, float] = {}

    def confirmed(self, nodes: Sequence[NodeState], now: float) -> set[str]:
        """confirmed are the nodes to evict from as of ``now`` (a monotonic clock)."""
        bad = set()
        for node in nodes:
            if node.drained:
                bad.add(node.name)
            if node.healthy:
                self._bad_since.pop(node.name, None)
                continue
            since = self._bad_since.setdefault(node.name, now)
            if now - since >= self.grace_s:
                bad.add(node.name)
        return bad


def evict_from_unusable_nodes(
    session: Session, leadership: Leadership, nodes: Sequence[NodeState], bad: set[str] | None = None
) -> list[str]:
    """evict_from_unusable_nodes marks every live attempt touching a bad node (default: any unusable one) for stopping."""
    bad = unusable_nodes(nodes) if bad is None else bad
    if not bad:
        return []
    fence(session, leadership)
    evicted = []
    for attempt in session.scalars(select(Attempt).where(Attempt.state.in_(_EVICTABLE))):
        hit = sorted(bad & set(attempt.nodes()))
        if not hit:
            continue
        task = session.get(Task, attempt.task_id)
        assert task is not None
        task.avoid_nodes = sorted(set(task.avoid_nodes or ()) | set(hit))
        attempt_event(
            session,
            attempt.id,
            AttemptState.STOPPING,
            f"evict:{attempt.id}:{','.join(hit)}",
            reason=f"node {','.join(hit)} drained or down: stopping the whole attempt",
            actor="health",
            values={"stop_reason": "preempt"},
        )
        audit.record(session, "health", "evict", attempt.id, nodes=hit, reason="node drained or down")
        evicted.append(attempt.id)
    return evicted
