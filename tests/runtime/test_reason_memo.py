"""Pending reasons are written only when they change, in bulk, and the memo never outlives a failure."""

from __future__ import annotations

import pytest
from sqlalchemy import event, func, select, update

import meta.cycle.apply.reasons as reasons_module
from meta.cycle.apply.reasons import REASON_BATCH, ReasonMemo
from meta.cycle.apply.transaction import ApplyResult, apply_plan
from meta.cycle.lease import Leadership
from meta.model.durations import utcnow
from meta.policy.plan import PendingReason, Plan, ReasonCode
from meta.service.api import Service
from meta.store.db import Database
from meta.store.models import Task, TaskReason
from tests.runtime.support import lead, node_state, submit, training

NODES = [node_state("node1")]
FULL = PendingReason(ReasonCode.NO_FEASIBLE_NODE, "no node has 2 free a100", "wait")


def _apply(db: Database, plan: Plan, leadership: Leadership, memo: ReasonMemo, jobs: dict[str, str]) -> ApplyResult:
    with db.session() as session:
        result = apply_plan(
            session, plan, leadership, NODES, cycle_started=utcnow(), duration_s=0.01,
            pending_count=len(plan.reasons), job_of_task=jobs, memo=memo,
        )  # fmt: skip
    memo.committed(plan.reasons, leadership.epoch, result.reasons_deferred)  # as the daemon does once committed
    return result


def _waiting(service: Service, count: int) -> dict[str, str]:
    jobs = {}
    for i in range(count):
        job, (task,) = submit(service, training(f"w{i}"))
        jobs[task] = job
    return jobs


def _stored(db: Database) -> dict[str, tuple[str, str, int]]:
    with db.session() as session:
        return {r.task_id: (r.code, r.message, r.cycle) for r in session.scalars(select(TaskReason))}


def _reason_writes(db: Database) -> list[str]:
    """_reason_writes collects the statements that write task_reasons while it is alive."""
    seen: list[str] = []

    def spy(_conn, _cursor, statement: str, *_args) -> None:  # noqa: ANN001 - DBAPI objects
        if "task_reasons" in statement and not statement.lstrip().upper().startswith("SELECT"):
            seen.append(statement)

    event.listen(db.engine, "before_cursor_execute", spy)
    return seen


def test_unchanged_reasons_are_not_written_again(service: Service) -> None:
    db, leadership, memo = service.db, lead(service.db), ReasonMemo()
    jobs = _waiting(service, 5)
    plan = Plan(reasons=dict.fromkeys(jobs, FULL))
    first = _apply(db, plan, leadership, memo, jobs)
    assert first.reasons_written == 5
    assert {code for code, _, _ in _stored(db).values()} == {"NoFeasibleNode"}
    writes = _reason_writes(db)
    second = _apply(db, plan, leadership, memo, jobs)
    assert second.reasons_written == 0 and writes == []
    # the stored rows still say since which cycle the reason holds
    assert {cycle for _, _, cycle in _stored(db).values()} == {first.cycle_id}


def test_a_changed_reason_is_the_only_row_written(service: Service) -> None:
    db, leadership, memo = service.db, lead(service.db), ReasonMemo()
    jobs = _waiting(service, 4)
    tasks = list(jobs)
    _apply(db, Plan(reasons=dict.fromkeys(tasks, FULL)), leadership, memo, jobs)
    quota = PendingReason(ReasonCode.WAITING_FOR_QUOTA, "tenant-a at its limit", "wait", None, "tenant-a")
    changed = _apply(db, Plan(reasons={**dict.fromkeys(tasks, FULL), tasks[2]: quota}), leadership, memo, jobs)
    assert changed.reasons_written == 1
    stored = _stored(db)
    assert stored[tasks[2]] == ("WaitingForQuota", "tenant-a at its limit", changed.cycle_id)
    assert all(stored[t][0] == "NoFeasibleNode" for t in tasks if t != tasks[2])


def test_many_reasons_take_one_statement_per_batch(service: Service) -> None:
    db, leadership, memo = service.db, lead(service.db), ReasonMemo()
    (job,) = _waiting(service, 1).values()
    count = REASON_BATCH + 7
    tasks = [f"00000000-0000-4000-8000-{i:012d}" for i in range(count)]
    with db.session() as session:  # task rows, without the cost of submitting a thousand jobs
        session.add_all(
            Task(id=t, job_id=job, index=i + 1, name=f"t{i}", state="pending", updated_at=utcnow())
            for i, t in enumerate(tasks)
        )
    jobs = dict.fromkeys(tasks, job)
    writes = _reason_writes(db)
    result = _apply(db, Plan(reasons=dict.fromkeys(tasks, FULL)), leadership, memo, jobs)
    assert result.reasons_written == count
    assert len(writes) == 2  # ceil(1007 / 1000) upserts, not one statement per task
    with db.session() as session:
        assert session.scalar(select(func.count()).select_from(TaskReason)) == count


def test_a_period_writes_at_most_its_share_of_changed_reasons_and_the_next_ones_the_rest(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reasons_module, "MAX_REASONS_PER_PERIOD", 3)
    db, leadership, memo = service.db, lead(service.db), ReasonMemo()
    jobs = _waiting(service, 5)
    plan = Plan(reasons=dict.fromkeys(jobs, FULL))
    first = _apply(db, plan, leadership, memo, jobs)
    assert (first.reasons_written, len(first.reasons_deferred)) == (3, 2)
    assert set(_stored(db)) == set(list(jobs)[:3])  # the front of the plan first
    second = _apply(db, plan, leadership, memo, jobs)
    assert (second.reasons_written, second.reasons_deferred) == (2, [])
    assert set(_stored(db)) == set(jobs)
    assert _apply(db, plan, leadership, memo, jobs).reasons_written == 0


def test_a_deferred_task_keeps_its_stored_reason_until_the_new_one_is_written(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, leadership, memo = service.db, lead(service.db), ReasonMemo()
    jobs = _waiting(service, 4)
    _apply(db, Plan(reasons=dict.fromkeys(jobs, FULL)), leadership, memo, jobs)
    monkeypatch.setattr(reasons_module, "MAX_REASONS_PER_PERIOD", 1)
    other = PendingReason(ReasonCode.WAITING_FOR_QUOTA, "tenant-a is at its GPU quota", "wait")
    plan = Plan(reasons=dict.fromkeys(jobs, other))
    written = [_apply(db, plan, leadership, memo, jobs).reasons_written for _ in range(5)]
    assert written == [1, 1, 1, 1, 0]
    assert {code for code, _, _ in _stored(db).values()} == {ReasonCode.WAITING_FOR_QUOTA.value}


def test_a_forgotten_or_other_epoch_memo_writes_everything_again(service: Service) -> None:
    db, leadership, memo = service.db, lead(service.db), ReasonMemo()
    jobs = _waiting(service, 3)
    plan = Plan(reasons=dict.fromkeys(jobs, FULL))
    _apply(db, plan, leadership, memo, jobs)
    with db.session() as session:  # e.g. a commit that failed after the memo was updated
        session.query(TaskReason).delete()
    memo.follow(leadership.epoch + 1)  # another leader wrote meanwhile
    assert _apply(db, plan, leadership, memo, jobs).reasons_written == 3
    with db.session() as session:
        session.query(TaskReason).delete()
    memo.forget()
    assert _apply(db, plan, leadership, memo, jobs).reasons_written == 3
    assert len(_stored(db)) == 3


def _share(ours: str, theirs: str, tenant: str = "tenant-a") -> PendingReason:
    return PendingReason(
        ReasonCode.LOWER_FAIR_SHARE, f"{tenant} is ahead in fair share (share {ours} vs yours {theirs})",
        "would start when capacity frees up", None, tenant,
    )  # fmt: skip


def _quota(tenant: str) -> PendingReason:
    return PendingReason(ReasonCode.WAITING_FOR_QUOTA, f"{tenant} at its limit", "wait", None, tenant)


def test_a_reason_whose_figures_moved_is_not_rewritten_but_a_new_blocker_is(service: Service) -> None:
    db, leadership, memo = service.db, lead(service.db), ReasonMemo()
    jobs = _waiting(service, 2)
    tasks = list(jobs)
    first = _apply(db, Plan(reasons=dict.fromkeys(tasks, _share("1.00", "0.00"))), leadership, memo, jobs)
    moved = _apply(db, Plan(reasons=dict.fromkeys(tasks, _share("0.40", "0.10"))), leadership, memo, jobs)
    assert moved.reasons_written == 0
    stored = _stored(db)  # the figures of the cycle the reason began in; SINCE unchanged
    assert all(stored[t] == ("LowerFairShare", _share("1.00", "0.00").message, first.cycle_id) for t in tasks)
    _apply(db, Plan(reasons=dict.fromkeys(tasks, _quota("tenant-a"))), leadership, memo, jobs)
    other = _apply(db, Plan(reasons={tasks[0]: _quota("tenant-b"), tasks[1]: _quota("tenant-a")}), leadership, memo, jobs)
    assert other.reasons_written == 1
    assert _stored(db)[tasks[0]] == ("WaitingForQuota", "tenant-b at its limit", other.cycle_id)


def test_waiting_for_capacity_is_one_reason_whoever_took_it_but_fragmentation_is_another(service: Service) -> None:
    db, leadership, memo = service.db, lead(service.db), ReasonMemo()
    jobs = _waiting(service, 3)
    tasks = list(jobs)
    first = _apply(db, Plan(reasons=dict.fromkeys(tasks, FULL)), leadership, memo, jobs)
    own = PendingReason(ReasonCode.NO_FEASIBLE_NODE, "tenant-a's own earlier tasks took the free capacity this cycle",
                        "would start when capacity frees up")  # fmt: skip
    higher = PendingReason(ReasonCode.LOWER_PRIORITY, "higher-priority urgent work of tenant-c took the free capacity",
                           "would start when capacity frees up", "job-1", "tenant-c")  # fmt: skip
    # who took this cycle's free capacity changes with every placement, the wait does not
    for turn in ({tasks[0]: own, tasks[1]: _share("0.4", "0.1", "tenant-b"), tasks[2]: higher},
                 {tasks[0]: _share("0.2", "0.1"), tasks[1]: own, tasks[2]: FULL}):
        assert _apply(db, Plan(reasons=turn), leadership, memo, jobs).reasons_written == 0
    assert {cycle for _, _, cycle in _stored(db).values()} == {first.cycle_id}  # waiting for capacity since then
    fragmented = PendingReason(ReasonCode.NO_FEASIBLE_NODE, "no node with 2 a100 GPUs free: 3 are free in all, "
                               "fragmented (at most 1 on n1)", "would start when one node has 2 a100 GPUs free")  # fmt: skip
    then = _apply(db, Plan(reasons={**dict.fromkeys(tasks, FULL), tasks[0]: fragmented, tasks[2]: _quota("tenant-a")}),
                  leadership, memo, jobs)  # fmt: skip
    assert then.reasons_written == 2
    stored = _stored(db)
    assert stored[tasks[0]] == ("NoFeasibleNode", fragmented.message, then.cycle_id)
    assert stored[tasks[2]][0] == "WaitingForQuota"
    back = _apply(db, Plan(reasons=dict.fromkeys(tasks, own)), leadership, memo, jobs)
    assert back.reasons_written == 2  # from fragmentation and from quota back to waiting for capacity


def test_a_new_leader_loads_the_stored_reasons_and_rewrites_none_of_them(service: Service) -> None:
    db, leadership, memo = service.db, lead(service.db), ReasonMemo()
    jobs = _waiting(service, 3)
    tasks = list(jobs)
    plan = Plan(reasons=dict.fromkeys(tasks, FULL))
    first = _apply(db, plan, leadership, memo, jobs)
    successor, epoch = ReasonMemo(), leadership.epoch + 1
    assert not successor.holds(epoch)
    with db.session() as session:  # a code a newer version wrote: not loaded, so written again
        session.execute(update(TaskReason).where(TaskReason.task_id == tasks[2]).values(code="SomeNewerCode"))
    with db.session() as session:
        assert successor.load(session, epoch) == 2
    assert successor.holds(epoch)
    quota = PendingReason(ReasonCode.WAITING_FOR_QUOTA, "tenant-a at its limit", "wait", None, "tenant-a")
    again = _apply(db, Plan(reasons={**plan.reasons, tasks[0]: quota}), Leadership(leadership.holder, leadership.epoch),
                   successor, jobs)  # fmt: skip
    assert again.reasons_written == 2  # only the reason that changed, and the one not loaded
    assert _stored(db)[tasks[1]] == ("NoFeasibleNode", FULL.message, first.cycle_id)
