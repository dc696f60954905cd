"""apply_plan: fenced commit of placements, capacity re-check (I5), typed reasons, preemption victims."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from meta.cycle.apply.transaction import ApplyResult, apply_plan
from meta.cycle.lease import LEASE_NAME, Leadership, NotLeader, try_acquire
from meta.cycle.snapshot.build import share_to_json
from meta.model.durations import utcnow
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.model.states import AttemptState, TaskState
from meta.policy.plan import PendingReason, Placement, Plan, Preemption, ReasonCode
from meta.policy.snapshot import NodeShare
from meta.service.api import Service
from meta.store.db import Database
from meta.store.models import Attempt, CycleRecord, LeaderLease, TaskReason
from tests.runtime.support import (
    attempt,
    attempts_of,
    checkpointing,
    lead,
    node_state,
    place,
    share,
    submit,
    task,
    training,
)

NODES = [node_state("node1"), node_state("node2")]


def _share(node: str, gpus: int = 2) -> NodeShare:
    return NodeShare(node, ResourceVector(cpus=4, memory=16384, gpus=gpus, gpu_type="a100"))


def _apply(db: Database, plan: Plan, leadership: Leadership, nodes: list[NodeState] = NODES, **kw) -> ApplyResult:
    with db.session() as session:
        return apply_plan(session, plan, leadership, nodes, cycle_started=utcnow(), duration_s=0.01, pending_count=1, **kw)


def test_creates_attempts_with_placement_epoch_and_lease(service: Service) -> None:
    db = service.db
    leadership = lead(db)
    job, (t1,) = submit(service, training(workers=2))
    shares = (_share("node1"), _share("node2"))
    before = utcnow()
    result = _apply(db, Plan(placements=[Placement(t1, job, shares)]), leadership, lease_s=120)
    assert len(result.created) == 1 and not result.skipped
    row = attempt(db, result.created[0])
    assert row.state == AttemptState.CREATED.value
    assert row.placement == [share_to_json(s) for s in shares]
    assert row.epoch == leadership.epoch
    assert row.fencing_token == 1 and row.number == 1
    assert row.lease_expires_at is not None
    assert before + timedelta(seconds=100) < row.lease_expires_at <= utcnow() + timedelta(seconds=120)
    assert task(db, t1).state == TaskState.SCHEDULED.value
    with db.session() as session:
        cycle = session.get(CycleRecord, result.cycle_id)
        assert cycle is not None and cycle.placed == 1 and cycle.epoch == leadership.epoch


def test_skips_a_placement_that_exceeds_capacity_given_live_attempts(service: Service) -> None:
    db = service.db
    leadership = lead(db)
    _, (busy,) = submit(service, training("busy"))
    place(db, busy, [share("node1", gpus=6)], AttemptState.RUNNING)
    job, (t1,) = submit(service, training("late"))
    result = _apply(db, Plan(placements=[Placement(t1, job, (_share("node1", gpus=4),))]), leadership)
    assert result.created == []
    assert "capacity" in result.skipped[t1]
    assert attempts_of(db, t1) == []
    assert task(db, t1).state == TaskState.PENDING.value


def test_placements_in_one_plan_are_checked_against_each_other(service: Service) -> None:
    db = service.db
    leadership = lead(db)
    placements = []
    for name in ("a", "b", "c"):
        job, (t,) = submit(service, training(name))
        placements.append(Placement(t, job, (_share("node1", gpus=4),)))
    result = _apply(db, Plan(placements=placements), leadership)
    assert len(result.created) == 2
    assert list(result.skipped) == [placements[2].task_id]


def test_stopping_and_unknown_attempts_still_hold_capacity(service: Service) -> None:
    db = service.db
    leadership = lead(db)
    _, (s,) = submit(service, training("stopping"))
    place(db, s, [share("node1", gpus=4)], AttemptState.STOPPING)
    _, (u,) = submit(service, training("unknown"))
    place(db, u, [share("node1", gpus=4)], AttemptState.LAUNCH_UNKNOWN)
    job, (t1,) = submit(service, training("late"))
    result = _apply(db, Plan(placements=[Placement(t1, job, (_share("node1", gpus=1),))]), leadership)
    assert t1 in result.skipped and result.created == []


def test_ended_attempts_free_their_capacity(service: Service) -> None:
    db = service.db
    leadership = lead(db)
    _, (done,) = submit(service, training("done"))
    place(db, done, [share("node1", gpus=8)], AttemptState.SUCCEEDED)
    job, (t1,) = submit(service, training("next"))
    result = _apply(db, Plan(placements=[Placement(t1, job, (_share("node1", gpus=8),))]), leadership)
    assert len(result.created) == 1


def test_skips_a_placement_on_a_drained_node(service: Service) -> None:
    db = service.db
    leadership = lead(db)
    job, (t1,) = submit(service, training())
    nodes = [node_state("node1", drained=True), node_state("node2")]
    result = _apply(db, Plan(placements=[Placement(t1, job, (_share("node1"),))]), leadership, nodes)
    assert t1 in result.skipped and result.created == []


def test_skips_a_task_that_is_no_longer_pending(service: Service) -> None:
    db = service.db
    leadership = lead(db)
    job, (t1,) = submit(service, training())
    place(db, t1, [share("node2")], AttemptState.RUNNING)  # placed by an earlier cycle
    other, (t2,) = submit(service, training("cancelled"))
    service.cancel(other)
    plan = Plan(placements=[Placement(t1, job, (_share("node1"),)), Placement(t2, other, (_share("node1"),))])
    result = _apply(db, plan, leadership)
    assert result.created == []
    assert result.skipped[t1] == "task is no longer pending"
    assert result.skipped[t2] == "task is no longer pending"
    assert len(attempts_of(db, t1)) == 1 and attempts_of(db, t2) == []


def test_stores_typed_reasons_and_deletes_them_on_placement(service: Service) -> None:
    db = service.db
    leadership = lead(db)
    job, (t1,) = submit(service, training())
    waiting = PendingReason(ReasonCode.WAITING_FOR_QUOTA, "tenant acme at its a100 limit", "wait", None, "acme")
    first = _apply(db, Plan(reasons={t1: waiting}), leadership, job_of_task={t1: job})
    with db.session() as session:
        row = session.get(TaskReason, t1)
        assert row is not None
        assert (row.code, row.job_id, row.cycle) == ("WaitingForQuota", job, first.cycle_id)
        assert row.blocking_tenant == "acme" and row.remedy == "wait"
    second = _apply(db, Plan(reasons={t1: PendingReason(ReasonCode.NO_FEASIBLE_NODE, "full")}), leadership)
    with db.session() as session:
        row = session.get(TaskReason, t1)
        assert row is not None and row.code == "NoFeasibleNode" and row.cycle == second.cycle_id
        assert session.scalar(select(func.count()).select_from(TaskReason)) == 1
    _apply(db, Plan(placements=[Placement(t1, job, (_share("node1"),))]), leadership)
    with db.session() as session:
        assert session.get(TaskReason, t1) is None


def test_marks_running_and_launching_victims_stopping_with_stop_reason_preempt(service: Service) -> None:
    db = service.db
    leadership = lead(db)
    victims = {}
    for state in (AttemptState.RUNNING, AttemptState.LAUNCHING, AttemptState.SUCCEEDED):
        _, (t,) = submit(service, checkpointing(f"v-{state.value}"))
        victims[state] = (t, place(db, t, [share("node1")], state))
    plan = Plan(preemptions=[Preemption(a, t, "for a deadline job", 10.0) for t, a in victims.values()])
    result = _apply(db, plan, leadership)
    expected = [victims[AttemptState.RUNNING][1], victims[AttemptState.LAUNCHING][1]]
    assert sorted(result.preempting) == sorted(expected)
    for attempt_id in expected:
        row = attempt(db, attempt_id)
        assert row.state == AttemptState.STOPPING.value and row.stop_reason == "preempt"
    assert attempt(db, victims[AttemptState.SUCCEEDED][1]).state == AttemptState.SUCCEEDED.value
    with db.session() as session:
        cycle = session.get(CycleRecord, result.cycle_id)
        assert cycle is not None and cycle.preempted == 2


def test_created_victim_is_preempted_directly(service: Service) -> None:
    db = service.db
    leadership = lead(db)
    _, (t,) = submit(service, checkpointing("created-victim"))
    victim = place(db, t, [share("node1")], AttemptState.CREATED)
    result = _apply(db, Plan(preemptions=[Preemption(victim, t, "for a deadline job", 0.0)]), leadership)
    assert result.preempting == [victim]
    row = attempt(db, victim)
    assert row.state == AttemptState.PREEMPTED.value and row.stop_reason == "preempt"
    assert task(db, t).state == TaskState.PENDING.value  # back in the queue at once


def test_stale_leadership_commits_nothing(service: Service) -> None:
    db = service.db
    old = lead(db, "old")
    with db.session() as session:
        session.execute(
            update(LeaderLease).where(LeaderLease.name == LEASE_NAME).values(expires_at=utcnow() - timedelta(seconds=1))
        )
    assert try_acquire(db, "new", 60) is not None
    job, (t1,) = submit(service, training())
    _, (v,) = submit(service, checkpointing("victim"))
    victim = place(db, v, [share("node2")], AttemptState.RUNNING)
    plan = Plan(
        placements=[Placement(t1, job, (_share("node1"),))],
        preemptions=[Preemption(victim, v, "x", 1.0)],
        reasons={v: PendingReason(ReasonCode.LOWER_PRIORITY, "x")},
    )
    with pytest.raises(NotLeader):
        _apply(db, plan, old)
    with db.session() as session:
        assert session.scalar(select(func.count()).select_from(CycleRecord)) == 0
        assert session.scalar(select(func.count()).select_from(TaskReason)) == 0
        assert session.scalar(select(func.count()).select_from(Attempt).where(Attempt.task_id == t1)) == 0
    assert attempt(db, victim).state == AttemptState.RUNNING.value
    assert task(db, t1).state == TaskState.PENDING.value


def _placement_record(db: Database, task_id: str) -> tuple:
    """_placement_record is what placing a task wrote: attempt fields, task fields and its log line."""
    from meta.store.models import Task, Transition

    (row,) = attempts_of(db, task_id)
    with db.session() as session:
        t = session.get(Task, task_id)
        line = session.scalars(
            select(Transition).where(Transition.entity == "task", Transition.entity_id == task_id, Transition.to_state == "scheduled")
        ).one()
        task_fields = (t.state, t.fencing_counter, t.attempts_made, t.reason, t.not_before)
        log = (line.from_state, line.to_state, line.reason, line.actor, line.stimulus_id.split(":")[-1])
    attempt_fields = (row.state, row.number, row.fencing_token, row.epoch, row.placement, row.reason)
    return attempt_fields, task_fields, log


@pytest.mark.parametrize("bulk", [True, False], ids=["bulk", "one-by-one"])
def test_a_burst_of_placements_writes_what_one_at_a_time_writes(
    service: Service, monkeypatch: pytest.MonkeyPatch, bulk: bool
) -> None:
    import meta.cycle.apply.transaction
    from meta.model.errors import ConcurrentModification

    db = service.db
    leadership = lead(db)
    job, (retried,) = submit(service, training("retried"))
    first = place(db, retried, [share("node2")], AttemptState.RUNNING)
    with db.session() as session:  # an earlier attempt was lost: the task is pending again
        from meta.store.lifecycle import attempt_event

        attempt_event(session, first, AttemptState.LOST, "test:lost", actor="test")
    assert task(db, retried).state == TaskState.PENDING.value
    other, (fresh,) = submit(service, training("fresh"))
    if not bulk:  # the bulk step fails (as on a concurrent change): every task is placed on its own
        def refuse(*args, **kwargs):
            raise ConcurrentModification("injected")

        monkeypatch.setattr(meta.cycle.apply.transaction, "create_attempts", refuse)
    plan = Plan(placements=[Placement(retried, job, (_share("node1"),)), Placement(fresh, other, (_share("node2"),))])
    result = _apply(db, plan, leadership)
    assert len(result.created) == 2 and not result.skipped
    assert [attempt(db, a).task_id for a in result.created] == [retried, fresh]
    node1 = [share_to_json(_share("node1"))]
    retried_attempt = [a for a in attempts_of(db, retried) if a.state == AttemptState.CREATED.value]
    assert len(retried_attempt) == 1 and retried_attempt[0].number == 2 and retried_attempt[0].fencing_token == 2
    assert _placement_record(db, fresh) == (
        ("created", 1, 1, leadership.epoch, [share_to_json(_share("node2"))], "placed on node2"),
        ("scheduled", 1, 1, "placed on node2", None),
        ("pending", "scheduled", "placed on node2", "scheduler", "place"),
    )
    assert retried_attempt[0].placement == node1 and retried_attempt[0].epoch == leadership.epoch


def test_bulk_placement_refuses_a_task_that_is_no_longer_pending(service: Service) -> None:
    from meta.model.errors import ConcurrentModification
    from meta.store.lifecycle import NewAttempt, create_attempts

    db = service.db
    _, (t1,) = submit(service, training("a"))
    _, (t2,) = submit(service, training("b"))
    place(db, t2, [share("node2")], AttemptState.RUNNING)
    with db.session() as session, pytest.raises(ConcurrentModification):
        create_attempts(session, [NewAttempt(t1, [], "x"), NewAttempt(t2, [], "x")], "test:bulk")
    assert attempts_of(db, t1) == [] and task(db, t1).state == TaskState.PENDING.value
