"""evict_from_unusable_nodes: whole attempts on drained or down nodes are stopped and the node avoided."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import update

from meta.cycle.health import evict_from_unusable_nodes, unusable_nodes
from meta.cycle.lease import LEASE_NAME, NotLeader, try_acquire
from meta.model.durations import utcnow
from meta.model.states import AttemptState, TaskState
from meta.service.api import Service
from meta.store.models import LeaderLease, Task
from tests.runtime.support import attempt, checkpointing, lead, node_state, place, share, submit, task

NODES = [node_state("node1"), node_state("node2", drained=True), node_state("node3", healthy=False), node_state("node4")]


def test_unusable_nodes_are_drained_or_unhealthy() -> None:
    assert unusable_nodes(NODES) == {"node2", "node3"}


def test_attempt_on_a_drained_node_is_stopped_and_the_node_avoided(service: Service) -> None:
    db = service.db
    leadership = lead(db)
    _, (t,) = submit(service, checkpointing(workers=2))
    victim = place(db, t, [share("node1"), share("node2")], AttemptState.RUNNING)
    _, (ok,) = submit(service, checkpointing("healthy"))
    healthy = place(db, ok, [share("node1")], AttemptState.RUNNING)
    with db.session() as session:
        evicted = evict_from_unusable_nodes(session, leadership, NODES)
    assert evicted == [victim]
    row = attempt(db, victim)
    assert row.state == AttemptState.STOPPING.value and row.stop_reason == "preempt"
    assert task(db, t).avoid_nodes == ["node2"]  # only the bad node, not the whole gang's nodes
    assert task(db, t).state == TaskState.RUNNING.value  # until Slurm confirms the end
    assert attempt(db, healthy).state == AttemptState.RUNNING.value
    assert task(db, ok).avoid_nodes == []


def test_launching_attempt_on_a_down_node_is_evicted_and_avoid_list_merges(service: Service) -> None:
    db = service.db
    leadership = lead(db)
    _, (t,) = submit(service, checkpointing("launching"))
    with db.session() as session:
        session.get(Task, t).avoid_nodes = ["node9"]
    victim = place(db, t, [share("node3")], AttemptState.LAUNCHING)
    with db.session() as session:
        assert evict_from_unusable_nodes(session, leadership, NODES) == [victim]
    assert task(db, t).avoid_nodes == ["node3", "node9"]
    with db.session() as session:  # already stopping: not evicted twice
        assert evict_from_unusable_nodes(session, leadership, NODES) == []


def test_nothing_happens_when_every_node_is_usable(service: Service) -> None:
    db = service.db
    leadership = lead(db)
    _, (t,) = submit(service, checkpointing())
    running = place(db, t, [share("node1")], AttemptState.RUNNING)
    with db.session() as session:
        assert evict_from_unusable_nodes(session, leadership, [node_state("node1"), node_state("node4")]) == []
    assert attempt(db, running).state == AttemptState.RUNNING.value


def test_a_stale_leader_evicts_nothing(service: Service) -> None:
    db = service.db
    old = lead(db, "old")
    with db.session() as session:
        session.execute(
            update(LeaderLease).where(LeaderLease.name == LEASE_NAME).values(expires_at=utcnow() - timedelta(seconds=1))
        )
    assert try_acquire(db, "new", 60) is not None
    _, (t,) = submit(service, checkpointing())
    running = place(db, t, [share("node2")], AttemptState.RUNNING)
    with pytest.raises(NotLeader), db.session() as session:
        evict_from_unusable_nodes(session, old, NODES)
    assert attempt(db, running).state == AttemptState.RUNNING.value
    assert task(db, t).avoid_nodes == []
